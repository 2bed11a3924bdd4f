"""Arrays someone sent: `.npy` files and `.npz` archives, read header first.

    matrix = arrays.load_npy("calls/c1.npy", dtypes=arrays.FLOAT_DTYPES, expect=check)
    with arrays.Npz("bundle/params.npz", names=listed, lister="bundle.json") as archive:
        declared = archive.header("params/w")     # shape and dtype; nothing decompressed
        archive.check_size("params/w")            # the zip directory agrees with it
        w = archive.read("params/w")              # at most its declared size

Nothing is allocated or decompressed before its size is known and bounded: regular
files only, a .npy header of at most `HEADER_LIMIT` bytes, a dtype from `DTYPES`, and
data that is exactly what the file or the zip directory declares and fits in memory.
Every problem is an `ArrayFileError` (or the caller's `speechkit.errors.InvalidInput`
subclass) naming the file and the member. Specification: docs/speechkit.md, "arrays".
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import stat
import struct
import tokenize
import warnings
import zipfile
import zlib
from collections.abc import Callable, Collection
from pathlib import Path

import numpy as np

from speechkit import checks, errors, files

HEADER_LIMIT = 10_000
"""Bytes: the longest .npy header read (NumPy's own `max_header_size`, 10,000: a header
is a short dict padded to 64 bytes, longer only for shapes of hundreds of axes). The
length field may claim 4 GB; nothing past this is read."""

DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"})
DTYPES |= {"float16", "float32", "float64"}
"""The dtypes (by name, either byte order) an array someone sent may have: booleans,
integers and real floats; no objects (pickles), strings, complex numbers, dates or
records, which no reader here expects."""

FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
"""Real floats only: what a matrix of probabilities or features may be."""

STORED = frozenset({zipfile.ZIP_STORED})
"""What `np.savez` writes: members stored, not deflated (their data is at most the
archive's size)."""

COMPRESSIONS = STORED | {zipfile.ZIP_DEFLATED}
"""What `np.savez` and `np.savez_compressed` write."""

_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
_LENGTH_FIELD = {(1, 0): 2, (2, 0): 4}  # .npy version -> bytes of its header-length field
_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
_READ_ERRORS = (
    ValueError,  # also UnicodeDecodeError and a literal of more digits than Python reads
    TypeError,
    SyntaxError,  # the header's dict text
    tokenize.TokenError,  # the same, rewritten as a Python 2 header by NumPy
    RecursionError,
    MemoryError,  # the parser's stack on nesting
    EOFError,
    OSError,
    NotImplementedError,  # zipfile: a zip version, encryption or patch data it lacks
    struct.error,  # a zip's records cut short
    zipfile.BadZipFile,
    zlib.error,
)


class ArrayFileError(errors.InvalidInput):
    """A .npy or .npz file that cannot be read as the arrays expected; the message
    names the file (and the member)."""


@dataclasses.dataclass(frozen=True)
class Declared:
    """An array's shape and dtype as a .npy header (or a manifest) declares it."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Bytes of its data (an int of any size: a header may claim any shape)."""
        return math.prod(self.shape) * self.dtype.itemsize

    def text(self) -> str:
        """Its dtype, shape and size, as "float32 (8, 4) (128 bytes)"; the byte order too
        where it is not native (">f4")."""
        native = self.dtype == np.dtype(self.dtype.name)
        name = self.dtype.name if native else self.dtype.str  # ">f4"
        return f"{name} {self.shape} ({checks.byte_text(self.nbytes)})"


# -------------------------------------------------------------------------------- files


def regular_file_size(
    path: str | os.PathLike, *, what: str, error: type = ArrayFileError, follow_links=True
) -> int:
    """The size in bytes of `path`, which must be a regular file (not a folder, device or
    FIFO; a link is followed where `follow_links`, refused otherwise); `error` names the
    file and `what` it should be ("a bundle's params.npz") otherwise."""
    try:
        status = os.stat(path) if follow_links else os.lstat(path)
    except FileNotFoundError:
        reason = "a link that leads to no file" if os.path.islink(path) else "missing"
        raise error(f"{path}: {reason}") from None
    except OSError as err:
        raise error(f"{path}: not readable ({err.strerror})") from None
    if stat.S_ISLNK(status.st_mode):
        raise error(
            f"{path}: a symlink (to {os.readlink(path)}); {what} must be a regular file, "
            "not a link: refused"
        )
    if not stat.S_ISREG(status.st_mode):
        kind = files.file_kind(status.st_mode)
        raise error(f"{path}: not a regular file (a {kind}); expected {what}")
    return status.st_size


# ------------------------------------------------------------------------------ headers


def read_header(stream, where: str, error: type = ArrayFileError) -> tuple[Declared, int]:
    """(the array the .npy at `stream`'s position declares, the header's length in
    bytes, magic included), reading at most `HEADER_LIMIT` bytes past the length field.
    The caller checks the dtype (`require_dtype`). `where` names the file (and member)."""
    try:
        prefix = stream.read(len(_MAGIC) + 2)
    except _READ_ERRORS as err:
        raise error(f"{where}: not readable ({err})"[:600]) from None
    if prefix.startswith(_ZIP_MAGIC):
        raise error(f"{where}: an .npz archive; expected one .npy array")
    try:
        if prefix[: len(_MAGIC)] != _MAGIC or len(prefix) < len(_MAGIC) + 2:
            raise ValueError(f"it starts with {prefix!r}, not the .npy magic {_MAGIC!r}")
        version = (prefix[-2], prefix[-1])
        if version not in _LENGTH_FIELD:
            raise ValueError(f"a .npy format version {version} np.save does not write")
        field = stream.read(_LENGTH_FIELD[version])
        length = int.from_bytes(field, "little")
        if len(field) < _LENGTH_FIELD[version] or length > HEADER_LIMIT:
            raise ValueError(f"a header of {length} bytes; at most {HEADER_LIMIT} are read")
        text = stream.read(length)
        if len(text) < length:
            raise EOFError(f"the header ends after {len(text)} of its {length} bytes")
        header = io.BytesIO(prefix + field + text)
        np.lib.format.read_magic(header)
        with warnings.catch_warnings():  # a Python 2 header, read after rewriting it
            warnings.simplefilter("error", UserWarning)
            shape, _, dtype = _HEADER_READERS[version](header, max_header_size=HEADER_LIMIT)
    except (*_READ_ERRORS, Warning) as err:
        raise error(f"{where}: not a readable .npy header ({err})"[:600]) from None
    if not all(size >= 0 for size in shape):
        raise error(f"{where}: the .npy header declares shape {shape}; sizes are >= 0")
    return Declared(tuple(int(size) for size in shape), dtype), len(prefix + field + text)


def require_dtype(
    declared: Declared, dtypes: Collection[str], where: str, error: type, *, pickle_text: str
) -> None:
    """`declared`'s dtype is one of `dtypes` (names; either byte order); an object
    dtype (a pickle, which np.load(allow_pickle=False) refuses too) is refused with
    `pickle_text` ("path: not a data-only .npz: member")."""
    if declared.dtype.hasobject:
        raise error(f"{pickle_text} holds pickled objects (dtype {declared.dtype})")
    if declared.dtype.name not in dtypes or declared.dtype.fields is not None:
        raise error(
            f"{where}: dtype {declared.dtype.name} ({declared.dtype.str}); expected one of "
            f"{', '.join(sorted(dtypes))}"
        )


# ----------------------------------------------------------------------------- .npy files


def load_npy(
    path: str | os.PathLike,
    *,
    dtypes: Collection[str] = DTYPES,
    expect: Callable[[tuple[int, ...]], None] | None = None,
    error: type = ArrayFileError,
) -> np.ndarray:
    """The array in the .npy file `path` (a regular file; a link is followed), read
    header first: its dtype one of `dtypes`, its data exactly the bytes after the header
    (so a header cannot claim more than the file holds) and within the memory
    available, and `expect(shape)` (which raises the caller's error for a shape it does
    not want) called before any data is read. `error` names the file otherwise."""
    size = regular_file_size(path, what="a .npy array", error=error)
    try:
        with open(path, "rb") as source:
            declared, header_bytes = read_header(source, str(path), error)
    except OSError as err:
        raise error(f"{path}: not readable ({err.strerror})") from None
    require_dtype(declared, dtypes, str(path), error, pickle_text=f"{path}: not a data-only .npy:")
    if header_bytes + declared.nbytes != size:
        raise error(
            f"{path}: the .npy header declares {declared.text()}; the file holds "
            f"{checks.byte_text(size - header_bytes)} after its {header_bytes}-byte header"
        )
    if expect is not None:
        expect(declared.shape)
    _require_memory(str(path), declared, error)
    try:
        with open(path, "rb") as source:
            array = np.lib.format.read_array(source, allow_pickle=False)
    except _READ_ERRORS as err:
        raise error(f"{path}: not readable ({err})"[:600]) from None
    _require_read_as(array, declared, str(path), error)
    return array


def _require_memory(where: str, declared: Declared, error: type) -> None:
    try:
        checks.require_memory(where, declared.nbytes, f"the array ({declared.text()})")
    except ValueError as err:
        raise error(str(err)) from None


def _require_read_as(array: np.ndarray, declared: Declared, where: str, error: type) -> None:
    if Declared(array.shape, array.dtype) != declared:
        raise error(f"{where}: read as {array.dtype} {array.shape}, not {declared.text()}")


# ---------------------------------------------------------------------------- .npz files


class Npz:
    """An .npz archive someone sent, opened without decompressing any array: its members
    must be exactly `names` (each "<name>.npy", once), stored or deflated as
    `compressions` allows, not encrypted, and none larger than the archive. `header`,
    `check_size` and `read` then read one array each (see the module docstring).

    Args:
      path: the archive (the caller checks what kind of file it is and its size).
      names: the arrays it must hold; `lister` says who lists them ("bundle.json"), for
        the messages.
      compressions: the zip methods allowed (`STORED`: what `np.savez` writes).
      dtypes: the dtype names allowed.
      error: the `InvalidInput` subclass raised, naming the archive and the member.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        names: Collection[str],
        lister: str,
        compressions: Collection[int] = COMPRESSIONS,
        dtypes: Collection[str] = DTYPES,
        error: type = ArrayFileError,
    ):
        self.path, self.names, self.lister = Path(path), names, lister
        self.compressions, self.dtypes, self.error = compressions, dtypes, error
        self._headers: dict[str, tuple[Declared, int]] = {}
        try:
            self.size = os.path.getsize(path)
            self.zip = zipfile.ZipFile(path)
        except _READ_ERRORS as err:
            raise error(f"{path}: not an .npz (a zip of .npy arrays): {err}"[:600]) from None
        try:
            self.members = self._members()
        except BaseException:
            self.zip.close()
            raise

    def _members(self) -> dict[str, zipfile.ZipInfo]:
        """{array name: its zip member}, each member checked (see the class docstring)."""
        members: dict[str, zipfile.ZipInfo] = {}
        for info in self.zip.infolist():
            name = info.filename.removesuffix(".npy")
            where = f"{self.path}: {info.filename}"
            if name == info.filename or name not in self.names:
                raise self.error(f"{where}: not an array {self.lister} lists")
            if name in members:
                raise self.error(f"{where}: stored twice")
            if info.flag_bits & 0x1 or info.compress_type not in self.compressions:
                raise self.error(f"{where}: encrypted or compressed other than np.savez does")
            if info.compress_size > self.size:
                raise self.error(
                    f"{where}: {checks.byte_text(info.compress_size)} compressed in the zip "
                    f"directory, in an archive of {checks.byte_text(self.size)}"
                )
            if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
                raise self.error(
                    f"{where}: stored, yet {checks.byte_text(info.file_size)} uncompressed "
                    f"and {checks.byte_text(info.compress_size)} compressed in the zip directory"
                )
            members[name] = info
        missing = [name for name in self.names if name not in members]
        if missing:
            raise self.error(f"{self.path}: {missing[0]}: missing (listed in {self.lister})")
        return members

    def _where(self, name: str) -> str:
        return f"{self.path}: {self.members[name].filename}"

    def header(self, name: str) -> Declared:
        """The shape and dtype the member `name`'s .npy header declares (its dtype one of
        the allowed); only the header's bytes are decompressed."""
        if name not in self._headers:
            try:
                with self.zip.open(self.members[name]) as stream:
                    self._headers[name] = read_header(stream, self._where(name), self.error)
            except _READ_ERRORS as err:  # opening the member: its local header
                raise self.error(f"{self._where(name)}: not readable ({err})"[:600]) from None
        declared = self._headers[name][0]
        pickle_text = f"{self.path}: not a data-only .npz: {self.members[name].filename}"
        require_dtype(declared, self.dtypes, self._where(name), self.error, pickle_text=pickle_text)
        return declared

    def check_size(self, name: str) -> Declared:
        """The member's uncompressed size in the zip directory is its header's length and
        the data the header declares: what `read` then decompresses, at most."""
        declared = self.header(name)
        info, header_bytes = self.members[name], self._headers[name][1]
        if info.file_size != header_bytes + declared.nbytes:
            raise self.error(
                f"{self._where(name)}: {checks.byte_text(info.file_size)} uncompressed in the "
                f"zip directory; a {header_bytes}-byte header and {declared.text()} take "
                f"{header_bytes + declared.nbytes} bytes"
            )
        return declared

    def read(self, name: str) -> np.ndarray:
        """The array `name`, its header and size checked first (`check_size`) and its
        data within the memory available; read as exactly the declared array."""
        declared = self.check_size(name)
        _require_memory(self._where(name), declared, self.error)
        try:
            with self.zip.open(self.members[name]) as stream:
                array = np.lib.format.read_array(stream, allow_pickle=False)
        except _READ_ERRORS as err:
            raise self.error(f"{self.path}: {name}: not readable ({err})"[:600]) from None
        _require_read_as(array, declared, f"{self.path}: {name}", self.error)
        return array

    def close(self) -> None:
        self.zip.close()

    def __enter__(self) -> Npz:
        return self

    def __exit__(self, *_) -> None:
        self.close()
