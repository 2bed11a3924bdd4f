"""Streaming models as serialized StableHLO (`jax.export`): the parts every task's export
shares (`cskws_jax.export`, `multiqt_jax.export`).

    step = export.export_step(step_fn, (block, block_mask), initial_state_fn)
    export.write("step.stablehlo", step)        # bytes; export.read(path) -> Exported
    state = export.initial_state(step, batch_size=1)
    outputs, out_mask, state = step.call(block, block_mask, state)
    export.write_folder(out_dir, {"forward": forward, "step": step}, manifest(info, 5))
    info, block_outputs, modules = export.read_folder(out_dir, task=..., ...)

`export_step` exports a protocol step (`speechkit.streaming`) whose LAST argument and
last output are the state: a pytree of sequence-layers state classes, which cannot be
serialized, so the exported module takes and returns it as a flat list of arrays. The
batch is symbolic (`b`, leading every input and state array); the other sizes are fixed.
The state before a stream's first block must be all zeros (checked when exporting), so
that `initial_state` rebuilds it from the exported module alone. Loading a serialized
module runs no Python code: it is StableHLO, compiled by XLA.

An export folder (`write_folder`) holds one `<name>.stablehlo` per module and
export.json, written last, each file atomically: the task, the labels, the front end,
the decoding settings and the model config as in a bundle (`speechkit.bundle`), the
block size of the step and the bundle it came from; `read_folder` rebuilds and checks
them (a `speechkit.bundle.BundleError` naming the file and the field), so a folder is
all a streaming client needs. `main` is the command line of both tasks' exports.

Serializing needs the `flatbuffers` package (an optional dependency of jax.export).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export

from speechkit import bundle as bundle_lib
from speechkit import checks, compilation, files
from speechkit.frontend import FeatureConfig

MANIFEST = "export.json"
FORMAT = "speechkit-export"
SUFFIX = ".stablehlo"


# ------------------------------------------------------------------------- modules


def with_symbolic_batch(specs, batch):
    """A pytree of arrays or `jax.ShapeDtypeStruct`s [B, ...] -> the same with the
    leading size replaced by `batch` (a symbolic dimension)."""
    return jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct((batch, *np.shape(s)[1:]), s.dtype), specs
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


def write(path: str | os.PathLike, exported: jax_export.Exported) -> None:
    """The serialized module (bytes), written atomically."""
    with files.atomic_open(path, "wb") as out:
        out.write(exported.serialize())


def read(path: str | os.PathLike) -> jax_export.Exported:
    """A module `write` wrote (StableHLO: deserializing runs no Python code)."""
    with open(path, "rb") as source:
        return jax_export.deserialize(bytearray(source.read()))


# -------------------------------------------------------------------------- folders


def export_bundle(
    path,
    block_outputs: int,
    platforms: Sequence[str] | None = None,
    *,
    load: Callable,
    export_forward: Callable,
    export_step: Callable,
) -> tuple[dict[str, jax_export.Exported], dict]:
    """({"forward", "step"}, export.json payload) of the bundle folder `path`: `load(path)`
    -> (net, params, info) is the task's bundle loader, `export_forward(net, params,
    platforms)` and `export_step(net, params, block_outputs, platforms)` its exporters
    (a task binds them with `functools.partial` and hands the result to `main`)."""
    net, params, info = load(path)
    modules = {
        "forward": export_forward(net, params, platforms),
        "step": export_step(net, params, block_outputs, platforms),
    }
    return modules, manifest(info, block_outputs)


def read_task_folder(
    path: str | os.PathLike, task_format: bundle_lib.TaskFormat
) -> tuple[bundle_lib.Bundle, int, dict[str, jax_export.Exported]]:
    """`read_folder` for the task of `task_format` (`speechkit.bundle.TaskFormat`), with
    its check that the labels and the front end fit the model config."""
    info, block_outputs, modules = read_folder(
        path,
        task=task_format.task,
        model_config_type=task_format.model_config_type,
        decoding_type=task_format.decoding_type,
    )
    where = str(Path(path) / MANIFEST)
    task_format.check_parts(info.model_config, info.features, info.labels, where)
    return info, block_outputs, modules


def manifest(info: bundle_lib.Bundle, block_outputs: int) -> dict:
    """The export.json payload of a bundle's export (see the module docstring);
    `block_outputs`: output frames per step of the exported step."""
    return {
        "format": FORMAT,
        "task": info.task,
        "model_config": bundle_lib.to_dict(info.model_config),
        "features": bundle_lib.to_dict(info.features),
        "labels": list(info.labels),
        "decoding": bundle_lib.to_dict(info.decoding),
        "corpus": info.corpus,
        "bundle": str(info.path),
        "block_outputs": block_outputs,
    }


def write_folder(
    out_dir: str | os.PathLike, modules: Mapping[str, jax_export.Exported], payload: dict
) -> list[Path]:
    """Writes `<name>.stablehlo` for each module, then `payload` as export.json (each
    atomically, the JSON last) -> the paths written, in that order."""
    folder = Path(out_dir)
    written = []
    for name, exported in modules.items():
        write(folder / f"{name}{SUFFIX}", exported)
        written.append(folder / f"{name}{SUFFIX}")
    files.write_json(folder / MANIFEST, {**payload, "modules": list(modules)})
    return [*written, folder / MANIFEST]


def is_folder(path: str | os.PathLike) -> bool:
    """Whether `path` is an export folder (holds export.json)."""
    return (Path(path) / MANIFEST).is_file()


def read_folder(
    path: str | os.PathLike, *, task: str, model_config_type: type, decoding_type: type
) -> tuple[bundle_lib.Bundle, int, dict[str, jax_export.Exported]]:
    """(info, block_outputs, {name: module}) of an export folder `write_folder` wrote;
    a `BundleError` naming the file and the field for anything missing or of another
    task."""
    folder = Path(path)
    where = folder / MANIFEST
    payload = files.read_json(where)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise bundle_lib.BundleError(f"{where}: missing or not a {FORMAT} manifest")
    if payload.get("task") != task:
        raise bundle_lib.BundleError(
            f"{where}: task: expected {task!r}, got {payload.get('task')!r} (an export of "
            "another task)"
        )
    try:
        info = bundle_lib.Bundle(
            path=str(folder),
            task=task,
            format_version=1,
            model_config=bundle_lib.from_dict(
                model_config_type, payload.get("model_config"), "model_config"
            ),
            features=bundle_lib.from_dict(FeatureConfig, payload.get("features"), "features"),
            labels=tuple(str(label) for label in payload.get("labels", ())),
            decoding=bundle_lib.from_dict(decoding_type, payload.get("decoding"), "decoding"),
            corpus=str(payload.get("corpus", "")),
        )
        block_outputs = checks.require_int(
            "block_outputs", payload.get("block_outputs"), at_least=1
        )
    except (TypeError, ValueError) as err:
        raise bundle_lib.BundleError(f"{where}: {err}") from None
    modules = {}
    for name in payload.get("modules", ()):
        module_path = folder / f"{name}{SUFFIX}"
        if not module_path.is_file():
            raise bundle_lib.BundleError(f"{module_path}: missing (listed in {MANIFEST})")
        modules[name] = read(module_path)
    return info, block_outputs, modules


# ---------------------------------------------------------------------- command line


def main(
    argv,
    *,
    prog: str,
    what: str,
    export_bundle: Callable[..., tuple[dict, dict]],
    default_block_outputs: int = 5,
) -> int:
    """The command line `prog BUNDLE OUT_DIR [--block-outputs N] [--platforms cpu,cuda]`
    of a task's export: `export_bundle(bundle, block_outputs, platforms)` ->
    ({name: module}, export.json payload), written with `write_folder`. `what` names
    the bundle's model in the help. Returns the exit status (2: a bad bundle)."""
    parse = argparse.ArgumentParser(
        prog=prog,
        description=f"Export {what} bundle's offline forward and streaming step as serialized "
        f"StableHLO (forward{SUFFIX}, step{SUFFIX}) with {MANIFEST} (labels, front end, "
        "decoding, block size): a folder a streaming client runs without the bundle.",
    )
    parse.add_argument("bundle", help="bundle folder")
    parse.add_argument("out_dir", help=f"folder for the modules and {MANIFEST}")
    parse.add_argument(
        "--block-outputs",
        type=int,
        default=default_block_outputs,
        help=f"output frames per step (default {default_block_outputs})",
    )
    parse.add_argument(
        "--platforms", default=None, help="comma-separated, e.g. cpu,cuda (default: this one)"
    )
    args = parse.parse_args(argv)
    platforms = args.platforms.split(",") if args.platforms else None
    compilation.enable_cache()
    try:
        modules, payload = export_bundle(args.bundle, args.block_outputs, platforms)
    except ValueError as err:  # BundleError included
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path in write_folder(args.out_dir, modules, payload):
        exported = modules.get(path.name.removesuffix(SUFFIX))
        if exported is None:
            print(f"{path}: {payload['task']}, {len(payload['labels'])} labels")
        else:
            print(f"{path}: {len(exported.in_avals)} inputs -> {len(exported.out_avals)} outputs")
    return 0
