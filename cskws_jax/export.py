"""AF-KWS as serialized StableHLO (`jax.export`): the offline forward and the streaming
step, parameters baked in, polymorphic in batch size (and the forward in length).

    forward = export.export_forward(net, params)     # or both from a bundle:
    forward, step = export.from_bundle("out/cskws/afkws/bundle", block_outputs=5)
    export.write("forward.stablehlo", forward)       # bytes; export.read(path) -> Exported
    heads, out_mask = forward.call(features, mask)   # features [b, 4 t, F], mask [b, 4 t]
    state = export.initial_state(step, batch_size=1)
    heads, out_mask, state = step.call(block, block_mask, state)   # block [b, 4 * 5, F]

    python -m cskws_jax.export BUNDLE OUT_DIR [--block-outputs 5] [--platforms cpu,cuda]

The folder (StableHLO, ONNX, export.json) is read back by `read_folder`, and ONNX run by
`OnnxDetector`. Specification (signatures, checks, folder): docs/models.md#stablehlo-exports;
files and running them: docs/usage.md#export.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export

from cskws_jax.config import TASK_FIELDS, AfKwsConfig, check_operating_points
from cskws_jax.datasets.features import FEATURES
from cskws_jax.streaming import StreamDetector
from speechkit import (
    checks,
    export_cli,
    export_format,
    export_read,
    onnx_export,
    onnx_stream,
    streaming,
)
from speechkit import export as shared
from speechkit.bundle import Bundle, BundleError, model_code
from speechkit.export import initial_state, write
from speechkit.export_format import ModelFacts, Signature
from speechkit.export_read import Export, read

if TYPE_CHECKING:
    from cskws_jax.model import AfKws

__all__ = [
    "OnnxDetector",
    "check_hop",
    "export_bundle",
    "export_forward",
    "export_onnx",
    "export_step",
    "from_bundle",
    "initial_state",
    "input_specs",
    "model_facts",
    "onnx_signatures",
    "output_specs",
    "read",
    "read_folder",
    "signatures",
    "write",
]


def input_specs(config: AfKwsConfig, outputs, batch=1) -> tuple[object, object]:
    """(features, mask) as `jax.ShapeDtypeStruct`s for `outputs` output frames (an int or
    a symbolic dimension) of `batch` streams."""
    length = config.output_stride * outputs
    features = jax.ShapeDtypeStruct((batch, length, config.features), jnp.float32)
    return features, jax.ShapeDtypeStruct((batch, length), jnp.bool_)


def output_specs(config: AfKwsConfig, outputs, batch) -> tuple[dict, object]:
    """(heads, out_mask) as `jax.ShapeDtypeStruct`s for `outputs` output frames."""
    frames = jax.ShapeDtypeStruct((batch, outputs), jnp.float32)
    heatmap = jax.ShapeDtypeStruct((batch, outputs, config.num_classes), jnp.float32)
    heads = {"heatmap": heatmap, "length": frames, "offset": frames}
    return heads, jax.ShapeDtypeStruct((batch, outputs), jnp.bool_)


def export_forward(
    net: AfKws, params, platforms: Sequence[str] | None = None
) -> jax_export.Exported:
    """The whole-sequence call with `params` baked in; see the module docstring."""
    batch, frames = jax_export.symbolic_shape("b, t")

    def forward(features, mask):
        return net.apply(params, {"audio": features}, {"audio": mask})

    specs = input_specs(net.config, frames, batch)
    return jax_export.export(jax.jit(forward), platforms=platforms)(*specs)


def export_step(
    net: AfKws, params, block_outputs: int = 5, platforms: Sequence[str] | None = None
) -> jax_export.Exported:
    """The streaming step for blocks of `block_outputs` output frames, with `params`
    baked in and a flat list as state; see the module docstring."""
    block_outputs = checks.require_int("block_outputs", block_outputs, at_least=1)

    def step(block, mask, state):
        return net.apply(params, {"audio": block}, {"audio": mask}, state, method=net.step)

    def zeros(batch_size: int):
        return net.apply(params, batch_size, method=net.initial_state)

    specs = input_specs(net.config, block_outputs)
    return shared.export_step(step, specs, zeros, platforms, "AfKws.initial_state")


def signatures(info: Bundle, block_outputs: int, facts: ModelFacts) -> dict[str, Signature]:
    """{"forward", "step"}: what the modules of an export with export.json's `info`,
    `block_outputs` and `facts` take and return (`speechkit.export_format.Signature`; the step's
    state `facts`' "step": `speechkit.export_format.module_signatures`)."""
    config = info.model_config
    return export_format.module_signatures(config, input_specs, output_specs, block_outputs, facts)


def model_facts(info: Bundle, block_outputs: int) -> ModelFacts:
    """What an export stores of the model code (`speechkit.export_format.ModelFacts`): the
    streaming spec of `AfKws(info.model_config)`, and the state arrays of its step
    ("step") and of the detector of `block_outputs` with `info.decoding` ("detector").
    Needs the model code (the full install)."""
    from cskws_jax import model

    net = model.AfKws(info.model_config)
    detector = _detector(info.model_config, info.decoding, block_outputs, net)
    states = {
        "step": lambda n: net.apply({}, n, method=net.initial_state),
        "detector": detector.initial_state,
    }
    return export_format.model_facts(streaming.spec_of(net), states)


def from_bundle(path, block_outputs: int = 5, platforms: Sequence[str] | None = None):
    """(forward, step) exported from a bundle folder (`cskws_jax.bundle.load`)."""
    modules, _, _ = export_bundle(path, block_outputs, platforms, export_onnx=None)
    return modules["forward"], modules["step"]


def _detector(config: AfKwsConfig, decoding, block_outputs: int, net: AfKws, params=None):
    """The `StreamDetector` the detector module runs: the bundle's peak radius and
    minimum score (`decoding`), the model itself (`params`), or (None) only its shapes."""
    params = {} if params is None else params
    return StreamDetector(net, params, block_outputs, decoding.radius, decoding.min_score)


def onnx_signatures(
    info: Bundle, block_outputs: int, facts: ModelFacts
) -> dict[str, onnx_export.Signature]:
    """{"frontend", "forward", "step", "detector", "stream"}: the ONNX modules of an export with
    export.json's `info`, `block_outputs` and `facts` (`speechkit.onnx_export.Signature`):

    - frontend: `speechkit.onnx_export.frontend_signature` for blocks of this step;
    - forward: features, mask [b, 4 t, ...] -> heads, out_mask [b, t, ...];
    - step: block, mask, state -> heads, out_mask, new_state (as the StableHLO step);
    - detector: block, mask, state -> found (`StreamDetector.step`'s decisions: peak,
      score, start, end, emitted), decided, new_state: the step and peak decoding with
      the bundle's radius and min_score, its state the detector's;
    - stream: the front end and the detector in one graph (`speechkit.onnx_stream`):
      audio samples of one block, samples, state -> found, decided, new_state.
    """
    config = info.model_config
    batch, frames = onnx_export.sizes()
    block_frames = config.output_stride * block_outputs
    features, mask = input_specs(config, frames, batch)
    heads, out_mask = output_specs(config, frames, batch)
    block, block_mask = input_specs(config, block_outputs, batch)
    block_heads, block_out_mask = output_specs(config, block_outputs, batch)
    state, detector_state = facts.state("step", batch), facts.state("detector", batch)
    position = jax.ShapeDtypeStruct((batch, block_outputs), jnp.float32)
    found = {
        "peak": jax.ShapeDtypeStruct((batch, block_outputs, config.num_keywords), jnp.bool_),
        "score": jax.ShapeDtypeStruct((batch, block_outputs, config.num_keywords), jnp.float32),
        "start": position,
        "end": position,
        "emitted": position,
    }
    stepped = {"block": block, "mask": block_mask}
    detector = onnx_export.Signature(
        {**stepped, "state": detector_state},
        {"found": found, "decided": block_out_mask, "new_state": detector_state},
    )
    return {
        "frontend": onnx_export.frontend_signature(info.features, block_frames),
        "forward": onnx_export.Signature(
            {"features": features, "mask": mask}, {"heads": heads, "out_mask": out_mask}
        ),
        "step": onnx_export.Signature(
            {**stepped, "state": state},
            {"heads": block_heads, "out_mask": block_out_mask, "new_state": state},
        ),
        "detector": detector,
        onnx_stream.NAME: onnx_stream.signature(info.features, block_frames, detector),
    }


def export_onnx(net: AfKws, params, info: Bundle, block_outputs: int, facts: ModelFacts) -> dict:
    """{name: onnx.ModelProto} of `onnx_signatures`, parameters baked in; `facts`: the
    model's (`model_facts`)."""
    signature = onnx_signatures(info, block_outputs, facts)
    model_state = jax.tree_util.tree_structure(net.apply(params, 1, method=net.initial_state))
    detector = _detector(net.config, info.decoding, block_outputs, net, params)
    detector_state = jax.tree_util.tree_structure(detector.initial_state(1))

    def forward(features, mask):
        return net.apply(params, {"audio": features}, {"audio": mask})

    def step(block, mask, state):
        state = jax.tree_util.tree_unflatten(model_state, state)
        heads, out_mask, state = net.apply(
            params, {"audio": block}, {"audio": mask}, state, method=net.step
        )
        return heads, out_mask, jax.tree_util.tree_leaves(state)

    def detect(block, mask, state):
        state = jax.tree_util.tree_unflatten(detector_state, state)
        found, decided, state = detector._decide({"audio": block}, {"audio": mask}, state)
        return found, decided, jax.tree_util.tree_leaves(state)

    block_frames = net.config.output_stride * block_outputs
    return {
        "frontend": onnx_export.lower_frontend(info.features, block_frames),
        "forward": onnx_export.lower_module(forward, signature["forward"], "forward"),
        "step": onnx_export.lower_module(step, signature["step"], "step"),
        "detector": onnx_export.lower_module(detect, signature["detector"], "detector"),
        onnx_stream.NAME: onnx_stream.lower(
            info.features, block_frames, detect, signature["detector"]
        ),
    }


def _load(path):
    return model_code("cskws_jax.bundle", f"{path}: exporting a bundle").load(path)


export_bundle = functools.partial(
    shared.export_bundle,
    load=_load,
    export_forward=export_forward,
    export_step=export_step,
    facts_of=model_facts,
    export_onnx=export_onnx,
)
"""(path, block_outputs, platforms) -> ({"forward", "step"}, export.json payload, {name:
onnx.ModelProto})."""


def read_folder(path: str | os.PathLike, backend: str = "jax") -> Export:
    """The `speechkit.export_read.Export` (info, block_outputs, {"forward", "step"}, facts)
    of a folder the command line wrote (backend "onnx": {"frontend", "forward", "step",
    "detector"}, ONNX modules in onnxruntime sessions, `speechkit.onnx_export.Module`),
    read without the model code (`model_facts` from export.json); info as a bundle's
    (`cskws_jax.bundle.load`): keywords, features, decoding (with its operating points),
    model config. A `speechkit.bundle.BundleError` names the file and the field for
    anything missing, an export of another task, keywords, a front end or operating
    points that do not fit the model, or anything `speechkit.export_read.read_folder` refuses
    (checksums, names, custom calls, signatures; for ONNX `speechkit.onnx_export`'s
    checks)."""

    def check(info: Bundle, facts: ModelFacts, where: str) -> None:
        check_operating_points(info.decoding, len(info.labels), where)
        audio = (FEATURES.hop_s, info.model_config.output_stride)
        latency = info.model_config.delay  # output frames of look-ahead
        facts.require({"audio": audio}, latency, ("step", "detector"), where)
        check_hop(info, facts, where)

    return export_read.read_task_folder(
        path, TASK_FIELDS, signatures, model_facts, check, backend, onnx_signatures
    )


class OnnxDetector:
    """An export's ONNX detector (`onnx_signatures`: the step and peak decoding) and
    front end, run by onnxruntime, with the interface `cskws_jax.detect` uses of a
    `StreamDetector`: `config`, `spec`, `block_outputs`, `block_frames`,
    `initial_state(batch_size)`, `step(inputs, mask, state)` -> (found, decided, state),
    and `feature_stream(features)`, the front end's `FeatureStream`."""

    def __init__(self, info: Bundle, block_outputs: int, modules: dict, facts: ModelFacts):
        self.config, self.block_outputs = info.model_config, block_outputs
        self._detector, self._frontend = modules["detector"], modules["frontend"]
        model_spec = facts.spec
        latency = model_spec.output_latency + info.decoding.radius
        self.spec = dataclasses.replace(model_spec, output_latency=latency)
        self.block_frames = {"audio": block_outputs * self.config.output_stride}

    def initial_state(self, batch_size: int) -> list:
        return self._detector.initial_state(batch_size)

    def step(self, inputs, mask, state):
        block = np.asarray(inputs["audio"], np.float32)
        outputs = self._detector.call(
            block=block, mask=np.asarray(mask["audio"], bool), state=state
        )
        return outputs["found"], outputs["decided"], outputs["new_state"]

    def feature_stream(self, features):
        """The front end over arriving samples, as the ONNX module."""
        return onnx_export.feature_stream(features, self.block_frames["audio"], self._frontend)


def check_hop(info: Bundle, facts: ModelFacts, where: str) -> None:
    """The front end's hop is the one the model's streaming spec takes its frames at
    (`AfKws.streaming_spec`, stored in `facts`): the exported step knows frames, not
    seconds, so another hop would put every detection at the wrong time."""
    hop_s = facts.spec.inputs["audio"].hop_s
    if not math.isclose(info.features.hop_s, hop_s, rel_tol=1e-9):
        raise BundleError(
            f"{where}: features.hop_ms: {info.features.hop_ms:g}; the model takes frames every "
            f"{hop_s * 1000:g} ms (its streaming spec)"
        )


def main(argv=None) -> int:
    """The command line (see the module docstring) -> the exit status."""
    return export_cli.main(
        argv, prog="python -m cskws_jax.export", what="an AF-KWS", export_bundle=export_bundle
    )


if __name__ == "__main__":
    sys.exit(main())
