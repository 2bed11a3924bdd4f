"""Files written atomically, so that a killed run leaves the old file or none, never a
part of one; and `load_json`, the one bounded reader of JSON that someone else sent.

    with files.atomic_path("out/report.wav") as temporary:   # any writer taking a path
        soundfile.write(temporary, samples, 16000)
    with files.atomic_open("out/table.txt") as out:          # a file object
        out.write(text)
    files.write_json("out/results.json", payload)
    payload = files.load_json("their/labels.json")           # bounded; a named error

Also `save_figure`, `save_npz`, `read_json`, `sha256` and `stem_clash`. Where the
temporary file goes, and `load_json`'s bounds: docs/speechkit.md, "files".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator

import numpy as np

from speechkit import errors

JSON_LIMIT = 16 << 20
"""Bytes: the largest JSON file `load_json` reads (16 MiB; parsing it takes at most
about 400 MB). Label sets larger than this go in one file per recording."""


class JsonFileError(errors.InvalidInput):
    """A JSON file that cannot be read; the message names the file."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yields a temporary path beside `path` (parent folders created); on a clean exit
    it replaces `path`, on an error it is removed."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    suffix = ".tmp" + os.path.splitext(path)[1]
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=suffix)
    os.close(handle)
    os.chmod(temporary, _default_mode())  # mkstemp's 0o600 would follow the rename
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _default_mode() -> int:
    """The mode a plain `open` gives a new file: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w"):
    """`open(temporary, mode)` for writing, renamed to `path` when the block ends."""
    if not mode.startswith("w"):
        raise ValueError(f"atomic_open: mode {mode!r}, expected a writing mode ('w', 'wb')")
    with atomic_path(path) as temporary, open(temporary, mode) as out:
        yield out


def write_json(path: str | os.PathLike, payload) -> None:
    """`payload` as indented JSON with a final newline, written atomically."""
    with atomic_open(path) as out:
        json.dump(payload, out, indent=2)
        out.write("\n")


def save_figure(figure, path: str | os.PathLike, **savefig_kwargs) -> None:
    """`figure.savefig(path, **savefig_kwargs)` written atomically (a matplotlib figure;
    the format follows `path`'s suffix unless `format=` says)."""
    with atomic_path(path) as temporary:
        figure.savefig(temporary, **savefig_kwargs)


def save_npz(path: str | os.PathLike, **arrays) -> None:
    """`np.savez(path, **arrays)` written atomically, at `path` exactly (np.savez given a
    name would add ".npz" to one without it)."""
    with atomic_open(path, "wb") as out:
        np.savez(out, **arrays)


def sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, hex, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_json(path: str | os.PathLike):
    """The JSON in `path` (`load_json`), or None when there is no such file."""
    if not os.path.lexists(path):
        return None
    return load_json(path)


def load_json(path: str | os.PathLike, *, limit: int = JSON_LIMIT, object_pairs_hook=None):
    """The JSON value in the regular file `path` (a link is followed), read with at most
    `limit` bytes in memory; `object_pairs_hook` as `json.load`'s (an InvalidInput it
    raises gets the file's name in front). A JsonFileError names the file otherwise."""
    path = os.fspath(path)
    text = read_regular_file(path, limit, what="JSON file", error=JsonFileError)
    try:
        return json.loads(text.decode("utf-8"), object_pairs_hook=object_pairs_hook)
    except errors.InvalidInput as err:
        raise type(err)(f"{path}: {err}") from None
    except RecursionError:
        raise JsonFileError(f"{path}: not valid JSON (nested deeper than read)") from None
    except ValueError as err:  # JSON, UTF-8, an integer longer than Python converts
        raise JsonFileError(f"{path}: not valid JSON ({err})"[:600]) from None


def read_regular_file(path: str, limit: int, *, what: str, error=errors.InvalidInput) -> bytes:
    """The bytes of `path`, which must be a regular file (not a device, FIFO or folder;
    a link is followed) of at most `limit` bytes: checked before reading, and the read
    stops at limit + 1 bytes in case the file grows. `error` names the file."""
    try:
        status = os.stat(path)
    except OSError as err:
        reason = "a link that leads to no file" if os.path.islink(path) else err.strerror
        raise error(f"{path}: not readable ({reason})") from None
    if not stat.S_ISREG(status.st_mode):
        raise error(
            f"{path}: not a regular file (a {file_kind(status.st_mode)}), expected a {what}"
        )
    if status.st_size > limit:
        raise error(f"{path}: {status.st_size} bytes, more than a {what}'s limit of {limit} bytes")
    try:
        with open(path, "rb") as source:
            data = source.read(limit + 1)
    except OSError as err:
        raise error(f"{path}: not readable ({err.strerror})") from None
    if len(data) > limit:
        raise error(f"{path}: grew past a {what}'s limit of {limit} bytes while read")
    return data


def file_kind(mode: int) -> str:
    """What a non-regular `os.stat` mode is, in words ("FIFO", "folder", ...)."""
    kinds = {
        stat.S_ISDIR: "folder",
        stat.S_ISCHR: "character device",
        stat.S_ISBLK: "block device",
        stat.S_ISFIFO: "FIFO",
        stat.S_ISSOCK: "socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "special file")


def stem_clash(names: Iterable[str]) -> tuple[str, str] | None:
    """The first two of `names` (file names or paths) that differ only in their suffix
    (`c1.wav` and `c1.flac`: one recording twice), in their order; None when no two do.
    The corpus builders reading a user's folder refuse such a pair, each in its words."""
    seen: dict[str, str] = {}
    for name in names:
        stem = os.path.splitext(name)[0]
        if stem in seen:
            return seen[stem], name
        seen[stem] = name
    return None
