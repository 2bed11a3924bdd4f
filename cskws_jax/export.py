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
both against the live model after a round trip through bytes. The parts both tasks'
exports share (flat state, write / read, the export folder, the command line) are
`speechkit.export`'s.

    python -m cskws_jax.export BUNDLE OUT_DIR [--block-outputs 5] [--platforms cpu,cuda]

OUT_DIR gets forward.stablehlo, step.stablehlo and export.json (labels, front end,
decoding settings with the bundle's operating points, block size:
`speechkit.export.write_folder`); `read_folder` reads it back, checked, and `python -m
cskws_jax.detect OUT_DIR AUDIO...` runs the exported step on audio.

Serializing needs the `flatbuffers` package (an optional dependency of jax.export).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax import export as jax_export

from cskws_jax import bundle, model
from speechkit import checks
from speechkit import export as shared
from speechkit.bundle import Bundle
from speechkit.export import initial_state, read, write

__all__ = [
    "export_forward",
    "export_step",
    "from_bundle",
    "initial_state",
    "read",
    "read_folder",
    "write",
]


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
    length = config.output_stride * checks.require_int("block_outputs", block_outputs, at_least=1)
    block = jax.ShapeDtypeStruct((1, length, config.features), jnp.float32)
    mask = jax.ShapeDtypeStruct((1, length), jnp.bool_)

    def step(block, mask, state):
        return net.apply(params, {"audio": block}, {"audio": mask}, state, method=net.step)

    def zeros(batch_size: int):
        return net.apply(params, batch_size, method=net.initial_state)

    return shared.export_step(step, (block, mask), zeros, platforms, "AfKws.initial_state")


def from_bundle(path, block_outputs: int = 5, platforms: Sequence[str] | None = None):
    """(forward, step) exported from a bundle folder (`cskws_jax.bundle.load`)."""
    modules, _ = _export_bundle(path, block_outputs, platforms)
    return modules["forward"], modules["step"]


_export_bundle = functools.partial(
    shared.export_bundle, load=bundle.load, export_forward=export_forward, export_step=export_step
)
"""(path, block_outputs, platforms) -> ({"forward", "step"}, export.json payload)."""


def read_folder(path: str | os.PathLike) -> tuple[Bundle, int, dict[str, jax_export.Exported]]:
    """(info, block_outputs, {"forward", "step"}) of a folder the command line wrote;
    info as a bundle's (`cskws_jax.bundle.load`): keywords, features, decoding (with its
    operating points), model config. A `speechkit.bundle.BundleError` names the file
    and the field for anything missing, an export of another task, or keywords, a front
    end or operating points that do not fit the model."""
    info, block_outputs, modules = shared.read_task_folder(path, bundle.TASK_FORMAT)
    where = os.path.join(path, shared.MANIFEST)
    bundle.check_operating_points(info.decoding, len(info.labels), where)
    return info, block_outputs, modules


def main(argv=None) -> int:
    """The command line (see the module docstring) -> the exit status."""
    return shared.main(
        argv, prog="python -m cskws_jax.export", what="an AF-KWS", export_bundle=_export_bundle
    )


if __name__ == "__main__":
    sys.exit(main())
