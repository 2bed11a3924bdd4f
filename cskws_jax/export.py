"""AF-KWS as serialized StableHLO (`jax.export`): the offline forward and the streaming
step, parameters baked in, polymorphic in batch size (and the forward in length).

    forward = export.export_forward(net, params)     # or both from a bundle:
    forward, step = export.from_bundle("out/cskws/afkws/bundle", block_outputs=5)
    export.write("forward.stablehlo", forward)       # bytes; export.read(path) -> Exported
    heads, out_mask = forward.call(features, mask)   # features [b, 4 t, F], mask [b, 4 t]
    state = export.initial_state(step, batch_size=1)
    heads, out_mask, state = step.call(block, block_mask, state)   # block [b, 4 * 5, F]

`export_forward` is `AfKws.__call__` for features float32 [b, stride * t, F] and mask
bool [b, stride * t] (b and t symbolic: any batch, any whole number of output frames;
pad a stream with masked frames to a multiple of the output stride) -> ({"heatmap" [b, t,
C], "length", "offset" [b, t]}, out_mask [b, t]). `export_step` is `AfKws.step` for
blocks of stride * block_outputs frames (b symbolic; the block length is fixed, since
sequence-layers' step checks it with a Fraction that a symbolic length does not
support), with the state as a flat list of arrays
(sequence-layers' state classes cannot be serialized): (block, block_mask, state) ->
(heads [b, n, ...], out_mask [b, n], state). The initial state is zeros of the state's
shapes (`initial_state`; checked when exporting). Loading a serialized module runs no
Python code: it is StableHLO, compiled by XLA. tests/cskws_jax/test_export.py checks
both against the live model after a round trip through bytes.

    python -m cskws_jax.export BUNDLE OUT_DIR [--block-outputs 5] [--platforms cpu,cuda]

Serializing needs the `flatbuffers` package (an optional dependency of jax.export).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export

from cskws_jax import bundle, model
from speechkit import checks, files


def export_forward(
    net: model.AfKws, params, platforms: Sequence[str] | None = None
) -> jax_export.Exported:
    """The whole-sequence call with `params` baked in; see the module docstring."""
    config = net.config
    batch, frames = jax_export.symbolic_shape("b, t")
    length = config.output_stride * frames
    features = jax.ShapeDtypeStruct((batch, length, config.features), jnp.float32)
    mask = jax.ShapeDtypeStruct((batch, length), jnp.bool_)

    def forward(features, mask):
        return net.apply(params, {"audio": features}, {"audio": mask})

    return jax_export.export(jax.jit(forward), platforms=platforms)(features, mask)


def export_step(
    net: model.AfKws, params, block_outputs: int = 5, platforms: Sequence[str] | None = None
) -> jax_export.Exported:
    """The streaming step for blocks of `block_outputs` output frames, with `params`
    baked in and a flat list as state; see the module docstring."""
    config = net.config
    (batch,) = jax_export.symbolic_shape("b")
    length = config.output_stride * checks.require_int("block_outputs", block_outputs, at_least=1)
    state = jax.eval_shape(lambda: net.apply(params, 1, method=net.initial_state))
    leaves, treedef = jax.tree_util.tree_flatten(state)
    _check_zero_initial_state(net, params)
    flat_state = [jax.ShapeDtypeStruct((batch, *s.shape[1:]), s.dtype) for s in leaves]
    block = jax.ShapeDtypeStruct((batch, length, config.features), jnp.float32)
    mask = jax.ShapeDtypeStruct((batch, length), jnp.bool_)

    def step(block, mask, flat):
        state = jax.tree_util.tree_unflatten(treedef, flat)
        heads, out_mask, state = net.apply(
            params, {"audio": block}, {"audio": mask}, state, method=net.step
        )
        return heads, out_mask, jax.tree_util.tree_leaves(state)

    return jax_export.export(jax.jit(step), platforms=platforms)(block, mask, flat_state)


def _check_zero_initial_state(net: model.AfKws, params) -> None:
    """`initial_state` rebuilds the state as zeros: the model's must be zeros."""
    state = net.apply(params, 1, method=net.initial_state)
    if any(np.any(np.asarray(leaf)) for leaf in jax.tree_util.tree_leaves(state)):
        raise ValueError("AfKws.initial_state: not all zeros; export_step cannot rebuild it")


def initial_state(step: jax_export.Exported, batch_size: int) -> list[jax.Array]:
    """The state before a stream's first block: zeros [batch_size, ...] of each state
    array of an exported step."""
    state_avals = step.in_avals[2:]
    return [
        jnp.zeros((batch_size, *(int(d) for d in aval.shape[1:])), aval.dtype)
        for aval in state_avals
    ]


def from_bundle(path, block_outputs: int = 5, platforms: Sequence[str] | None = None):
    """(forward, step) exported from a bundle folder (`cskws_jax.bundle.load`)."""
    net, params, _ = bundle.load(path)
    step = export_step(net, params, block_outputs, platforms)
    return export_forward(net, params, platforms), step


def write(path: str | os.PathLike, exported: jax_export.Exported) -> None:
    """The serialized module (bytes), written atomically."""
    with files.atomic_open(path, "wb") as out:
        out.write(exported.serialize())


def read(path: str | os.PathLike) -> jax_export.Exported:
    """A module `write` wrote (StableHLO: deserializing runs no Python code)."""
    with open(path, "rb") as source:
        return jax_export.deserialize(bytearray(source.read()))


def main(argv=None) -> int:
    parse = argparse.ArgumentParser(
        prog="python -m cskws_jax.export",
        description="Export an AF-KWS bundle's offline forward and streaming step as "
        "serialized StableHLO (forward.stablehlo, step.stablehlo).",
    )
    parse.add_argument("bundle", help="bundle folder (cskws_jax.bundle.save)")
    parse.add_argument("out_dir", help="folder for forward.stablehlo and step.stablehlo")
    parse.add_argument(
        "--block-outputs", type=int, default=5, help="output frames per step (default 5: 200 ms)"
    )
    parse.add_argument(
        "--platforms", default=None, help="comma-separated, e.g. cpu,cuda (default: this one)"
    )
    args = parse.parse_args(argv)
    platforms = args.platforms.split(",") if args.platforms else None
    try:
        forward, step = from_bundle(args.bundle, args.block_outputs, platforms)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, exported in (("forward", forward), ("step", step)):
        path = os.path.join(args.out_dir, f"{name}.stablehlo")
        write(path, exported)
        print(f"{path}: {exported.in_avals[:2]} -> {len(exported.out_avals)} outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
