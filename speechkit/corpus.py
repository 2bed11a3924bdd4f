"""Corpus building: render items in parallel worker processes, cached one file per item.

    items = render_cached(render_one, jobs, cache_dir, "synthetic_kws/quick", types=(Item,))

`render_one(job)` must be a module-level function (it runs in forkserver workers: call
this from a CLI or a test) returning NumPy arrays, plain Python values and the
dataclasses named in `types`. Each item is written atomically to a data-only .npz of its
own, so an interrupted build resumes and a cache someone shared cannot run code; an item
that cannot be read back is rendered again. The item rules and the cache format:
docs/speechkit.md, "corpus".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import multiprocessing
import numbers
import os
import sys
import time
import types as builtin_types
import typing
import zipfile
from collections.abc import Callable, Sequence

import numpy as np

from speechkit import errors, files, progress

ITEM_SUFFIX = ".npz"
DESCRIPTION = "item"  # the npz member holding the item's JSON description (UTF-8 bytes)
MAX_DEPTH = 64  # nesting of an item's description (dataclasses, tuples, lists, dicts)
KINDS = ("array", "scalar", "float", "tuple", "list", "dict", "dataclass")


class CacheItemError(errors.InvalidInput):
    """A render-cache file that is not a cache item this code wrote; the message names
    the file and what is wrong with it."""


class ArrayRecordByDefault:
    """Mixin for the project's TFDS builders: ArrayRecord output unless a caller asks for
    another `file_format`, so `tfds.builder(name).download_and_prepare()` and
    `tfds.data_source` work without TensorFlow (TFDS's own default is TFRecord).

        class MyCorpus(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder): ...
    """

    def __init__(self, *, file_format: str | None = "array_record", **kwargs):
        super().__init__(file_format=file_format, **kwargs)


def cache_dir(builder, *settings) -> str:
    """`<data_dir>/<builder name>/render_cache/<hash of settings>`: one render cache per
    distinct `settings` (include the builder's VERSION, size, seed and every config that
    changes the rendered items), shared by all of the builder's configs. The builder's
    data_dir may point into a config's temporary folder while it is being prepared, so
    the dataset root is found by name."""
    root = os.path.abspath(builder.data_dir)
    while os.path.basename(root) != builder.name and os.path.dirname(root) != root:
        root = os.path.dirname(root)
    key = hashlib.sha1(repr(settings).encode()).hexdigest()[:12]
    return os.path.join(root, "render_cache", key)


def _run(task):
    index, render_one, job = task
    return index, render_one(job)


def _item_path(cache_dir: str, index: int) -> str:
    return os.path.join(cache_dir, f"item-{index:06d}{ITEM_SUFFIX}")


# ---------------------------------------------------------------------------- item <-> data


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class _Codec:
    """Items <-> (JSON description, {member name: array}) for the dataclasses `types`."""

    def __init__(self, types: Sequence[type]):
        for cls in types:
            if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
                raise TypeError(f"render_cached types: {cls!r} is not a dataclass type")
        self.item_type = types[0] if types else None
        self.types = {_type_name(cls): cls for cls in types}
        # The annotations of every field (resolved once: a name that does not resolve is
        # the caller's error, found before anything is rendered).
        self.hints = {name: typing.get_type_hints(cls) for name, cls in self.types.items()}

    # ------------------------------------------------------------------ encoding

    def encode(self, item) -> tuple[bytes, dict[str, np.ndarray]]:
        arrays: dict[str, np.ndarray] = {}
        description = self._encode(item, arrays)
        text = json.dumps(description, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8"), arrays

    def _encode(self, value, arrays: dict[str, np.ndarray]):
        # Exact types only: a subclass (np.float64 is a float, np.str_ a str, a namedtuple
        # a tuple) would not come back as itself.
        if isinstance(value, np.ndarray | np.generic):
            if value.dtype.hasobject:
                raise TypeError(f"render_cached: an object array ({value.dtype}) is not data")
            name = f"a{len(arrays)}"
            arrays[name] = np.asarray(value)
            return {"array" if isinstance(value, np.ndarray) else "scalar": name}
        if value is None or type(value) in (bool, int, str):
            return value
        if type(value) is float:
            return value if math.isfinite(value) else {"float": repr(value)}
        if type(value) in (tuple, list):
            kind = "tuple" if type(value) is tuple else "list"
            return {kind: [self._encode(v, arrays) for v in value]}
        if type(value) is dict:
            pairs = [[self._encode(k, arrays), self._encode(v, arrays)] for k, v in value.items()]
            return {"dict": pairs}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            name = _type_name(type(value))
            if self.types.get(name) is not type(value):
                raise TypeError(
                    f"render_cached: an item holds a {name}, not one of its types "
                    f"{sorted(self.types)} (add it to render_cached's types)"
                )
            fields = {
                field.name: self._encode(getattr(value, field.name), arrays)
                for field in dataclasses.fields(value)
                if field.init
            }
            return {"dataclass": name, "fields": fields}
        raise TypeError(f"render_cached: an item holds a {type(value).__name__}, which is not data")

    # ------------------------------------------------------------------ decoding

    def decode(self, text: bytes, arrays: dict[str, np.ndarray]):
        try:
            description = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CacheItemError(f"member {DESCRIPTION!r} is not JSON ({err})") from None
        item = self._decode(description, arrays, "item", 0)
        if self.item_type is not None and type(item) is not self.item_type:
            raise CacheItemError(
                f"holds a {type(item).__name__}, expected a {_type_name(self.item_type)}"
            )
        return item

    def _decode(self, value, arrays: dict[str, np.ndarray], where: str, depth: int):
        if depth > MAX_DEPTH:
            raise CacheItemError(f"{where}: nested deeper than {MAX_DEPTH}")
        if value is None or isinstance(value, bool | int | float | str):
            return value
        kinds = [kind for kind in KINDS if isinstance(value, dict) and kind in value]
        expected = {"dataclass": {"dataclass", "fields"}}.get(kinds[0], set(kinds)) if kinds else ()
        if len(kinds) != 1 or set(value) != expected:
            raise CacheItemError(f"{where}: unexpected {type(value).__name__} {value!r:.60}")
        kind, body = kinds[0], value[kinds[0]]
        if kind in ("array", "scalar"):
            if not isinstance(body, str) or body not in arrays:
                raise CacheItemError(f"{where}: no array {body!r:.60} in the file")
            array = arrays[body]
            if kind == "scalar":
                if array.ndim:
                    raise CacheItemError(f"{where}: scalar {body} has shape {array.shape}")
                return array[()]
            return array
        if kind == "float":
            if body not in ("nan", "inf", "-inf"):
                raise CacheItemError(f"{where}: not a float: {body!r:.60}")
            return float(body)
        if kind in ("tuple", "list"):
            if not isinstance(body, list):
                raise CacheItemError(f"{where}: expected a list, got {type(body).__name__}")
            decoded = [
                self._decode(v, arrays, f"{where}[{i}]", depth + 1) for i, v in enumerate(body)
            ]
            return tuple(decoded) if kind == "tuple" else decoded
        if kind == "dict":
            if not isinstance(body, list) or not all(
                isinstance(pair, list) and len(pair) == 2 for pair in body
            ):
                raise CacheItemError(f"{where}: expected a list of [key, value] pairs")
            result = {}
            for i, (key, item) in enumerate(body):
                key = self._decode(key, arrays, f"{where} key {i}", depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise CacheItemError(f"{where}: key {i} is not hashable") from None
                result[key] = self._decode(item, arrays, f"{where}[{key!r}]", depth + 1)
            return result
        if kind == "dataclass":
            return self._decode_dataclass(body, value["fields"], arrays, where, depth)
        raise CacheItemError(f"{where}: unknown kind {kind!r:.60}")

    def _decode_dataclass(self, name, fields, arrays, where: str, depth: int):
        if name not in self.types:
            raise CacheItemError(f"{where}: type {name!r:.80} is not one of {sorted(self.types)}")
        cls, hints = self.types[name], self.hints[name]
        expected = [field.name for field in dataclasses.fields(cls) if field.init]
        if not isinstance(fields, dict) or sorted(fields) != sorted(expected):
            found = sorted(fields) if isinstance(fields, dict) else type(fields).__name__
            raise CacheItemError(f"{where}: {name} needs fields {expected}, found {found}")
        values = {}
        for field in expected:
            value = self._decode(fields[field], arrays, f"{where}.{field}", depth + 1)
            if not _fits(value, hints.get(field, typing.Any)):
                raise CacheItemError(
                    f"{where}.{field}: {type(value).__name__} {value!r:.60} does not fit the "
                    f"annotation {hints.get(field)}"
                )
            values[field] = value
        try:
            return cls(**values)
        except (TypeError, ValueError) as err:
            raise CacheItemError(f"{where}: {name} refuses its fields ({err})") from None


def _fits(value, hint) -> bool:
    """Whether `value` is of the annotation `hint` (NumPy scalars count as numbers;
    annotations other than classes, unions, tuples, lists and dicts are not checked)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if origin in (typing.Union, builtin_types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return not args or (len(args) == len(value) and all(map(_fits, value, args)))
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value if args)
    if origin is dict:
        return isinstance(value, dict) and all(
            _fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items() if args
        )
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)
    if hint is bool:
        return isinstance(value, bool | np.bool_)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


# ---------------------------------------------------------------------------- files


def _write_item(path: str, item, codec: _Codec) -> None:
    text, arrays = codec.encode(item)
    files.save_npz(path, **{DESCRIPTION: np.frombuffer(text, np.uint8)}, **arrays)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """One `.npy` member, its header checked against its size before its data is read."""
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
        else:
            raise CacheItemError(f"member {info.filename!r:.80}: .npy version {version}")
        if dtype.hasobject:
            raise CacheItemError(f"member {info.filename!r:.80}: an object array (pickled data)")
        size = math.prod(shape) * dtype.itemsize
        if size != info.file_size - member.tell():
            raise CacheItemError(
                f"member {info.filename!r:.80}: its header says {shape} {dtype}, {size} bytes; "
                f"it holds {info.file_size - member.tell()}"
            )
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def _read_item(path: str, codec: _Codec):
    """The item in `path`, or a CacheItemError saying what is wrong with the file."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            names = [info.filename for info in infos]
            if f"{DESCRIPTION}.npy" not in names or len(names) != len(set(names)):
                raise CacheItemError(f"members {names[:8]}: expected one {DESCRIPTION!r}")
            arrays = {}
            for info in infos:
                if not info.filename.endswith(".npy"):
                    raise CacheItemError(f"member {info.filename!r:.80}: not an .npy array")
                if info.compress_type != zipfile.ZIP_STORED:
                    raise CacheItemError(f"member {info.filename!r:.80}: compressed")
                arrays[info.filename[: -len(".npy")]] = _read_member(archive, info)
        text = arrays.pop(DESCRIPTION)
        if text.dtype != np.uint8 or text.ndim != 1:
            raise CacheItemError(f"member {DESCRIPTION!r}: {text.dtype} {text.shape}, not bytes")
        return codec.decode(text.tobytes(), arrays)
    except CacheItemError as err:
        raise CacheItemError(f"{path}: {err}") from None
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, RecursionError) as err:
        raise CacheItemError(f"{path}: not a readable cache item ({err})") from None


# ---------------------------------------------------------------------------- rendering


def render_cached(
    render_one: Callable,
    jobs: Sequence,
    cache_dir: str,
    name: str,
    workers: int | None = None,
    *,
    types: Sequence[type] = (),
) -> list:
    """[render_one(job) for job in jobs], computed by `workers` processes and cached.
    `types`: the dataclasses an item is made of, the item's own type first (module
    docstring); a cached item is rebuilt only from these."""
    codec = _Codec(types)
    os.makedirs(cache_dir, exist_ok=True)
    paths = [_item_path(cache_dir, i) for i in range(len(jobs))]
    items: list = [None] * len(jobs)
    todo = []
    for index, path in enumerate(paths):
        if not os.path.exists(path):
            todo.append(index)
            continue
        try:
            items[index] = _read_item(path, codec)
        except CacheItemError as err:
            print(f"[{name}] rendering again: {err}", file=sys.stderr, flush=True)
            todo.append(index)
    old = [i for i in todo if os.path.exists(os.path.splitext(paths[i])[0] + ".pkl")]
    if old:
        print(
            f"[{name}] rendering again {len(old)} items cached as pickles by an older version "
            f"(item-*.pkl in {cache_dir}: never opened, they can be deleted)",
            file=sys.stderr,
            flush=True,
        )
    if todo:
        workers = workers or min(os.cpu_count() or 1, len(todo))
        started, totals = time.perf_counter(), {}
        tasks = [(i, render_one, jobs[i]) for i in todo]
        context = multiprocessing.get_context("forkserver")
        with (
            context.Pool(workers) as pool,
            progress.bar(len(todo), f"[{name}] render", "item") as shown,
        ):
            for index, item in pool.imap_unordered(_run, tasks):
                _write_item(paths[index], item, codec)
                # Read back: a rendered item is the same object a later build reads.
                try:
                    items[index] = _read_item(paths[index], codec)
                except CacheItemError as err:
                    raise TypeError(f"[{name}] an item render_one made: {err}") from None
                for stage, seconds in getattr(item, "stage_seconds", {}).items():
                    totals[stage] = totals.get(stage, 0.0) + seconds
                shown.update(1)
        elapsed = time.perf_counter() - started
        print(
            f"[{name}] rendered {len(todo)} items in {elapsed:.0f} s; stage seconds (summed over "
            "workers): " + ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in totals.items()),
            file=sys.stderr,
        )
    return items


def record_engine(record) -> str:
    """The synthesiser that spoke a corpus record: the engine of its `speaker`
    ("engine:voice...", keyword corpora) or of its first `speakers` entry ("|"-joined,
    calls); "recorded" for a speaker name without an engine (your own recordings)."""
    speaker = record["speaker"] if "speaker" in record else record["speakers"]
    speaker = speaker.decode() if isinstance(speaker, bytes) else str(speaker)
    return speaker_engine(speaker.split("|", 1)[0])


def record_engines(source) -> np.ndarray:
    """str [len(source)]: the engine of each record of a data source (`record_engine`)."""
    return np.array([record_engine(source[i]) for i in range(len(source))])


def speaker_engine(speaker: str) -> str:
    """The engine of a speaker name ("espeak:en-us+f3@1.05" -> "espeak"); "recorded" for a
    name without one."""
    return speaker.split(":", 1)[0] if ":" in speaker else "recorded"


class EngineSubset:
    """The records of a data source (`tfds.data_source` split) that some engines spoke,
    as a data source of its own: the leave-one-engine-out protocol on one corpus that all
    engines speak. `indices` int64 [n]: the kept records' indices in `source`."""

    def __init__(self, source, engines):
        self.source, self.engines = source, tuple(engines)
        found = record_engines(source)
        self.indices = np.flatnonzero(np.isin(found, self.engines)).astype(np.int64)
        if not self.indices.size:
            raise ValueError(
                f"engines {list(self.engines)}: no record spoken by them (the records' "
                f"engines: {sorted(set(found))})"
            )

    def __len__(self) -> int:
        return int(self.indices.size)

    def __getitem__(self, index: int):
        return self.source[int(self.indices[index])]


def engine_list(engines: str) -> tuple[str, ...]:
    """A comma-separated engine list ("espeak,piper") as a tuple; "" gives ()."""
    return tuple(name.strip() for name in engines.split(",") if name.strip())
