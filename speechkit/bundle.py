"""Model bundles: a trained model saved as data only (arrays and JSON), for any task.

A bundle is a folder of bundle.json (task, format version, model and feature configs,
labels, decoding settings, corpus, and the parameters' manifest) and params.npz (one
array per parameter, named by its tree path). `save` writes one; `load` reads one back
and checks every part against the task's `TaskFormat` (`cskws_jax.bundle`,
`multiqt_jax.bundle`), migrating older formats in memory (`MIGRATIONS`). Loading a
bundle someone sent runs no code from it and stays within bounded memory. Every problem
is a `BundleError` naming the file and the field:

    bundle/bundle.json: task: expected 'cskws', got 'multiqt' (a bundle of another task)

Specification: docs/architecture.md, "Data contracts" (model bundles), "Compatibility"
and "Inputs from others"; why .npz, and the write order: docs/speechkit.md, "bundle".
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import os
import typing
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from speechkit import arrays, checks, errors, files
from speechkit.dataclass_json import from_dict
from speechkit.frontend import FeatureConfig

FORMAT = "speechkit-bundle"
FORMAT_VERSION = 1
MIGRATIONS: dict[int, Callable[[dict], dict]] = {}
"""{version v: bundle.json of format v -> the same bundle's bundle.json of format v + 1}
(a function of the parsed JSON, no I/O); `load` applies them in order, from the file's
version up to `FORMAT_VERSION`. Empty while every bundle ever written is version 1."""
MANIFEST = "bundle.json"
PARAMS = "params.npz"
_SEPARATOR = "/"  # between the keys of a tree path
_DTYPES = arrays.DTYPES  # what a parameter may be: booleans, integers and real floats
_FIELDS = (
    "format",
    "format_version",
    "task",
    "model_config_type",
    "model_config",
    "features",
    "labels",
    "decoding",
    "corpus",
    "params",
)


class BundleError(errors.InvalidInput):
    """A bundle that cannot be used; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Bundle:
    """What a bundle holds besides its parameters, rebuilt and checked."""

    path: str  # the bundle's folder
    task: str  # "cskws", "multiqt"
    format_version: int
    model_config: typing.Any  # the task's model config dataclass
    features: FeatureConfig  # the front end the model was trained with
    labels: tuple[str, ...]  # class or keyword names, in output order
    decoding: typing.Any  # the task's decoding settings dataclass
    corpus: str  # the training corpus's name (e.g. "synthetic_kws/quick")


# ------------------------------------------------------------------------------ saving


def save(
    path: str | os.PathLike,
    *,
    task: str,
    params,
    model_config,
    features: FeatureConfig,
    labels,
    decoding,
    corpus: str,
    expected_params=None,
) -> Path:
    """Writes a bundle folder at `path` (created; an older bundle there is replaced).

    Args:
      path: the bundle folder.
      task: the task's name, checked again by `load`.
      params: a nested dict of arrays (the model's variables, e.g. {"params": {...}}).
      model_config, decoding: dataclass instances of the task's classes.
      features: the front end's settings.
      labels: class or keyword names, in output order.
      corpus: the training corpus's name.
      expected_params: a tree of shapes (e.g. `jax.eval_shape` of the model's init);
        when given, `params` must match it (a bundle is never written wrong).

    Returns:
      The folder's path.
    """
    folder = Path(path)
    flat = flatten(params)
    if expected_params is not None:
        check_params(flat, expected_params, f"{folder / PARAMS} (to save)")
    for name, array in flat.items():
        if array.dtype.name not in _DTYPES:
            raise BundleError(f"{folder / PARAMS}: {name}: dtype {array.dtype} cannot be stored")
    for name, config in (
        ("model_config", model_config),
        ("features", features),
        ("decoding", decoding),
    ):
        try:  # what load will do: a config that cannot come back is never written
            from_dict(type(config), to_dict(config), name)
        except (TypeError, ValueError) as err:
            raise BundleError(f"{folder / MANIFEST} (to save): {err}") from None
    folder.mkdir(parents=True, exist_ok=True)
    with files.atomic_path(folder / PARAMS) as temporary:
        np.savez(temporary, **flat)
        digest = files.sha256(temporary)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "task": task,
        "model_config_type": type(model_config).__name__,
        "model_config": to_dict(model_config),
        "features": to_dict(features),
        "labels": [str(label) for label in labels],
        "decoding": to_dict(decoding),
        "corpus": str(corpus),
        "params": {
            "file": PARAMS,
            "sha256": digest,
            "arrays": {
                name: {"shape": list(a.shape), "dtype": a.dtype.name} for name, a in flat.items()
            },
        },
    }
    files.write_json(folder / MANIFEST, manifest)
    return folder


def full_install_command() -> str:
    """The command that adds the full install (model code: flax, sequence-layers) from
    where this one came: the source folder it was installed from (pip's record of a
    local install, or the checkout the code runs from); no index has the package."""
    source = _install_source()
    if source is None:
        return "pip install 'PATH[full]' (PATH: the toolkit's source folder, a clone)"
    return f"pip install '{source}[full]'"


def _install_source() -> str | None:
    """The folder the toolkit was installed from, or the checkout it runs from; None."""
    try:
        record = importlib.metadata.distribution("speech-tracking-jax").read_text("direct_url.json")
        url = json.loads(record or "{}").get("url", "")
    except (importlib.metadata.PackageNotFoundError, ValueError, AttributeError):
        url = ""
    if url.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlparse(url).path)
    checkout = Path(__file__).resolve().parents[1]
    return str(checkout) if (checkout / "pyproject.toml").is_file() else None


FULL_INSTALL = full_install_command()
"""The install a bundle (model code: flax, sequence-layers) needs; the light one
(`.[infer]`) runs export folders (`speechkit.export_read`)."""


def model_code(module: str, what: str):
    """The module named `module` (model code: it needs the full install), imported for
    `what` (e.g. "out/bundle: a bundle"); a `BundleError` saying what to install where
    the light install lacks a package it needs."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise BundleError(
            f"{what} runs with the model code, which needs {err.name} (not installed: this "
            f"is the light install, which runs export folders and the shipped models): "
            f"{FULL_INSTALL}; or export it where the full install is (stj-export BUNDLE "
            "OUT_DIR) and run OUT_DIR here"
        ) from None


@dataclasses.dataclass(frozen=True)
class TaskFields:
    """What one task's bundle.json and export.json fields are, without its model code
    (so an export folder is read by the light install, `speechkit.export_read.read_folder`).

    model_config_type: the model's config dataclass;
    decoding_type: its decoding settings' dataclass;
    check_parts: (model config, features, labels, where) -> None, raising
      `BundleError` when the labels or the front end do not fit the model config.
    """

    task: str
    model_config_type: type
    decoding_type: type
    check_parts: Callable[..., None]


@dataclasses.dataclass(frozen=True)
class TaskFormat(TaskFields):
    """One task's bundle parts, so that each task's `save` / `load` is one call here:
    its `TaskFields` and

    model_type: the (flax) model class, built as `model_type(config)`; a
      `parameter_parts` method of the config type (config -> {field: (arrays, scalars)},
      counted without building the model) is `load`'s `parameter_parts`;
    expected_params: model config -> its parameter tree of shapes (see `load`).
    """

    model_type: type
    expected_params: Callable[[typing.Any], typing.Any]

    @classmethod
    def of(cls, fields: TaskFields, model_type: type, expected_params: Callable) -> TaskFormat:
        """The format of a task with these fields, model class and parameter shapes."""
        parts = {field.name: getattr(fields, field.name) for field in dataclasses.fields(fields)}
        return cls(**parts, model_type=model_type, expected_params=expected_params)

    def save(self, path, net, params, labels, decoding, corpus: str, features) -> Path:
        """`save` of `net`'s config and `params`; `labels` name its outputs in order;
        `decoding` None means the decoding type's defaults."""
        config, labels = net.config, [str(label) for label in labels]
        self.check_parts(config, features, labels, f"{Path(path) / MANIFEST} (to save)")
        return save(
            path,
            task=self.task,
            params=params,
            model_config=config,
            features=features,
            labels=labels,
            decoding=decoding or self.decoding_type(),
            corpus=corpus,
            expected_params=self.expected_params(config),
        )

    def load(self, path):
        """(model, params as JAX arrays, `Bundle`) of a bundle folder of this task."""
        import jax
        import jax.numpy as jnp

        params, info = load(
            path,
            task=self.task,
            model_config_type=self.model_config_type,
            decoding_type=self.decoding_type,
            expected_params=self.expected_params,
            parameter_parts=getattr(self.model_config_type, "parameter_parts", None),
        )
        self.check_parts(
            info.model_config, info.features, info.labels, str(Path(info.path) / MANIFEST)
        )
        net = self.model_type(info.model_config)
        return net, jax.tree_util.tree_map(jnp.asarray, params), info


def to_dict(config) -> dict:
    """A (nested) config dataclass as JSON-ready values: tuples become lists."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"expected a dataclass instance, got {type(config).__name__}")
    return json.loads(json.dumps(dataclasses.asdict(config)))


def flatten(params) -> dict[str, np.ndarray]:
    """A nested dict of arrays -> {tree path "a/b/c": NumPy array}, keys sorted. Flax
    metadata boxes (`nn.Partitioned` of sequence-layers' kernels) are unboxed: the
    bundle keeps the values only."""
    flat: dict[str, np.ndarray] = {}

    def visit(node, prefix: str) -> None:
        if isinstance(node, Mapping):
            if not node and prefix:
                raise BundleError(f"params: {prefix}: an empty dict cannot be stored")
            for key, value in node.items():
                if not isinstance(key, str) or not key or _SEPARATOR in key:
                    raise BundleError(f"params: {prefix}: key {key!r} is not a plain name")
                visit(value, f"{prefix}{_SEPARATOR}{key}" if prefix else key)
        else:
            flat[prefix] = np.asarray(node)

    visit(_unboxed(params), "")
    return dict(sorted(flat.items()))


def unflatten(flat: Mapping[str, np.ndarray]) -> dict:
    """{tree path: array} -> the nested dict `flatten` came from."""
    tree: dict = {}
    for name, value in flat.items():
        *parents, leaf = name.split(_SEPARATOR)
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return tree


# ----------------------------------------------------------------------------- loading


def load(
    path: str | os.PathLike,
    *,
    task: str,
    model_config_type: type,
    decoding_type: type,
    expected_params: Callable[[typing.Any], typing.Any],
    parameter_parts: Callable[[typing.Any], Mapping[str, tuple[int, int]]] | None = None,
) -> tuple[dict, Bundle]:
    """Reads and checks a bundle folder -> (params, `Bundle`).

    Nothing is built or decompressed before what it would take is known to fit: the
    configs' own checks bound every size (`speechkit.checks`), the arrays bundle.json
    lists must fit in memory and number what `parameter_parts` counts, and each member
    of params.npz (its .npy header and its size in the zip directory) must be the array
    bundle.json lists before any array is read. The arrays read must hold finite values.

    Args:
      path: the bundle folder (or its bundle.json).
      task: the task the caller serves; a bundle of another task is refused.
      model_config_type, decoding_type: the dataclasses to rebuild the model config and
        the decoding settings into.
      expected_params: model config -> the tree of parameter shapes its model has (objects
        with `.shape` and `.dtype`, e.g. `jax.eval_shape` of its init).
      parameter_parts: model config -> {the field that sizes a part of the model:
        (arrays, scalars)}, counted without building it (e.g.
        `cskws_jax.config.AfKwsConfig.parameter_parts`); when given, a config whose model
        has another number of arrays than bundle.json lists is refused before
        `expected_params` builds it.

    Returns:
      params, a nested dict of NumPy arrays, and the bundle's description.
    """
    info, manifest = _read(path, task, model_config_type, decoding_type)
    folder = Path(info.path)
    listed = _listed_arrays(folder / MANIFEST, manifest["params"])
    if parameter_parts is not None:
        _check_array_count(folder / MANIFEST, parameter_parts(info.model_config), listed)
    with _Archive(folder / PARAMS, manifest["params"], listed) as archive:
        # shapes from the .npy headers: nothing is decompressed before they all fit
        check_params(archive.declared, expected_params(info.model_config), str(archive.path))
        flat = archive.read_arrays()
    return unflatten(flat), info


def read(
    path: str | os.PathLike, *, task: str, model_config_type: type, decoding_type: type
) -> Bundle:
    """The checked `Bundle` of a folder's bundle.json (the arrays are not read)."""
    return _read(path, task, model_config_type, decoding_type)[0]


def _read(path, task: str, model_config_type: type, decoding_type: type) -> tuple[Bundle, dict]:
    folder = Path(path)
    if folder.name == MANIFEST:
        folder = folder.parent
    manifest_path = folder / MANIFEST
    if not folder.is_dir():
        raise BundleError(f"{folder}: no such bundle folder")
    if not os.path.lexists(manifest_path):
        raise BundleError(f"{manifest_path}: missing (not a bundle folder)")
    _own_file(manifest_path)
    manifest = _read_manifest(manifest_path)
    field = _field_reader(manifest_path, manifest)
    if field("format", str) != FORMAT:
        raise BundleError(
            f"{manifest_path}: format: expected {FORMAT!r}, got {manifest['format']!r}"
        )
    version = field("format_version", int)
    manifest = migrated(manifest, version, manifest_path)
    _require_fields(manifest_path, manifest, _FIELDS)  # those of this format, after migrating
    _refuse_unknown_fields(manifest_path, manifest)
    field = _field_reader(manifest_path, manifest)
    found_task = field("task", str)
    if found_task != task:
        raise BundleError(
            f"{manifest_path}: task: expected {task!r}, got {found_task!r} (a bundle of another "
            "task)"
        )
    type_name = field("model_config_type", str)
    if type_name != model_config_type.__name__:
        raise BundleError(
            f"{manifest_path}: model_config_type: expected {model_config_type.__name__!r}, "
            f"got {type_name!r}"
        )
    labels = field("labels", list)
    if not labels or not all(isinstance(label, str) for label in labels):
        raise BundleError(f"{manifest_path}: labels: expected a list of names, got {labels!r}")
    field("params", dict)
    info = Bundle(
        path=str(folder),
        task=found_task,
        format_version=version,
        model_config=_rebuild(manifest_path, "model_config", model_config_type, manifest),
        features=_rebuild(manifest_path, "features", FeatureConfig, manifest),
        labels=tuple(labels),
        decoding=_rebuild(manifest_path, "decoding", decoding_type, manifest),
        corpus=field("corpus", str),
    )
    return info, manifest


def migrated(manifest: dict, version: int, manifest_path) -> dict:
    """bundle.json's `manifest` of format `version` as one of `FORMAT_VERSION`, through
    `MIGRATIONS`; a `BundleError` for a newer format, or an older one no step reads."""
    oldest = FORMAT_VERSION
    while oldest - 1 in MIGRATIONS:
        oldest -= 1
    if not oldest <= version <= FORMAT_VERSION:
        readable = f"version {oldest}" if oldest == FORMAT_VERSION else f"versions {oldest} to "
        readable += "" if oldest == FORMAT_VERSION else str(FORMAT_VERSION)
        what = (
            "written by a newer speech-tracking-jax: upgrade it"
            if version > FORMAT_VERSION
            else "older than any this code migrates: load and save it again with the "
            "speech-tracking-jax that CHANGELOG.md names for that format"
        )
        raise BundleError(
            f"{manifest_path}: format_version: {version}; this code reads {readable} ({what})"
        )
    for step in range(version, FORMAT_VERSION):
        try:  # a step reads fields of a file someone sent: any of them may be wrong
            manifest = MIGRATIONS[step](dict(manifest))
            if not isinstance(manifest, dict):
                raise TypeError(f"the step gave a {type(manifest).__name__}, not a dict")
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as err:
            raise BundleError(
                f"{manifest_path}: format_version {step} -> {step + 1}: cannot migrate ({err!r})"
            ) from None
        manifest["format_version"] = step + 1
    return manifest


def _field_reader(manifest_path: Path, manifest: dict):
    """field(name, kind) -> the manifest's value of `name`, checked to be a `kind`."""

    def field(name: str, kind: type):
        value = manifest[name]
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise BundleError(
                f"{manifest_path}: {name}: expected {kind.__name__}, got {type(value).__name__} "
                f"{value!r}"
            )
        return value

    return field


def _read_manifest(manifest_path: Path) -> dict:
    """bundle.json's JSON object (`files.load_json`: a regular file of at most
    `files.JSON_LIMIT` bytes; `_own_file` has refused a link) with its format fields."""
    try:
        manifest = files.load_json(manifest_path)
    except files.JsonFileError as err:
        reason = str(err).removeprefix(f"{manifest_path}: ")
        raise BundleError(f"{manifest_path}: not readable JSON: {reason}"[:600]) from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{manifest_path}: expected a JSON object, got {type(manifest).__name__}")
    _require_fields(manifest_path, manifest, ("format", "format_version"))
    return manifest


def _require_fields(manifest_path: Path, manifest: dict, names) -> None:
    missing = [name for name in names if name not in manifest]
    if missing:
        raise BundleError(f"{manifest_path}: {missing[0]}: missing (missing fields: {missing})")


def _refuse_unknown_fields(manifest_path: Path, manifest: dict) -> None:
    """bundle.json holds the fields of this format only (as export.json does): an
    unknown one is a misspelling or a field this code would silently ignore."""
    unknown = sorted(set(manifest) - set(_FIELDS))
    if unknown:
        raise BundleError(
            f"{manifest_path}: {unknown[0]!s:.80}: not a field of {MANIFEST} (its fields: "
            f"{', '.join(_FIELDS)})"
        )


def _own_file(path: Path) -> int:
    """The size in bytes of a bundle's file `path`: a regular file in the folder, not a
    link (which could lead out of it, to /proc/self/pagemap, say, hashed forever), a
    FIFO or a device; a `BundleError` otherwise."""
    return arrays.regular_file_size(
        path, what=f"a bundle's {path.name}", error=BundleError, follow_links=False
    )


def _rebuild(manifest_path: Path, name: str, cls: type, manifest: dict):
    try:
        return from_dict(cls, manifest[name], name)
    except (TypeError, ValueError) as err:
        raise BundleError(f"{manifest_path}: {err}") from None


def _listed_arrays(manifest_path: Path, section: dict) -> dict[str, arrays.Declared]:
    """bundle.json's `params` section checked: a file name, and arrays whose entries are
    well formed and whose total size fits in memory."""
    if not isinstance(section.get("arrays"), dict) or not section["arrays"]:
        raise BundleError(f"{manifest_path}: params.arrays: expected {{path: shape, dtype}}")
    unknown = sorted(set(section) - {"file", "sha256", "arrays"})
    if unknown:
        raise BundleError(
            f"{manifest_path}: params.{unknown[0]:.80}: not a field of params (file, sha256, "
            "arrays)"
        )
    if section.get("file") != PARAMS:
        found = section.get("file")
        raise BundleError(f"{manifest_path}: params.file: expected {PARAMS!r}, got {found!r}")
    listed = {}
    for name, entry in section["arrays"].items():
        where = f"{manifest_path}: params.arrays.{name}"
        if not isinstance(entry, dict) or set(entry) != {"shape", "dtype"}:
            raise BundleError(f"{where}: expected {{shape, dtype}}, got {entry!r}"[:400])
        shape, dtype = entry["shape"], entry["dtype"]
        if not isinstance(shape, list) or not all(
            isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in shape
        ):
            raise BundleError(f"{where}.shape: expected a list of sizes, got {shape!r}"[:400])
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            raise BundleError(f"{where}.dtype: expected one of {sorted(_DTYPES)}, got {dtype!r}")
        listed[name] = arrays.Declared(tuple(shape), np.dtype(dtype))
    total = sum(array.nbytes for array in listed.values())
    largest = max(listed, key=lambda name: listed[name].nbytes)
    try:
        checks.require_memory(
            f"{manifest_path}: params.arrays",
            total,
            f"the {len(listed)} arrays (the largest: {largest}, {listed[largest].text()})",
        )
    except ValueError as err:
        raise BundleError(str(err)) from None
    return listed


def _check_array_count(manifest_path: Path, parts: Mapping[str, tuple[int, int]], listed):
    """The config's model has as many parameter arrays as bundle.json lists (so building
    the model to compare shapes costs no more than the arrays themselves)."""
    count = sum(arrays for arrays, _ in parts.values())
    if count != len(listed):
        largest = max(parts, key=lambda part: parts[part][0])
        raise BundleError(
            f"{manifest_path}: model_config.{largest}: the config's model has "
            f"{checks.count_text(count)} parameter arrays ({checks.count_text(parts[largest][0])}"
            f" in {largest}); params.arrays lists {len(listed)}"
        )


class _Archive:
    """params.npz checked against bundle.json without decompressing any array: a regular
    file (not a link), its size on disk and sha256, then each zip member's name, .npy
    header (shape, dtype) and uncompressed size in the zip directory (`arrays.Npz`).
    `declared` holds the headers' shapes and dtypes; `read_arrays` then reads the arrays,
    each at most its declared size."""

    _OVERHEAD = 1024  # bytes per member beyond its name and data: zip headers, .npy header

    def __init__(self, path: Path, section: dict, listed: dict[str, arrays.Declared]):
        self.path, self.listed = path, listed
        size, most = _own_file(path), self._most_bytes(listed)
        if size > most:  # before hashing it: an .npz of these arrays is at most this long
            raise BundleError(
                f"{path}: {checks.byte_text(size)}; an .npz of the arrays {MANIFEST} lists "
                f"takes at most {checks.byte_text(most)}"
            )
        if files.sha256(path) != section.get("sha256"):
            raise BundleError(
                f"{path}: sha256 differs from {MANIFEST}'s params.sha256 (a changed file, "
                "or parts of two different saves)"
            )
        self.npz = arrays.Npz(path, names=listed, lister=MANIFEST, error=BundleError)
        try:
            self.declared = {name: self._header(name) for name in listed}
        except BaseException:
            self.npz.close()
            raise

    @classmethod
    def _most_bytes(cls, listed: dict[str, arrays.Declared]) -> int:
        """The largest an .npz of `listed` can be: stored data, or deflated data (which
        grows incompressible input by at most 5 bytes per 16 kB block), plus each
        member's name (twice: the local header and the directory) and headers."""
        data = sum(array.nbytes + array.nbytes // 16384 * 5 + 5 for array in listed.values())
        names = sum(2 * len(name.encode("utf-8", "surrogatepass")) for name in listed)
        return data + names + cls._OVERHEAD * (len(listed) + 1)

    def _header(self, name: str) -> arrays.Declared:
        """The member's .npy header, checked against bundle.json and then against the
        member's uncompressed size; only the header's bytes are decompressed."""
        declared, listed = self.npz.header(name), self.listed[name]
        if declared != listed:
            raise BundleError(
                f"{self.path}: {self.npz.members[name].filename}: the .npy header declares "
                f"{declared.text()}; {MANIFEST} lists {listed.text()}"
            )
        return self.npz.check_size(name)

    def read_arrays(self) -> dict[str, np.ndarray]:
        """The arrays (each read to exactly its checked size), each finite."""
        flat = {}
        for name in self.npz.members:
            array = self.npz.read(name)
            if array.dtype.kind == "f":
                _require_finite(array, f"{self.path}: {name}")
            flat[name] = array
        return dict(sorted(flat.items()))

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.npz.close()


def _require_finite(array: np.ndarray, where: str) -> None:
    """Every value of the float `array` is finite; a BundleError names the first that
    is not."""
    finite = np.isfinite(array)
    if not finite.all():
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise BundleError(
            f"{where}: {int(finite.size - finite.sum())} of {array.size} values are not "
            f"finite (NaN or infinity), the first at {first}: {array[first]}"
        )


def check_params(flat: Mapping[str, np.ndarray], expected, where: str) -> None:
    """The arrays {tree path: array} have exactly the paths, shapes and dtypes of
    `expected` (a tree of objects with `.shape` and `.dtype`); a BundleError names
    `where` and the first path that differs."""
    wanted = dict(_leaves(_unboxed(expected)))
    for name, leaf in wanted.items():
        if name not in flat:
            raise BundleError(f"{where}: {name}: missing; the config's model has it")
        shape, want = tuple(flat[name].shape), tuple(leaf.shape)
        if shape != want:
            raise BundleError(f"{where}: {name}: shape {shape}; the config expects {want}")
        if np.dtype(flat[name].dtype) != np.dtype(leaf.dtype):
            raise BundleError(
                f"{where}: {name}: dtype {flat[name].dtype}; the config expects {leaf.dtype}"
            )
    extra = sorted(set(flat) - set(wanted))
    if extra:
        raise BundleError(f"{where}: {extra[0]}: not a parameter of the config's model")


def _unboxed(tree):
    """`tree` without flax's metadata boxes; flax is imported here, not at the top, so
    that reading an export folder (`speechkit.export_read`) needs no training stack."""
    from flax.core import meta

    return meta.unbox(tree)


def _leaves(tree, prefix: str = ""):
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            yield from _leaves(value, f"{prefix}{_SEPARATOR}{key}" if prefix else str(key))
    else:
        yield prefix, tree
