"""What an exported ONNX module says about itself: `metadata_props` that an onnxruntime
user reads without the toolkit.

    onnx_metadata.describe(onnx_modules, payload)   # when exporting (export.json's payload)
    props = onnx_metadata.read(model)              # {key: str}; session.get_modelmeta()
                                                   # .custom_metadata_map is the same

Every module of an export folder carries the keys of `KEYS`, as strings (numbers in
decimal, lists and tables as JSON); docs/usage.md ("ONNX without the toolkit") says what
each means.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import onnx

from speechkit import onnx_stream
from speechkit.frontend import FeatureConfig

MODULES = {
    "frontend": "audio [b, context_samples + samples_per_block] float32 at sample_rate, "
    "lengths [b] int32 (context_samples + the real samples) -> log-mel features [b, frames, "
    "mels] and mask; the first frames_to_drop frames are the context's",
    "forward": "the whole-sequence model: features of a whole stream -> its outputs",
    "step": "one block of block_frames features with its mask and state -> block_outputs "
    "outputs, their mask and the new state (all zeros before a stream's first block)",
    "detector": "the step and peak decoding: one block of features, mask, state -> the "
    "block_outputs positions' peaks (score >= min_score), their times, and the new state",
    "stream": "the front end and the decisions in one graph: audio [b, samples_per_block] "
    "float32 at sample_rate, samples [b] int32 (how many are real; 0 to flush), state "
    "(all zeros to start) -> the decisions of block_outputs positions and the new state",
}
"""Each module's contract in a line (`description`)."""
KEYS = (
    "format",
    "format_version",
    "task",
    "module",
    "description",
    "bundle",
    "labels",
    "sample_rate",
    "hop_samples",
    "samples_per_block",
    "context_samples",
    "frames_to_drop",
    "block_frames",
    "block_outputs",
    "frames_per_output",
    "output_hop_s",
    "latency_outputs",
    "latency_s",
    "decision_latency_outputs",
    "decision_latency_s",
    "operating_points",
    "decoding",
)


def properties(payload: Mapping, module: str) -> dict[str, str]:
    """{key: value} of `KEYS` for the ONNX module `module` of an export whose export.json
    payload is `payload` (`speechkit.export_format.manifest`)."""
    config = FeatureConfig(**payload["features"])
    spec = payload["model_facts"]["streaming_spec"]
    audio = spec["inputs"]["audio"]
    block_frames = audio["block"] * payload["block_outputs"]
    samples, context, drop = onnx_stream.framing(config, block_frames)
    output_hop_s = audio["hop_s"] * audio["block"]
    latency = spec["output_latency"]
    decoding = payload["decoding"]
    return {
        "format": payload["format"],
        "format_version": str(payload["format_version"]),
        "task": payload["task"],
        "module": module,
        "description": MODULES.get(module, ""),
        "bundle": payload["bundle"],
        "labels": json.dumps(list(payload["labels"])),
        "sample_rate": str(config.sample_rate),
        "hop_samples": str(config.hop_samples),
        "samples_per_block": str(samples),
        "context_samples": str(context),
        "frames_to_drop": str(drop),
        "block_frames": str(block_frames),
        "block_outputs": str(payload["block_outputs"]),
        "frames_per_output": str(audio["block"]),
        "output_hop_s": _number(output_hop_s),
        "latency_outputs": str(latency),
        "latency_s": _number(latency * output_hop_s),
        "decision_latency_outputs": str(latency + decision_lag(decoding)),
        "decision_latency_s": _number((latency + decision_lag(decoding)) * output_hop_s),
        "operating_points": json.dumps(decoding.get("operating_points", [])),
        "decoding": json.dumps(decoding, sort_keys=True),
    }


def decision_lag(decoding: Mapping) -> int:
    """Output frames a decision waits for after the model's output: AF-KWS's peak radius
    (a peak is decided when its neighbours are out), MultiQT's smoothing (K - 1 frames
    to switch class)."""
    if "radius" in decoding:
        return int(decoding["radius"])
    smoothing = decoding.get("smoothing") or {}
    return max(0, int(smoothing.get("min_frames", 1)) - 1)


def describe(modules: Mapping[str, onnx.ModelProto], payload: Mapping) -> None:
    """Sets each module's `metadata_props` to `properties(payload, name)`."""
    for name, model in modules.items():
        del model.metadata_props[:]
        for key, value in properties(payload, name).items():
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value


def read(model: onnx.ModelProto) -> dict[str, str]:
    """A module's `metadata_props` as {key: value}."""
    return {entry.key: entry.value for entry in model.metadata_props}


def _number(value: float) -> str:
    return f"{value:.6g}"
