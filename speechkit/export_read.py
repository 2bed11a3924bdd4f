"""Export folders read back and checked, before any module is deserialized or run.

    info, block_outputs, modules, facts = export_read.read_folder(out_dir, task=..., ...)
    step = export_read.read("step.stablehlo")   # one module file -> jax.export.Exported

`read_folder` reads export.json (`speechkit.files.load_json`), rebuilds and checks its
fields, then each module: its name, its file (inside the folder, regular, of the recorded
size and at most `MAX_FILE_BYTES`, all before a byte is read), the sha256 of its bytes
(before deserializing), `speechkit.stablehlo_checks.check_module` (an ONNX module:
`speechkit.onnx_export.read`) and its signature against the fields (`check_signature`);
each problem a `BundleError` naming the file and the field. Folders of the format's
`READABLE_VERSIONS` are read as their version says. docs/usage.md lists every check and
what the checks do not promise.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import typing
from collections.abc import Callable, Mapping
from pathlib import Path

import jax
import numpy as np
from jax import export as jax_export

from speechkit import bundle as bundle_lib
from speechkit import checks, files, onnx_export, stablehlo_checks
from speechkit.dataclass_json import from_dict
from speechkit.export_format import (
    ADDED_IN,
    BACKENDS,
    ENTRY_BYTES_SINCE,
    ENTRY_KEYS,
    FIELDS,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    NAME,
    ONNX_ADDED_IN,
    READABLE_VERSIONS,
    SUFFIX,
    ModelFacts,
    Signature,
    fields_sha256,
    short,
    with_symbolic_batch,
)
from speechkit.frontend import FeatureConfig

MAX_FILE_BYTES = 1 << 25
"""Bytes: the largest StableHLO module file read (32 MiB, about 8 million float32
parameters; the default-size AF-KWS modules, 750,000 parameters baked in, are 3 MB).
Checked before the file is read: reading, checking and compiling a module takes about
18 times its size (`detect` peaked at 760 MB with a 30 MB step, at 210 MB with the
tests' 50 kB one), so that a module at the cap keeps a process under 1 GB."""
_SHA256 = re.compile(r"[0-9a-f]{64}")


def read(path: str | os.PathLike) -> jax_export.Exported:
    """A module `speechkit.export.write` wrote, refused (`BundleError` naming `path`)
    when it is not one (a regular file of at most `MAX_FILE_BYTES`, checked before
    reading) or `speechkit.stablehlo_checks.check_module` refuses it; nothing in it has
    run."""
    data = files.read_regular_file(
        os.fspath(path), MAX_FILE_BYTES, what="StableHLO module", error=bundle_lib.BundleError
    )
    return _deserialize(data, path)


def _deserialize(data: bytes, where) -> jax_export.Exported:
    try:
        exported = jax_export.deserialize(bytearray(data))
    except Exception as err:  # untrusted bytes: struct.error, IndexError, ValueError, ...
        raise bundle_lib.BundleError(
            f"{where}: not a serialized jax.export module ({type(err).__name__}: {err})"
        ) from None
    stablehlo_checks.check_module(exported, where)
    return exported


def read_task_folder(
    path: str | os.PathLike,
    task_fields: bundle_lib.TaskFields,
    signatures: Callable[[bundle_lib.Bundle, int, ModelFacts], Mapping[str, Signature]],
    facts_of: Callable[[bundle_lib.Bundle, int], ModelFacts],
    check: Callable[[bundle_lib.Bundle, ModelFacts, str], None] | None = None,
    backend: str = "jax",
    onnx_signatures: Callable | None = None,
) -> Export:
    """`read_folder` for the task of `task_fields` (`speechkit.bundle.TaskFields`), with
    its check that the labels and the front end fit the model config and then `check`
    (the task's own), before any module is read."""

    def check_fields(info: bundle_lib.Bundle, facts: ModelFacts, where: str) -> None:
        task_fields.check_parts(info.model_config, info.features, info.labels, where)
        if check is not None:
            check(info, facts, where)

    return read_folder(
        path,
        task=task_fields.task,
        model_config_type=task_fields.model_config_type,
        decoding_type=task_fields.decoding_type,
        signatures=signatures,
        facts_of=facts_of,
        check=check_fields,
        backend=backend,
        onnx_signatures=onnx_signatures,
    )


class Export(typing.NamedTuple):
    """An export folder read back (`read_folder`)."""

    info: bundle_lib.Bundle  # labels, features, decoding, model config, as a bundle's
    block_outputs: int  # output frames per step of its step
    modules: dict  # {name: jax.export.Exported}, or ONNX modules (backend "onnx")
    facts: ModelFacts  # its model's streaming spec and state shapes


def read_folder(
    path: str | os.PathLike,
    *,
    task: str,
    model_config_type: type,
    decoding_type: type,
    signatures: Callable[[bundle_lib.Bundle, int, ModelFacts], Mapping[str, Signature]],
    facts_of: Callable[[bundle_lib.Bundle, int], ModelFacts],
    check: Callable[[bundle_lib.Bundle, ModelFacts, str], None] | None = None,
    backend: str = "jax",
    onnx_signatures: Callable | None = None,
) -> Export:
    """The `Export` (info, block_outputs, {name: module}, facts) of an export folder
    `speechkit.export.write_folder` wrote, every field checked (see the module
    docstring); a `BundleError` naming the file and the field for anything missing,
    unknown, of another task, edited or damaged.

    Args:
      signatures: (info, block_outputs, facts) -> {name: `Signature`} of the modules a
        task's export holds; each listed module must be one of them and have that
        signature.
      facts_of: (info, block_outputs) -> the `ModelFacts` of a folder written before they
        were stored (format versions 2 and 3), from the model code; where that is not
        installed (the light install) such a folder is refused with what to do.
      check: (info, facts, export.json's path) -> None: the task's checks of the fields
        (a `BundleError`), run before any module is read.
      backend: "jax": the modules are the StableHLO ones (`jax.export.Exported`);
        "onnx": the ONNX ones (`speechkit.onnx_export.Module`, checked by
        `onnx_export.check_model` against `onnx_signatures(info, block_outputs, facts)` ->
        {name: `speechkit.onnx_export.Signature`}), the StableHLO ones not read.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    folder = Path(path)
    where = folder / MANIFEST
    payload = _read_manifest(where)
    if payload.get("format") != FORMAT:
        raise bundle_lib.BundleError(
            f"{where}: format: expected {FORMAT!r}, got {payload.get('format')!r} (not an "
            "export folder's manifest)"
        )
    again = f"export the bundle again: python -m {task}_jax.export BUNDLE {folder}"
    if "format_version" not in payload:
        raise bundle_lib.BundleError(
            f"{where}: format_version: missing; written before exports held the sha256 of "
            f"their modules and fields (format_version {FORMAT_VERSION}), so it is not read "
            f"({again})"
        )
    field = _field_reader(where, payload)
    version = field("format_version", int)
    if version not in READABLE_VERSIONS:
        raise bundle_lib.BundleError(
            f"{where}: format_version: expected one of {READABLE_VERSIONS}, got {version!r} "
            f"(written by another version of this code; {again})"
        )
    names = tuple(n for n in FIELDS if version >= ADDED_IN.get(n, 0))
    if payload.get("task") != task:
        raise bundle_lib.BundleError(
            f"{where}: task: expected {task!r}, got {payload.get('task')!r} (an export of "
            "another task)"
        )
    unknown = sorted(set(payload) - {*names, "fields_sha256"})
    if unknown:
        raise bundle_lib.BundleError(f"{where}: {unknown[0]}: not a field of {MANIFEST}")
    missing = [name for name in (*names, "fields_sha256") if name not in payload]
    if missing:
        raise bundle_lib.BundleError(f"{where}: {missing[0]}: missing")
    labels = field("labels", list)
    if not labels or not all(isinstance(label, str) for label in labels):
        raise bundle_lib.BundleError(
            f"{where}: labels: expected a list of names, got {short(labels)}"
        )
    corpus = field("corpus", str)
    field("bundle", str)
    try:
        info = bundle_lib.Bundle(
            path=str(folder),
            task=task,
            format_version=1,
            model_config=from_dict(model_config_type, payload["model_config"], "model_config"),
            features=from_dict(FeatureConfig, payload["features"], "features"),
            labels=tuple(labels),
            decoding=from_dict(decoding_type, payload["decoding"], "decoding"),
            corpus=corpus,
        )
        block_outputs = checks.require_int("block_outputs", payload["block_outputs"], at_least=1)
    except (TypeError, ValueError) as err:
        raise bundle_lib.BundleError(f"{where}: {err}") from None
    listed = field("modules", dict)
    digests = field("fields_sha256", dict)
    if version >= 4:
        facts = ModelFacts.from_dict(payload["model_facts"], where)
    else:
        facts = _facts_from_model_code(
            facts_of,
            info,
            block_outputs,
            where=where,
            refusal=f"format_version: {version}",
            again=again,
        )
    if check is not None:
        check(info, facts, str(where))
    try:
        expected = signatures(info, block_outputs, facts)
    except (TypeError, ValueError) as err:  # a config only the model itself refuses
        raise bundle_lib.BundleError(f"{where}: model_config: {err}") from None
    if backend == "jax":
        modules = {
            name: _read_module(folder, name, entry, expected, block_outputs, task, version)
            for name, entry in listed.items()
        }
    else:
        listed_onnx = field("onnx_modules", dict) if version >= 3 else {}
        if not listed_onnx:
            raise bundle_lib.BundleError(
                f"{where}: onnx_modules: none (exported before ONNX modules, or without them; "
                f"{again})"
            )
        expected_onnx = {
            name: signature
            for name, signature in onnx_signatures(info, block_outputs, facts).items()
            if version >= ONNX_ADDED_IN.get(name, 0)
        }
        if sorted(listed_onnx) != sorted(expected_onnx):
            raise bundle_lib.BundleError(
                f"{where}: onnx_modules: {sorted(listed_onnx)}; a {task} export holds "
                f"{sorted(expected_onnx)} ({again})"
            )
        modules = {
            name: _read_onnx_module(folder, name, entry, expected_onnx, task, version)
            for name, entry in listed_onnx.items()
        }
    found = fields_sha256({name: payload[name] for name in names})
    for name in sorted(set(digests) | set(found)):
        if digests.get(name) != found.get(name):
            raise bundle_lib.BundleError(
                f"{where}: {name}: its sha256 is not fields_sha256.{name} ({MANIFEST} was "
                f"edited or damaged after export; {again})"
            )
    return Export(info, block_outputs, modules, facts)


def _facts_from_model_code(
    facts_of, info, block_outputs: int, *, where, refusal: str, again: str
) -> ModelFacts:
    """The `ModelFacts` of a folder written before they were stored (format_version 2
    or 3): `facts_of`'s, from the model code, which the light install lacks (a
    `BundleError` starting with `refusal`, ending with `again`)."""
    try:
        return facts_of(info, block_outputs)
    except ModuleNotFoundError as err:
        raise bundle_lib.BundleError(
            f"{where}: {refusal}; an export written before version 4 (its model facts stored) "
            f"is read with the model code, which needs {err.name} ({bundle_lib.FULL_INSTALL}), "
            f"or {again}"
        ) from None
    except (TypeError, ValueError) as err:  # a config only the model itself refuses
        raise bundle_lib.BundleError(f"{where}: model_config: {err}") from None


def _read_manifest(where: Path) -> dict:
    """export.json's JSON object (`files.load_json`: a regular file of at most
    `files.JSON_LIMIT` bytes, inside the folder)."""
    if not os.path.lexists(where):
        raise bundle_lib.BundleError(f"{where}: missing (not an export folder)")
    _require_inside_folder(where)
    try:
        payload = files.load_json(where)
    except files.JsonFileError as err:
        reason = str(err).removeprefix(f"{where}: ")
        raise bundle_lib.BundleError(f"{where}: not readable JSON: {reason}"[:600]) from None
    if not isinstance(payload, dict):
        raise bundle_lib.BundleError(
            f"{where}: expected a JSON object, got {type(payload).__name__}"
        )
    return payload


def _require_inside_folder(path: Path) -> None:
    """A `BundleError` when `path` is a symlink that leads out of its folder."""
    if path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(path.parent.resolve()):
            raise bundle_lib.BundleError(
                f"{path}: a symlink to {target}, outside the export folder; refused"
            )


def _field_reader(where: Path, payload: dict):
    """field(name, kind) -> payload[name], checked to be a `kind` (an int not a bool)."""

    def field(name: str, kind: type):
        value = payload[name]
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise bundle_lib.BundleError(
                f"{where}: {name}: expected {kind.__name__}, got {type(value).__name__} "
                f"{short(value)}"
            )
        return value

    return field


def _read_module(
    folder: Path,
    name,
    entry,
    signatures: Mapping[str, Signature],
    block_outputs: int,
    task: str,
    version: int,
) -> jax_export.Exported:
    """The module export.json lists as `name` with `entry` ({"file", "sha256", "bytes"}),
    its name, file, size, bytes, contents and signature checked in that order."""
    data, module_path = _module_bytes(
        folder, "modules", name, entry, SUFFIX, signatures, task, version
    )
    exported = _deserialize(data, module_path)
    check_signature(exported, signatures[name], module_path, block_outputs)
    return exported


def _read_onnx_module(
    folder: Path, name, entry, signatures: Mapping, task: str, version: int
) -> onnx_export.Module:
    """The ONNX module export.json's `onnx_modules` lists as `name`: its name, file, size
    and bytes checked as a StableHLO module's, then `speechkit.onnx_export.read`."""
    data, module_path = _module_bytes(
        folder, "onnx_modules", name, entry, onnx_export.SUFFIX, signatures, task, version
    )
    return onnx_export.read(data, module_path, signatures[name])


def _module_bytes(
    folder: Path,
    field: str,
    name,
    entry,
    suffix: str,
    signatures: Mapping,
    task: str,
    version: int,
) -> tuple[bytes, Path]:
    """(bytes, path) of the file export.json's `field` lists as `name` with `entry`
    ({"file", "sha256", "bytes"}): the name and the entry checked, then the file (inside
    the folder, regular, of the recorded size and at most the suffix's cap), before a
    byte of it is read; then the sha256 of its bytes."""
    where = folder / MANIFEST
    if not NAME.fullmatch(name):
        raise bundle_lib.BundleError(
            f"{where}: {field}: {short(name)}: not a module name (letters, digits and _; "
            f"its file is <name>{suffix} in the export folder)"
        )
    limit = _file_limit(suffix)
    size = _entry_size(entry, f"{where}: {field}.{name}", limit, version)
    file_name = f"{name}{suffix}"
    if entry["file"] != file_name:
        raise bundle_lib.BundleError(
            f"{where}: {field}.{name}.file: expected {file_name!r}, got {short(entry['file'])} "
            f"(a module's file is <name>{suffix} in the export folder)"
        )
    digest = entry["sha256"]
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise bundle_lib.BundleError(
            f"{where}: {field}.{name}.sha256: expected 64 hex digits, got {short(digest)}"
        )
    if name not in signatures:
        raise bundle_lib.BundleError(
            f"{where}: {field}.{name}: not a module of a {task} export (those are "
            f"{', '.join(sorted(signatures))})"
        )
    module_path = folder / file_name
    _require_inside_folder(module_path)
    if not module_path.exists():
        raise bundle_lib.BundleError(f"{module_path}: missing (listed in {MANIFEST})")
    _require_file_size(module_path, size, limit, f"{field}.{name}.bytes")
    data = files.read_regular_file(
        str(module_path),
        limit if size is None else size,
        what="module",
        error=bundle_lib.BundleError,
    )
    if hashlib.sha256(data).hexdigest() != digest:
        raise bundle_lib.BundleError(
            f"{module_path}: sha256 differs from {MANIFEST}'s {field}.{name}.sha256 (a changed "
            "file, or parts of two different exports); refused before deserializing"
        )
    return data, module_path


def _file_limit(suffix: str) -> int:
    """Bytes: the largest module file of a suffix that is read."""
    return onnx_export.MAX_FILE_BYTES if suffix == onnx_export.SUFFIX else MAX_FILE_BYTES


def _entry_size(entry, where: str, limit: int, version: int) -> int | None:
    """A module entry's recorded size in bytes (None where the folder's format version
    records none), the entry's keys checked (`where`: export.json's path and the
    entry's field, for the errors)."""
    keys = ENTRY_KEYS if version >= ENTRY_BYTES_SINCE else ENTRY_KEYS[:2]
    if not isinstance(entry, dict) or sorted(entry) not in (sorted(keys), sorted(ENTRY_KEYS)):
        shown = ", ".join(f'"{key}": ...' for key in keys)
        raise bundle_lib.BundleError(f"{where}: expected {{{shown}}}, got {short(entry)}")
    if "bytes" not in entry:
        return None
    size = entry["bytes"]
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= limit:
        raise bundle_lib.BundleError(
            f"{where}.bytes: expected a size in bytes from 1 to {limit}, got {short(size)} "
            "(a larger module is not read)"
        )
    return size


def _require_file_size(path: Path, size: int | None, limit: int, field: str) -> None:
    """A `BundleError` unless `path` is a regular file of `size` bytes (its recorded
    size; None: any size up to `limit`), checked from its status alone."""
    try:
        status = path.stat()
    except OSError as err:
        raise bundle_lib.BundleError(f"{path}: not readable ({err.strerror or err})") from None
    if not stat.S_ISREG(status.st_mode):
        raise bundle_lib.BundleError(f"{path}: not a regular file; refused")
    if size is not None and status.st_size != size:
        raise bundle_lib.BundleError(
            f"{path}: {status.st_size} bytes; {MANIFEST}'s {field} is {size} (a changed file, "
            "or parts of two different exports); refused before reading it"
        )
    if status.st_size > limit:
        raise bundle_lib.BundleError(
            f"{path}: {status.st_size} bytes; refused before reading it (a module file of at "
            f"most {limit} bytes)"
        )


def check_signature(
    exported: jax_export.Exported, signature: Signature, where: Path, block_outputs: int
) -> None:
    """Refuses (a `BundleError` naming the module `where` and the export.json field that
    makes the difference) a module whose arguments and results are not `signature`'s:
    pytree structure, then (a step) the output frames per block against `block_outputs`,
    then each array's dtype and shape, symbolic sizes included."""
    manifest_path = where.parent / MANIFEST
    args, results = tuple(signature.args), tuple(signature.results)
    if signature.state is not None:
        (batch,) = jax_export.symbolic_shape("b")
        state = list(with_symbolic_batch(list(signature.state), batch))
        args, results = (*args, state), (*results, state)
    sides = (
        ("arguments", exported.in_tree, exported.in_avals, (args, {})),
        ("results", exported.out_tree, exported.out_avals, results),
    )
    for kind, tree, _, want in sides:
        want_tree = jax.tree_util.tree_structure(want)
        if tree != want_tree:
            raise bundle_lib.BundleError(
                f"{where}: its {kind} are {tree}; {manifest_path.name}'s model_config makes a "
                f"{where.stem} module's {want_tree} (a module of another model or task, or an "
                "edited model_config)"
            )
    if signature.state is not None:
        for aval in exported.out_avals[: len(jax.tree_util.tree_leaves(signature.results))]:
            frames = aval.shape[1] if len(aval.shape) > 1 else None
            if str(frames) != str(block_outputs):
                raise bundle_lib.BundleError(
                    f"{manifest_path}: block_outputs: {block_outputs}; {where.name} steps "
                    f"{frames} output frames per block (an edited {MANIFEST}, or another "
                    "export's module)"
                )
    for kind, _, avals, want in sides:
        want = want[0] if kind == "arguments" else want  # (args, {}): name args[i] as [i]
        paths = jax.tree_util.tree_flatten_with_path(want)[0]
        for (key, spec), aval in zip(paths, avals, strict=True):
            if _describe(aval) != _describe(spec):
                raise bundle_lib.BundleError(
                    f"{manifest_path}: model_config: {where.name}'s {kind[:-1]} "
                    f"{jax.tree_util.keystr(key)} is {_describe(aval)}; the model config and "
                    f"block_outputs make {_describe(spec)} (an edited {MANIFEST}, or another "
                    "model's module)"
                )


def _describe(aval) -> str:
    """dtype[sizes], symbolic sizes as jax writes them: float32[b,4*t,64]."""
    return f"{np.dtype(aval.dtype).name}[{','.join(str(size) for size in aval.shape)}]"
