"""MultiQT as serialized StableHLO (`jax.export`): the offline forward and the streaming
step, parameters baked in, polymorphic in batch size (and the forward in length).

    forward = export.export_forward(net, params)     # or both from a bundle:
    forward, step = export.from_bundle("out/multimodal/bundle-fold0", block_outputs=5)
    export.write("forward.stablehlo", forward)       # bytes; export.read(path) -> Exported
    outputs, out_mask = forward.call(inputs, mask, present)
    state = export.initial_state(step, batch_size=1)
    outputs, out_mask, state = step.call(block, block_mask, present, state)

    python -m multiqt_jax.export BUNDLE OUT_DIR [--block-outputs 5] [--platforms cpu,cuda]

The folder (StableHLO, ONNX, export.json) is read back by `read_folder`. Specification
(input dicts, signatures, checks, folder): docs/models.md#stablehlo-exports; files and
running them: docs/usage.md#export.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import export as jax_export

from multiqt_jax import decode
from multiqt_jax.config import (
    AUDIO_HOP_S,
    MODALITIES,
    TASK_FIELDS,
    TEXT_HOP_S,
    MultiQTConfig,
    check_tracking,
)
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
    from multiqt_jax.model import MultiQT

__all__ = [
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


def input_specs(config: MultiQTConfig, outputs, batch=1) -> tuple[dict, dict, object]:
    """(inputs, mask, present) as `jax.ShapeDtypeStruct`s for `outputs` output frames
    (an int or a symbolic dimension) of `batch` streams."""
    widths = {"audio": config.audio_features, "text": config.text_symbols}
    inputs, mask = {}, {}
    for name in config.modalities:
        frames = _blocks(config)[name][1] * outputs
        inputs[name] = jax.ShapeDtypeStruct((batch, frames, widths[name]), jnp.float32)
        mask[name] = jax.ShapeDtypeStruct((batch, frames), jnp.bool_)
    return inputs, mask, jax.ShapeDtypeStruct((batch, len(MODALITIES)), jnp.bool_)


def _blocks(config: MultiQTConfig) -> dict[str, tuple[float, int]]:
    """{modality: (frame hop in s, frames per output frame)} of the config's model."""
    blocks = {"audio": (AUDIO_HOP_S, config.audio_stride), "text": (TEXT_HOP_S, config.text_stride)}
    return {name: blocks[name] for name in config.modalities}


def output_specs(config: MultiQTConfig, outputs, batch) -> tuple[dict, object]:
    """({"logits"}, out_mask) as `jax.ShapeDtypeStruct`s for `outputs` output frames."""
    logits = jax.ShapeDtypeStruct((batch, outputs, config.num_classes), jnp.float32)
    return {"logits": logits}, jax.ShapeDtypeStruct((batch, outputs), jnp.bool_)


def export_forward(
    net: MultiQT, params, platforms: Sequence[str] | None = None
) -> jax_export.Exported:
    """The whole-call forward with `params` baked in; see the module docstring."""
    batch, frames = jax_export.symbolic_shape("b, t")

    def forward(inputs, mask, present):
        return net.apply(params, inputs, mask, present)

    specs = input_specs(net.config, frames, batch)
    return jax_export.export(jax.jit(forward), platforms=platforms)(*specs)


def export_step(
    net: MultiQT, params, block_outputs: int = 5, platforms: Sequence[str] | None = None
) -> jax_export.Exported:
    """The streaming step for blocks of `block_outputs` output frames, with `params`
    baked in and a flat list as state; see the module docstring."""
    block_outputs = checks.require_int("block_outputs", block_outputs, at_least=1)

    def step(inputs, mask, present, state):
        return net.apply(params, inputs, mask, state, present, method=net.step)

    def zeros(batch_size: int):
        return net.apply(params, batch_size, method=net.initial_state)

    specs = input_specs(net.config, block_outputs)
    return shared.export_step(step, specs, zeros, platforms, "MultiQT.initial_state")


def signatures(info: Bundle, block_outputs: int, facts: ModelFacts) -> dict[str, Signature]:
    """{"forward", "step"}: what the modules of an export with export.json's `info`,
    `block_outputs` and `facts` take and return (`speechkit.export_format.Signature`; the step's
    state `facts`' "step": `speechkit.export_format.module_signatures`)."""
    config = info.model_config
    return export_format.module_signatures(config, input_specs, output_specs, block_outputs, facts)


def model_facts(info: Bundle, block_outputs: int) -> ModelFacts:
    """What an export stores of the model code (`speechkit.export_format.ModelFacts`): the
    streaming spec of `MultiQT(info.model_config)` and its step's state arrays ("step").
    Needs the model code (the full install)."""
    from multiqt_jax import model

    net = model.MultiQT(info.model_config)
    state = {"step": lambda n: net.apply({}, n, method=net.initial_state)}
    return export_format.model_facts(streaming.spec_of(net), state)


def from_bundle(path, block_outputs: int = 5, platforms: Sequence[str] | None = None):
    """(forward, step) exported from a bundle folder (`multiqt_jax.bundle.load`)."""
    modules, _, _ = export_bundle(path, block_outputs, platforms, export_onnx=None)
    return modules["forward"], modules["step"]


def onnx_signatures(
    info: Bundle, block_outputs: int, facts: ModelFacts
) -> dict[str, onnx_export.Signature]:
    """{"frontend", "forward", "step"}: the ONNX modules of an export with export.json's
    `info`, `block_outputs` and `facts` (`speechkit.onnx_export.Signature`):

    - frontend: `speechkit.onnx_export.frontend_signature` for this step's audio block;
    - forward: inputs, mask, present -> outputs ({"logits"}), out_mask;
    - step: inputs, mask, present, state -> outputs, out_mask, new_state (as the
      StableHLO step).
    """
    config = info.model_config
    batch, frames = onnx_export.sizes()
    inputs, mask, present = input_specs(config, frames, batch)
    outputs, out_mask = output_specs(config, frames, batch)
    block, block_mask, block_present = input_specs(config, block_outputs, batch)
    block_outputs_, block_out_mask = output_specs(config, block_outputs, batch)
    state = facts.state("step", batch)
    step = onnx_export.Signature(
        {"inputs": block, "mask": block_mask, "present": block_present, "state": state},
        {"outputs": block_outputs_, "out_mask": block_out_mask, "new_state": state},
    )
    streams = {}
    if "audio" in config.modalities:  # a text-only model has no samples to stream
        streams[onnx_stream.NAME] = onnx_stream.signature(
            info.features, _audio_frames(info, block_outputs), _decided_signature(step)
        )
    return {
        "frontend": onnx_export.frontend_signature(
            info.features, _audio_frames(info, block_outputs)
        ),
        "forward": onnx_export.Signature(
            {"inputs": inputs, "mask": mask, "present": present},
            {"outputs": outputs, "out_mask": out_mask},
        ),
        "step": step,
        **streams,
    }


def _decided_signature(step: onnx_export.Signature) -> onnx_export.Signature:
    """The step with the smoothing rule (`multiqt_jax.decode.step`) after it, as the
    stream module runs it (`_decided_step`): block (audio features), mask, present, the
    text block and its mask (a text model), state (the step's, then the rule's three
    int32 [b]) -> labels int32 [b, n], logits, out_mask, new_state."""
    arguments, results = step.arguments, step.results
    batch = results["out_mask"].shape[0]
    rule = [jax.ShapeDtypeStruct((batch,), jnp.int32)] * len(decode.SmoothingState._fields)
    text = {}
    if "text" in arguments["inputs"]:
        text = {"text": arguments["inputs"]["text"], "text_mask": arguments["mask"]["text"]}
    return onnx_export.Signature(
        {
            "block": arguments["inputs"]["audio"],
            "mask": arguments["mask"]["audio"],
            "present": arguments["present"],
            **text,
            "state": [*arguments["state"], *rule],
        },
        {
            "labels": jax.ShapeDtypeStruct(results["out_mask"].shape, jnp.int32),
            "logits": results["outputs"]["logits"],
            "out_mask": results["out_mask"],
            "new_state": [*results["new_state"], *rule],
        },
    )


def _decided_step(step, smoothing: decode.SmoothingConfig, model_state: int):
    """`step(inputs, mask, present, state)` and the smoothing rule as the stream
    module's step (`_decided_signature`): the first `model_state` state arrays are
    the model's, the rest the rule's."""

    def decided(block, mask, state, present, text=None, text_mask=None):
        inputs, masks = {"audio": block}, {"audio": mask}
        if text is not None:
            inputs["text"], masks["text"] = text, text_mask
        outputs, out_mask, new_state = step(inputs, masks, present, state[:model_state])
        rule = decode.SmoothingState(*state[model_state:])
        labels, _, rule = decode.step(outputs["logits"], out_mask, rule, smoothing)
        return labels, outputs["logits"], out_mask, [*new_state, *rule]

    return decided


def _audio_frames(info: Bundle, block_outputs: int) -> int:
    """10 ms audio frames per step of `block_outputs` output frames (the tracker's
    block, `multiqt_jax.track.StreamModel.audio_block`)."""
    hop_s, block = next(iter(_blocks(info.model_config).values()))
    return round(block_outputs * hop_s * block / info.features.hop_s)


def export_onnx(net: MultiQT, params, info: Bundle, block_outputs: int, facts: ModelFacts) -> dict:
    """{name: onnx.ModelProto} of `onnx_signatures`, parameters baked in; `facts`: the
    model's (`model_facts`)."""
    signature = onnx_signatures(info, block_outputs, facts)
    tree = jax.tree_util.tree_structure(net.apply(params, 1, method=net.initial_state))

    def forward(inputs, mask, present):
        return net.apply(params, inputs, mask, present)

    def step(inputs, mask, present, state):
        state = jax.tree_util.tree_unflatten(tree, state)
        outputs, out_mask, state = net.apply(params, inputs, mask, state, present, method=net.step)
        return outputs, out_mask, jax.tree_util.tree_leaves(state)

    modules = {
        "frontend": onnx_export.lower_frontend(info.features, _audio_frames(info, block_outputs)),
        "forward": onnx_export.lower_module(forward, signature["forward"], "forward"),
        "step": onnx_export.lower_module(step, signature["step"], "step"),
    }
    if onnx_stream.NAME in signature:
        decided = _decided_step(step, info.decoding.smoothing, len(facts.state("step", 1)))
        modules[onnx_stream.NAME] = onnx_stream.lower(
            info.features,
            _audio_frames(info, block_outputs),
            decided,
            _decided_signature(signature["step"]),
        )
    return modules


def _load(path):
    return model_code("multiqt_jax.bundle", f"{path}: exporting a bundle").load(path)


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
    of a folder the command line wrote (backend "onnx": {"frontend", "forward", "step"},
    ONNX modules in onnxruntime sessions, `speechkit.onnx_export.Module`), read without
    the model code (`model_facts` from export.json); info as a bundle's
    (`multiqt_jax.bundle.load`): labels, features, decoding, model config. A
    `speechkit.bundle.BundleError` names the file for anything missing, an export of
    another task, labels or a front end that do not fit the model, or anything
    `speechkit.export_read.read_folder` refuses (checksums, names, custom calls, signatures;
    for ONNX `speechkit.onnx_export`'s checks)."""
    return export_read.read_task_folder(
        path, TASK_FIELDS, signatures, model_facts, _check_info, backend, onnx_signatures
    )


def _check_info(info: Bundle, facts: ModelFacts, where: str) -> None:
    """The front end's hop (`check_hop`), the smoothing's background class and the
    stored model facts' inputs and state."""
    check_hop(info, where)
    check_tracking(info.decoding, len(info.labels), where)
    facts.require(_blocks(info.model_config), 0, ("step",), where)  # causal: no latency


def check_hop(info: Bundle, where: str) -> None:
    """The front end's hop is the audio frame period the model takes
    (`multiqt_jax.config.AUDIO_HOP_S`; the tracker's clock, text-only models too): the
    exported step knows frames, not seconds."""
    if not math.isclose(info.features.hop_s, AUDIO_HOP_S, rel_tol=1e-9):
        raise BundleError(
            f"{where}: features.hop_ms: {info.features.hop_ms:g}; the model takes audio frames "
            f"every {AUDIO_HOP_S * 1000:g} ms"
        )


def main(argv=None) -> int:
    """The command line (see the module docstring) -> the exit status."""
    return export_cli.main(
        argv, prog="python -m multiqt_jax.export", what="a MultiQT", export_bundle=export_bundle
    )


if __name__ == "__main__":
    sys.exit(main())
