"""Streaming models as serialized StableHLO (`jax.export`), written as export folders:
the parts both tasks' exports share (`cskws_jax.export`, `multiqt_jax.export`).

    step = export.export_step(step_fn, (block, block_mask), initial_state_fn)
    export.write("step.stablehlo", step)        # bytes -> sha256
    state = export.initial_state(step, batch_size=1)
    outputs, out_mask, state = step.call(block, block_mask, state)
    export.write_folder(out_dir, {"forward": forward, "step": step}, payload, onnx_modules)

`export_step`'s module takes and returns a step's state (its last argument and output)
as a flat list of arrays, batch `b` symbolic; the state before a stream's first block
must be all zeros, so `initial_state` rebuilds it from the module alone. The folder's
format: `speechkit.export_format`; reading it: `speechkit.export_read`; the command
line: `speechkit.export_cli`. Serializing needs the `flatbuffers` package.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export

from speechkit import checks, files, onnx_export, onnx_metadata
from speechkit.export_format import (
    FORMAT_VERSION,
    MANIFEST,
    NAME,
    SUFFIX,
    fields_sha256,
    manifest,
    with_symbolic_batch,
)


def export_step(
    step: Callable,
    args: Sequence,
    initial_state: Callable[[int], object],
    platforms: Sequence[str] | None = None,
    where: str = "initial_state",
) -> jax_export.Exported:
    """`step(*args, state) -> (*outputs, state)` exported with the state as a flat list
    (see the module docstring).

    Args:
      step: a plain function (parameters bound); its last argument and last output are
        the state pytree.
      args: the other arguments, pytrees of arrays or `jax.ShapeDtypeStruct`s whose
        leading size is the batch (replaced by the symbolic `b`).
      initial_state: batch_size -> the state before the first block, all zeros.
      platforms: e.g. ("cpu", "cuda"); None: this machine's.
      where: the name of `initial_state` in the error when it is not all zeros.
    """
    (batch,) = jax_export.symbolic_shape("b")
    state = initial_state(1)
    leaves, treedef = jax.tree_util.tree_flatten(state)
    if any(np.any(np.asarray(leaf)) for leaf in leaves):
        raise ValueError(f"{where}: not all zeros; an exported step cannot rebuild it")
    flat_state = [jax.ShapeDtypeStruct((batch, *leaf.shape[1:]), leaf.dtype) for leaf in leaves]

    def flat_step(*args_and_state):
        *inputs, flat = args_and_state
        *outputs, new_state = step(*inputs, jax.tree_util.tree_unflatten(treedef, flat))
        return (*outputs, jax.tree_util.tree_leaves(new_state))

    specs = [with_symbolic_batch(arg, batch) for arg in args]
    return jax_export.export(jax.jit(flat_step), platforms=platforms)(*specs, flat_state)


def initial_state(step: jax_export.Exported, batch_size: int) -> list[jax.Array]:
    """The state before a stream's first block: zeros [batch_size, ...] of each state
    array of a step `export_step` exported (its last argument)."""
    batch_size = checks.require_int("batch_size", batch_size, at_least=1)
    positional, _ = step.in_tree.children()
    state_arrays = positional.children()[-1].num_leaves
    state_avals = step.in_avals[len(step.in_avals) - state_arrays :]
    return [
        jnp.zeros((batch_size, *(int(d) for d in aval.shape[1:])), aval.dtype)
        for aval in state_avals
    ]


def write(path: str | os.PathLike, exported: jax_export.Exported) -> str:
    """The serialized module (bytes), written atomically -> the sha256 of those bytes."""
    data = exported.serialize()
    with files.atomic_open(path, "wb") as out:
        out.write(data)
    return hashlib.sha256(data).hexdigest()


def export_bundle(
    path,
    block_outputs: int,
    platforms: Sequence[str] | None = None,
    *,
    load: Callable,
    export_forward: Callable,
    export_step: Callable,
    facts_of: Callable,
    export_onnx: Callable | None = None,
) -> tuple[dict[str, jax_export.Exported], dict, dict]:
    """({"forward", "step"}, export.json payload, {name: onnx.ModelProto}) of the bundle
    folder `path`: `load(path)` -> (net, params, info) is the task's bundle loader,
    `export_forward(net, params, platforms)` and `export_step(net, params, block_outputs,
    platforms)` its exporters, `facts_of(info, block_outputs)` its `ModelFacts`,
    `export_onnx(net, params, info, block_outputs, facts)` its ONNX modules (a task binds
    them with `functools.partial` and hands the result to `main`)."""
    net, params, info = load(path)
    facts = facts_of(info, block_outputs)
    modules = {
        "forward": export_forward(net, params, platforms),
        "step": export_step(net, params, block_outputs, platforms),
    }
    payload = manifest(info, block_outputs, facts)
    onnx_modules = {}
    if export_onnx is not None:
        onnx_modules = export_onnx(net, params, info, block_outputs, facts)
        onnx_metadata.describe(onnx_modules, payload)
    return modules, payload, onnx_modules


def write_folder(
    out_dir: str | os.PathLike,
    modules: Mapping[str, jax_export.Exported],
    payload: dict,
    onnx_modules: Mapping[str, object] | None = None,
) -> list[Path]:
    """Writes `<name>.stablehlo` for each module and `<name>.onnx` for each of
    `onnx_modules` (`onnx.ModelProto`s), then export.json: `payload` with each module's
    file, sha256 and bytes (`modules`, `onnx_modules`) and each field's sha256
    (`fields_sha256`), each file atomically, the JSON last -> the paths written, in that
    order."""
    folder = Path(out_dir)
    written, listed, listed_onnx = [], {}, {}
    for name, exported in modules.items():
        path = folder / f"{_checked_name(name)}{SUFFIX}"
        listed[name] = _entry(path, write(path, exported))
        written.append(path)
    for name, model in (onnx_modules or {}).items():
        path = folder / f"{_checked_name(name)}{onnx_export.SUFFIX}"
        listed_onnx[name] = _entry(path, onnx_export.write(path, model))
        written.append(path)
    fields = {
        **payload,
        "format_version": FORMAT_VERSION,
        "modules": listed,
        "onnx_modules": listed_onnx,
    }
    files.write_json(folder / MANIFEST, {**fields, "fields_sha256": fields_sha256(fields)})
    return [*written, folder / MANIFEST]


def _entry(path: Path, sha256: str) -> dict:
    """export.json's entry of a module file just written: its name, sha256 and bytes."""
    return {"file": path.name, "sha256": sha256, "bytes": path.stat().st_size}


def _checked_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ValueError(f"modules: {name!r}: expected letters, digits and _ only")
    return name


@contextlib.contextmanager
def _no_source_locations():
    """Modules exported inside hold no source locations: they would carry this
    machine's file paths (of the toolkit and its packages) to whoever gets the folder."""
    limit = jax.config.jax_traceback_in_locations_limit
    jax.config.update("jax_traceback_in_locations_limit", 0)
    try:
        yield
    finally:
        jax.config.update("jax_traceback_in_locations_limit", limit)


def export_folder(
    export_bundle: Callable[..., tuple[dict, dict, dict]],
    bundle: str | os.PathLike,
    out_dir: str | os.PathLike,
    block_outputs: int = 5,
    platforms: Sequence[str] | None = None,
) -> tuple[list[Path], tuple[dict, dict, dict]]:
    """Exports the bundle folder `bundle` with a task's `export_bundle` (e.g.
    `cskws_jax.export.export_bundle`) into `out_dir` (`write_folder`), the modules
    holding no source locations -> (the paths written, (modules, export.json payload,
    ONNX modules))."""
    with _no_source_locations():
        written = export_bundle(bundle, block_outputs, platforms)
    return write_folder(out_dir, *written), written
