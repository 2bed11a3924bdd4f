"""The export folder format: what export.json holds, and how its versions differ.

    payload = export_format.manifest(info, block_outputs, facts)   # its fields, less modules
    digests = export_format.fields_sha256(fields)                  # export.json's fields_sha256
    facts = export_format.ModelFacts.from_dict(payload["model_facts"], where)

An export folder holds one `<name>.stablehlo` per module, one `<name>.onnx` per ONNX
module and `MANIFEST` (export.json): `FORMAT` at `FORMAT_VERSION`, with `FIELDS`: the
bundle's task, labels, front end, decoding and model config, the step's block size, the
model facts (`ModelFacts`: what running the folder needs of the model code), each
module's file, sha256 and size, and each field's sha256. `Signature` is what a module
must take and return. Writing a folder is `speechkit.export`'s, reading it back
`speechkit.export_read`'s; the format in full: docs/architecture.md, "Data contracts".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import numpy as np
from jax import export as jax_export

from speechkit import bundle as bundle_lib
from speechkit import checks, onnx_stream, streaming
from speechkit.dataclass_json import from_dict

MANIFEST = "export.json"
FORMAT = "speechkit-export"
FORMAT_VERSION = 6
"""6: the ONNX `stream` module (front end and step in one graph, `speechkit.onnx_stream`)
and `metadata_props` in every ONNX module (`speechkit.onnx_metadata`); 5: each module's
size in bytes (`bytes` beside its `sha256`, checked before the file is read); 4:
`model_facts` (read without the model code); 3: ONNX modules; 2: the modules' and
fields' sha256 (1: none of them)."""
READABLE_VERSIONS = (2, 3, 4, 5, 6)
"""Folders of versions 2 and 3 are read as before, their model facts from the model code
(the full install); version 2 holds no ONNX modules. Before version 5 a module's size is
not recorded: its file is only checked against the cap
(`speechkit.export_read.MAX_FILE_BYTES`, `speechkit.onnx_export.MAX_FILE_BYTES`)."""
SUFFIX = ".stablehlo"
BACKENDS = ("jax", "onnx")
"""What runs an export folder's modules: jax (its StableHLO, compiled by XLA) or
onnxruntime (its ONNX modules, `speechkit.onnx_export`)."""
NAME = re.compile(r"[A-Za-z0-9_]+")
"""A module's or a state's name in export.json: letters, digits and `_` only."""
FIELDS = (
    "format",
    "format_version",
    "task",
    "model_config",
    "features",
    "labels",
    "decoding",
    "corpus",
    "bundle",
    "block_outputs",
    "modules",
    "onnx_modules",
    "model_facts",
)
"""export.json's fields, each covered by its `fields_sha256` entry (a version 2 folder
has no `onnx_modules`, one before version 4 no `model_facts`)."""
ADDED_IN = {"onnx_modules": 3, "model_facts": 4}
ONNX_ADDED_IN = {onnx_stream.NAME: 6}  # ONNX modules a folder of an older version lacks
ENTRY_KEYS = ("file", "sha256", "bytes")
"""A module's entry in export.json; `bytes` from format version 5 (optional before)."""
ENTRY_BYTES_SINCE = 5
MAX_STATE_ARRAYS = 4096  # a step's state arrays; the project's models have a few dozen
MAX_STATE_RANK = 8


def with_symbolic_batch(specs, batch):
    """A pytree of arrays or `jax.ShapeDtypeStruct`s [B, ...] -> the same with the
    leading size replaced by `batch` (a symbolic dimension)."""
    return jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct((batch, *np.shape(s)[1:]), s.dtype), specs
    )


@dataclasses.dataclass(frozen=True)
class Signature:
    """What one module of a task's export must take and return, as export.json's fields
    make it: `args` and `results` tuples of pytrees of `jax.ShapeDtypeStruct` (sizes may
    be symbolic, from `jax.export.symbolic_shape`: `b` the batch, `t` a forward's output
    frames), a step's state left out; `state`: a step's state arrays for one stream
    ([1, ...], `ModelFacts.state`; the module's lead with `b`), None for a module without
    state (a forward). A step's results lead with [b, block_outputs]."""

    args: tuple
    results: tuple
    state: Sequence | None = None


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    """What reading and running an export needs of the model code, computed when
    exporting (`model_facts`) and stored in export.json's `model_facts` field (format
    version 4), so that the light install reads and runs an export without it.

    spec: the model's `speechkit.streaming.StreamingSpec` (each input's hop, block and
      receptive field; the output latency);
    states: {name: ((shape, dtype), ...)}, the flat state arrays of each stateful module
      ("step": the model's; AF-KWS's "detector": the model's and peak decoding's), with
      "b" at the batch's axes.
    """

    spec: streaming.StreamingSpec
    states: Mapping[str, tuple[tuple[tuple, str], ...]]

    def state(self, name: str, batch) -> list[jax.ShapeDtypeStruct]:
        """State `name`'s arrays for `batch` streams (an int or a symbolic size)."""
        return [
            jax.ShapeDtypeStruct(tuple(batch if size == "b" else size for size in shape), dtype)
            for shape, dtype in self.states[name]
        ]

    def to_dict(self) -> dict:
        """export.json's `model_facts` value."""
        inputs = {name: dataclasses.asdict(spec) for name, spec in self.spec.inputs.items()}
        return {
            "streaming_spec": {"inputs": inputs, "output_latency": self.spec.output_latency},
            "states": {
                name: [{"shape": list(shape), "dtype": dtype} for shape, dtype in leaves]
                for name, leaves in self.states.items()
            },
        }

    @classmethod
    def from_dict(cls, value, where) -> ModelFacts:
        """`to_dict`'s value back, every part checked: a `BundleError` naming `where` and
        the part (at most `MAX_STATE_ARRAYS` arrays per state, each of rank at most
        `MAX_STATE_RANK`, of float32, int32 or bool, all of them fitting in memory; each
        input's block and receptive field at most `speechkit.checks.MAX_CONTEXT_S`)."""
        field = "model_facts"
        try:
            _require_keys(value, ("streaming_spec", "states"), field)
            spec = value["streaming_spec"]
            _require_keys(spec, ("inputs", "output_latency"), f"{field}.streaming_spec")
            inputs = _named_dict(spec["inputs"], f"{field}.streaming_spec.inputs")
            streaming_spec = streaming.StreamingSpec(
                {
                    name: _input_spec(entry, f"{field}.streaming_spec.inputs.{name}")
                    for name, entry in inputs.items()
                },
                checks.require_int(
                    f"{field}.streaming_spec.output_latency", spec["output_latency"], at_least=0
                ),
            )
            states = {
                name: _state_arrays(leaves, f"{field}.states.{name}")
                for name, leaves in _named_dict(value["states"], f"{field}.states").items()
            }
        except (TypeError, ValueError, OverflowError) as err:
            raise bundle_lib.BundleError(f"{where}: {err}") from None
        return cls(streaming_spec, states)

    def require(self, inputs: Mapping[str, tuple[float, int]], latency: int, states, where) -> None:
        """A `BundleError` unless the spec's inputs are `inputs` ({name: (hop_s, block)}),
        its output latency `latency` and the states are named `states`: what the task's
        model config makes (a step fed blocks of another size would fail as it runs, and a
        stream is flushed for the latency's frames)."""
        if self.spec.output_latency != latency:
            raise bundle_lib.BundleError(
                f"{where}: model_facts.streaming_spec.output_latency: "
                f"{self.spec.output_latency}; the model config makes {latency} (an edited "
                f"{MANIFEST})"
            )
        for part, have, want in (
            ("streaming_spec.inputs", self.spec.inputs, inputs),
            ("states", self.states, states),
        ):
            if sorted(have) != sorted(want):
                raise bundle_lib.BundleError(
                    f"{where}: model_facts.{part}: {sorted(have)}; the model config makes "
                    f"{sorted(want)} (an edited {MANIFEST})"
                )
        for name, (hop_s, block) in inputs.items():
            spec = self.spec.inputs[name]
            if spec.block != block or not math.isclose(spec.hop_s, hop_s, rel_tol=1e-9):
                raise bundle_lib.BundleError(
                    f"{where}: model_facts.streaming_spec.inputs.{name}: block {spec.block} "
                    f"of {spec.hop_s * 1000:g} ms frames; the model config makes {block} of "
                    f"{hop_s * 1000:g} ms (an edited {MANIFEST})"
                )


def model_facts(spec: streaming.StreamingSpec, initial_states: Mapping) -> ModelFacts:
    """The `ModelFacts` of a model with streaming spec `spec` and, for each stateful
    module, `initial_states[name]`: batch_size -> its state pytree (evaluated abstractly at
    batches 1 and 2: the sizes that differ are the batch's, "b")."""
    states = {}
    for name, initial_state in initial_states.items():
        one = jax.tree_util.tree_leaves(jax.eval_shape(lambda f=initial_state: f(1)))
        two = jax.tree_util.tree_leaves(jax.eval_shape(lambda f=initial_state: f(2)))
        states[name] = tuple(
            (_batch_marked(of_one.shape, of_two.shape), np.dtype(of_one.dtype).name)
            for of_one, of_two in zip(one, two, strict=True)
        )
    return ModelFacts(spec, states)


def _batch_marked(of_one: tuple, of_two: tuple) -> tuple:
    """An array's shape with "b" at the sizes that differ between batches of 1 and 2."""
    return tuple("b" if one != two else int(one) for one, two in zip(of_one, of_two, strict=True))


_STATE_DTYPES = ("float32", "int32", "bool")


def _input_spec(entry, where: str) -> streaming.InputSpec:
    """An input's `streaming.InputSpec`, its block and receptive field bounded."""
    spec = from_dict(streaming.InputSpec, entry, where)
    checks.require_context(f"{where}.block", spec.block, spec.hop_s, "an output frame")
    checks.require_context(
        f"{where}.receptive_field", spec.receptive_field, spec.hop_s, "the receptive field"
    )
    return spec


def _require_keys(value, keys: Sequence[str], where: str) -> None:
    if not isinstance(value, dict) or sorted(value) != sorted(keys):
        raise ValueError(f"{where}: expected an object of {', '.join(keys)}, got {short(value)}")


def _named_dict(value, where: str) -> dict:
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{where}: expected a non-empty object, got {short(value)}")
    for name in value:
        if not NAME.fullmatch(name):
            raise ValueError(f"{where}: {short(name)}: expected letters, digits and _ only")
    return value


def _state_arrays(leaves, where: str) -> tuple[tuple[tuple, str], ...]:
    """A state's list of {"shape", "dtype"} as ((shape, dtype), ...), checked."""
    if not isinstance(leaves, list) or len(leaves) > MAX_STATE_ARRAYS:
        raise ValueError(
            f"{where}: expected a list of at most {MAX_STATE_ARRAYS} arrays, got {short(leaves)}"
        )
    arrays, nbytes = [], 0
    for index, leaf in enumerate(leaves):
        at = f"{where}[{index}]"
        _require_keys(leaf, ("shape", "dtype"), at)
        shape, dtype = leaf["shape"], leaf["dtype"]
        if dtype not in _STATE_DTYPES:
            raise ValueError(f"{at}.dtype: expected one of {_STATE_DTYPES}, got {short(dtype)}")
        if not isinstance(shape, list) or len(shape) > MAX_STATE_RANK:
            raise ValueError(
                f"{at}.shape: expected a list of at most {MAX_STATE_RANK} sizes, got {short(shape)}"
            )
        sizes = tuple(
            size if size == "b" else checks.require_int(f"{at}.shape", size, at_least=0)
            for size in shape
        )
        nbytes += np.dtype(dtype).itemsize * math.prod(s for s in sizes if s != "b")
        arrays.append((sizes, dtype))
    checks.require_memory(where, nbytes, "one stream's state")
    return tuple(arrays)


def module_signatures(
    config, input_specs: Callable, output_specs: Callable, block_outputs: int, facts: ModelFacts
) -> dict[str, Signature]:
    """{"forward", "step"}: the `Signature`s of a task's export of a model with config
    `config` (`speechkit.streaming`'s protocol) and steps of `block_outputs` output frames.
    `input_specs` and `output_specs` are the task's (config, output frames, batch) -> its
    arguments and its results (`jax.ShapeDtypeStruct` pytrees; sizes may be symbolic);
    the forward takes any number `t` of output frames, and the step's state is `facts`'
    "step"."""
    batch, frames = jax_export.symbolic_shape("b, t")
    return {
        "forward": Signature(
            input_specs(config, frames, batch), output_specs(config, frames, batch)
        ),
        "step": Signature(
            input_specs(config, block_outputs, batch),
            output_specs(config, block_outputs, batch),
            facts.state("step", 1),
        ),
    }


def manifest(info: bundle_lib.Bundle, block_outputs: int, facts: ModelFacts) -> dict:
    """The export.json payload of a bundle's export (see the module docstring), without
    the modules and the checksums (`speechkit.export.write_folder` adds them);
    `block_outputs`: output frames per step of the exported step; `facts`: its model's
    (`model_facts`)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "task": info.task,
        "model_config": bundle_lib.to_dict(info.model_config),
        "features": bundle_lib.to_dict(info.features),
        "labels": list(info.labels),
        "decoding": bundle_lib.to_dict(info.decoding),
        "corpus": info.corpus,
        "bundle": Path(info.path).name,  # not its path: the exporting machine's
        "block_outputs": block_outputs,
        "model_facts": facts.to_dict(),
    }


def fields_sha256(fields: Mapping) -> dict[str, str]:
    """{name: the sha256 of its value as canonical JSON (sorted keys, no spaces, ASCII)}
    of export.json's fields, `fields_sha256` itself left out."""
    return {
        name: hashlib.sha256(
            json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")
        ).hexdigest()
        for name, value in fields.items()
        if name != "fields_sha256"
    }


def is_folder(path: str | os.PathLike) -> bool:
    """Whether `path` is an export folder (holds export.json)."""
    return (Path(path) / MANIFEST).is_file()


def short(value, limit: int = 80) -> str:
    """`repr(value)` for an error message, cut after `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."
