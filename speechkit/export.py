"""Streaming models as serialized StableHLO (`jax.export`): the parts every task's export
shares (`cskws_jax.export`, `multiqt_jax.export`).

    step = export.export_step(step_fn, (block, block_mask), initial_state_fn)
    export.write("step.stablehlo", step)        # bytes -> sha256; export.read(path) -> Exported
    state = export.initial_state(step, batch_size=1)
    outputs, out_mask, state = step.call(block, block_mask, state)
    export.write_folder(out_dir, {"forward": forward, "step": step}, manifest(info, 5, facts))
    info, block_outputs, modules, facts = export.read_folder(out_dir, task=..., ...)

`export_step` exports a protocol step (`speechkit.streaming`) whose LAST argument and
last output are the state: a pytree of sequence-layers state classes, which cannot be
serialized, so the exported module takes and returns it as a flat list of arrays. The
batch is symbolic (`b`, leading every input and state array); the other sizes are fixed.
The state before a stream's first block must be all zeros (checked when exporting), so
that `initial_state` rebuilds it from the exported module alone.

Loading a module runs no Python code from it: it is StableHLO, compiled by XLA. But a
module can name native code: a `stablehlo.custom_call` calls whatever the process has
registered under its target name (a Python callback's `xla_ffi_python_cpu_callback`
with a made-up index reads memory it should not), and jax checks the targets only when
exporting. So `read` (and `read_folder`) refuse, before anything runs, a module whose
StableHLO holds a custom call whose target is not in `ALLOWED_CUSTOM_CALLS` (what the
project's own exports contain: `shape_assertion`), or a form of one whose target cannot
be read, a host transfer (infeed, outfeed, send, recv), effects, disabled safety checks,
a vjp, more than one device or shardings (`check_module`): a `BundleError` naming the
file and the call.

A module is still a program: `check_module` also bounds its loops and arrays before
anything is compiled (`speechkit.stablehlo_bounds`).

An export folder (`write_folder`) holds one `<name>.stablehlo` per module, one
`<name>.onnx` per ONNX module (`speechkit.onnx_export`; `read_folder(..., backend="onnx")`
reads those instead, each checked by `onnx_export.check_model` after its sha256) and
export.json, written last, each file atomically: the format and its version, the task,
the labels, the front end, the decoding settings and the model config as in a bundle
(`speechkit.bundle`), the block size of the step, the bundle it came from (its folder's
name), the model facts (`ModelFacts`: the streaming spec and the shapes of each step's
state, computed from the model code when exporting, so that reading and running the
folder needs none: the light install), each module's file, the sha256 of its bytes and
its size in bytes, and the sha256 of each of these fields (`fields_sha256`: export.json
is not to be edited; export the bundle again). `read_folder` reads export.json with
`speechkit.files.load_json` (a regular file of at most `files.JSON_LIMIT` bytes),
rebuilds and checks it, each problem a `speechkit.bundle.BundleError` naming the file
and the field: unknown or missing fields; a module name other than letters, digits and
`_`, or a file that is not `<name>.stablehlo` in the folder (a symlink leaving it
included, and export.json's too); a module file that is not a regular file, or whose
size is not the recorded one or past the cap (`MAX_FILE_BYTES`, an ONNX module's
`onnx_export.MAX_FILE_BYTES`), checked before a byte of it is read; a module whose bytes
differ from their sha256 (checked before deserializing);
a module refused by `check_module`; model facts out of bounds or not what the model
config makes (`ModelFacts.from_dict`, `ModelFacts.require`); a module whose arguments and
results are not what the task's `Signature` built from the fields says (shapes, strides,
block size, the step's state); a field whose sha256 differs. Checksums and sizes catch
damage and edits, not a forger who recomputes them; what keeps a forged module from
running native code is the custom-call allowlist, and from exhausting the machine the
bounds and the caps. Folders written before the checksums (no `format_version`) are
refused with a message to export again; those of versions 2 and 3 (no model facts) are
read with the model code (the task's `facts_of`), which the light install refuses with
what to install; those before version 5 record no sizes, and their files are checked
against the caps alone. `main` is the command line of both tasks'
exports.

Serializing needs the `flatbuffers` package (an optional dependency of jax.export).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import stat
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export

from speechkit import bundle as bundle_lib
from speechkit import (
    checks,
    compilation,
    files,
    onnx_export,
    onnx_metadata,
    onnx_stream,
    stablehlo_bounds,
    streaming,
)
from speechkit.dataclass_json import from_dict
from speechkit.frontend import FeatureConfig

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
not recorded: its file is only checked against the cap (`MAX_FILE_BYTES`,
`speechkit.onnx_export.MAX_FILE_BYTES`)."""
SUFFIX = ".stablehlo"
BACKENDS = ("jax", "onnx")
"""What runs an export folder's modules: jax (its StableHLO, compiled by XLA) or
onnxruntime (its ONNX modules, `speechkit.onnx_export`)."""
ALLOWED_CUSTOM_CALLS = frozenset({"shape_assertion"})
"""The custom-call targets a module may hold: what the project's own exports contain.
Exporting both tasks' forward and step (the tests' tiny models and the default-size
ones, every MultiQT fusion and set of modalities, AF-KWS at precision "highest" and
"default") for cpu and cuda (AF-KWS also for tpu) gives only `shape_assertion`, jax's
check of the symbolic sizes, which shape refinement consumes before XLA compiles.
tests/speechkit/test_export_hostile.py exports the test models again and checks that
this is all they hold."""
HOST_OPS = ("infeed", "outfeed", "send", "recv")
"""StableHLO ops that move data to or from the host; no export of the project has one."""
MAX_FILE_BYTES = 1 << 25
"""Bytes: the largest StableHLO module file read (32 MiB, about 8 million float32
parameters; the default-size AF-KWS modules, 750,000 parameters baked in, are 3 MB).
Checked before the file is read: reading, checking and compiling a module takes about
18 times its size (`detect` peaked at 760 MB with a 30 MB step, at 210 MB with the
tests' 50 kB one), so that a module at the cap keeps a process under 1 GB."""
_NAME = re.compile(r"[A-Za-z0-9_]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FIELDS = (
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
_ADDED_IN = {"onnx_modules": 3, "model_facts": 4}
_ONNX_ADDED_IN = {onnx_stream.NAME: 6}  # ONNX modules a folder of an older version lacks
MAX_STATE_ARRAYS = 4096  # a step's state arrays; the project's models have a few dozen
MAX_STATE_RANK = 8
# A custom call as MLIR prints it: `stablehlo.custom_call @target(...)` (the target
# quoted when it is not a plain identifier), or in the generic form
# `"stablehlo.custom_call"(...) <{call_target_name = "target", ...}>`.
_CUSTOM_CALL = "custom_call"
_PRETTY_CALL = re.compile(r'custom_call\s+@(?:"((?:[^"\\]|\\.)*)"|([\w.$-]+))')
_GENERIC_CALL = re.compile(r'custom_call"')
_TARGET_ATTRIBUTE = re.compile(r'call_target_name\s*=\s*"((?:[^"\\]|\\.)*)"')
_HOST_OP = re.compile(r"\bstablehlo\.(" + "|".join(HOST_OPS) + r")\b")


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


def write(path: str | os.PathLike, exported: jax_export.Exported) -> str:
    """The serialized module (bytes), written atomically -> the sha256 of those bytes."""
    data = exported.serialize()
    with files.atomic_open(path, "wb") as out:
        out.write(data)
    return hashlib.sha256(data).hexdigest()


def read(path: str | os.PathLike) -> jax_export.Exported:
    """A module `write` wrote, refused (`BundleError` naming `path`) when it is not one
    (a regular file of at most `MAX_FILE_BYTES`, checked before reading) or
    `check_module` refuses it; nothing in it has run."""
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
    check_module(exported, where)
    return exported


def check_module(exported: jax_export.Exported, where) -> None:
    """Refuses (a `BundleError` naming `where` and what it found) a module that could do
    more than compute on its arguments: a custom call whose target is not in
    `ALLOWED_CUSTOM_CALLS` (native code called by name) or whose target cannot be read,
    a host transfer op (`HOST_OPS`), effects, disabled safety checks, a vjp (another
    module inside), more than one device, or shardings. It reads the module's StableHLO
    text (`Exported.mlir_module`); nothing is compiled or run."""
    try:
        text = exported.mlir_module()
    except Exception as err:  # an unreadable StableHLO artifact
        raise bundle_lib.BundleError(
            f"{where}: its StableHLO cannot be read ({type(err).__name__}: {err})"
        ) from None
    for target in custom_call_targets(text, where):
        if target not in ALLOWED_CUSTOM_CALLS:
            raise bundle_lib.BundleError(
                f"{where}: stablehlo.custom_call @{target}: refused, not an allowed call "
                f"target (allowed: {', '.join(sorted(ALLOWED_CUSTOM_CALLS))}); a custom call "
                "runs native code by name, so this module is not run"
            )
    host = _HOST_OP.search(text)
    if host:
        raise bundle_lib.BundleError(
            f"{where}: {host.group(0)}: refused (a host transfer; no export of this project "
            "has one)"
        )
    refused = {
        "ordered_effects": exported.ordered_effects,
        "unordered_effects": exported.unordered_effects,
        "disabled_safety_checks": exported.disabled_safety_checks,
        "in_shardings": [s for s in exported.in_shardings_hlo if s is not None],
        "out_shardings": [s for s in exported.out_shardings_hlo if s is not None],
    }
    for name, found in refused.items():
        if found:
            raise bundle_lib.BundleError(
                f"{where}: {name}: {list(found)}; refused (no export of this project has any)"
            )
    if exported.nr_devices != 1:
        raise bundle_lib.BundleError(
            f"{where}: nr_devices: {exported.nr_devices}; refused (exports run on one device)"
        )
    if exported.has_vjp():
        raise bundle_lib.BundleError(
            f"{where}: holds a vjp module; refused (exports have none; it would run unchecked)"
        )
    stablehlo_bounds.check_bounds(exported, text, where)


def custom_call_targets(text: str, where) -> list[str]:
    """The target of every custom call in a module's StableHLO text, in order (generic
    form ones after the pretty ones); a `BundleError` naming `where` when a mention of
    `custom_call` is not a call whose target can be read (so that no form of one slips
    through unread)."""
    pretty = [quoted or plain for quoted, plain in _PRETTY_CALL.findall(text)]
    generic = len(_GENERIC_CALL.findall(text))
    named = _TARGET_ATTRIBUTE.findall(text)
    rest = _TARGET_ATTRIBUTE.sub("", _GENERIC_CALL.sub("", _PRETTY_CALL.sub("", text)))
    if _CUSTOM_CALL in rest or len(named) < generic:
        raise bundle_lib.BundleError(
            f"{where}: a custom_call whose target cannot be read; refused (a custom call "
            "runs native code by name)"
        )
    return pretty + named


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
        raise ValueError(f"{where}: expected an object of {', '.join(keys)}, got {_short(value)}")


def _named_dict(value, where: str) -> dict:
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{where}: expected a non-empty object, got {_short(value)}")
    for name in value:
        if not _NAME.fullmatch(name):
            raise ValueError(f"{where}: {_short(name)}: expected letters, digits and _ only")
    return value


def _state_arrays(leaves, where: str) -> tuple[tuple[tuple, str], ...]:
    """A state's list of {"shape", "dtype"} as ((shape, dtype), ...), checked."""
    if not isinstance(leaves, list) or len(leaves) > MAX_STATE_ARRAYS:
        raise ValueError(
            f"{where}: expected a list of at most {MAX_STATE_ARRAYS} arrays, got {_short(leaves)}"
        )
    arrays, nbytes = [], 0
    for index, leaf in enumerate(leaves):
        at = f"{where}[{index}]"
        _require_keys(leaf, ("shape", "dtype"), at)
        shape, dtype = leaf["shape"], leaf["dtype"]
        if dtype not in _STATE_DTYPES:
            raise ValueError(f"{at}.dtype: expected one of {_STATE_DTYPES}, got {_short(dtype)}")
        if not isinstance(shape, list) or len(shape) > MAX_STATE_RANK:
            raise ValueError(
                f"{at}.shape: expected a list of at most {MAX_STATE_RANK} sizes, got "
                f"{_short(shape)}"
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


def manifest(info: bundle_lib.Bundle, block_outputs: int, facts: ModelFacts) -> dict:
    """The export.json payload of a bundle's export (see the module docstring), without
    the modules and the checksums (`write_folder` adds them); `block_outputs`: output
    frames per step of the exported step; `facts`: its model's (`model_facts`)."""
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
    if not _NAME.fullmatch(name):
        raise ValueError(f"modules: {name!r}: expected letters, digits and _ only")
    return name


def is_folder(path: str | os.PathLike) -> bool:
    """Whether `path` is an export folder (holds export.json)."""
    return (Path(path) / MANIFEST).is_file()


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
    `write_folder` wrote, every field checked (see the module docstring); a `BundleError`
    naming the file and the field for anything missing, unknown, of another task, edited
    or damaged.

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
    names = tuple(n for n in _FIELDS if version >= _ADDED_IN.get(n, 0))
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
            f"{where}: labels: expected a list of names, got {_short(labels)}"
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
            if version >= _ONNX_ADDED_IN.get(name, 0)
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
                f"{_short(value)}"
            )
        return value

    return field


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


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


_ENTRY_KEYS = ("file", "sha256", "bytes")
"""A module's entry in export.json; `bytes` from format version 5 (optional before)."""
_ENTRY_BYTES_SINCE = 5


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
    if not _NAME.fullmatch(name):
        raise bundle_lib.BundleError(
            f"{where}: {field}: {_short(name)}: not a module name (letters, digits and _; "
            f"its file is <name>{suffix} in the export folder)"
        )
    limit = _file_limit(suffix)
    size = _entry_size(entry, f"{where}: {field}.{name}", limit, version)
    file_name = f"{name}{suffix}"
    if entry["file"] != file_name:
        raise bundle_lib.BundleError(
            f"{where}: {field}.{name}.file: expected {file_name!r}, got {_short(entry['file'])} "
            f"(a module's file is <name>{suffix} in the export folder)"
        )
    digest = entry["sha256"]
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise bundle_lib.BundleError(
            f"{where}: {field}.{name}.sha256: expected 64 hex digits, got {_short(digest)}"
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
    keys = _ENTRY_KEYS if version >= _ENTRY_BYTES_SINCE else _ENTRY_KEYS[:2]
    if not isinstance(entry, dict) or sorted(entry) not in (sorted(keys), sorted(_ENTRY_KEYS)):
        shown = ", ".join(f'"{key}": ...' for key in keys)
        raise bundle_lib.BundleError(f"{where}: expected {{{shown}}}, got {_short(entry)}")
    if "bytes" not in entry:
        return None
    size = entry["bytes"]
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= limit:
        raise bundle_lib.BundleError(
            f"{where}.bytes: expected a size in bytes from 1 to {limit}, got {_short(size)} "
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


# ---------------------------------------------------------------------- command line


PLATFORMS = ("cpu", "cuda", "rocm", "tpu")  # what jax.export lowers for
MAX_BLOCK_OUTPUTS = 6000  # a minute of 10 ms outputs: longer is no longer a stream


def _platforms(text: str) -> list[str]:
    """argparse type of --platforms: known, distinct platform names."""
    names = text.split(",")
    unknown = [name for name in names if name not in PLATFORMS]
    if unknown or len(set(names)) != len(names) or not text:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected distinct names of {', '.join(PLATFORMS)}, comma-separated"
        )
    return names


def _block_outputs(text: str) -> int:
    """argparse type of --block-outputs: an integer in [1, MAX_BLOCK_OUTPUTS]."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_BLOCK_OUTPUTS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected an integer in [1, {MAX_BLOCK_OUTPUTS}]"
        )
    return value


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


def main(
    argv,
    *,
    prog: str,
    what: str,
    export_bundle: Callable[..., tuple[dict, dict, dict]],
    default_block_outputs: int = 5,
) -> int:
    """The command line `prog BUNDLE OUT_DIR [--block-outputs N] [--platforms cpu,cuda]`
    of a task's export: `export_bundle(bundle, block_outputs, platforms)` ->
    ({name: module}, export.json payload, {name: ONNX module}), written with
    `write_folder`. `what` names
    the bundle's model in the help. Returns the exit status (2: a bad bundle)."""
    parse = argparse.ArgumentParser(
        prog=prog,
        description=f"Export {what} bundle's offline forward and streaming step as serialized "
        f"StableHLO (forward{SUFFIX}, step{SUFFIX}) with {MANIFEST} (labels, front end, "
        "decoding, block size): a folder a streaming client runs without the bundle; the "
        "same modules and the front end as ONNX (onnxruntime: --backend onnx).",
        epilog=f"Example: {prog} outputs/reproduce/cskws/afkws/bundle exported/ "
        "(stj-export BUNDLE OUT_DIR picks the task). Exit status: 0 written; 2 a bad bundle "
        "or bad arguments.",
    )
    parse.add_argument("bundle", help="bundle folder")
    parse.add_argument("out_dir", help=f"folder for the modules and {MANIFEST}")
    parse.add_argument(
        "--block-outputs",
        type=_block_outputs,
        default=default_block_outputs,
        help=f"output frames per step (default {default_block_outputs})",
    )
    parse.add_argument(
        "--platforms",
        type=_platforms,
        default=None,
        help=f"comma-separated, of {', '.join(PLATFORMS)} (default: this machine's)",
    )
    args = parse.parse_args(argv)
    platforms = args.platforms
    if Path(args.out_dir).exists() and not Path(args.out_dir).is_dir():
        print(f"error: {args.out_dir}: exists and is not a folder", file=sys.stderr)
        return 2
    compilation.enable_cache()
    try:
        paths, (modules, payload, onnx_modules) = export_folder(
            export_bundle, args.bundle, args.out_dir, args.block_outputs, platforms
        )
    except ValueError as err:  # BundleError included
        print(f"error: {err}", file=sys.stderr)
        return 2
    except NotImplementedError as err:  # a primitive the ONNX lowering does not know
        print(f"error: ONNX export: {err}", file=sys.stderr)
        return 2
    for path in paths:
        if path.suffix == SUFFIX:
            exported = modules[path.stem]
            print(f"{path}: {len(exported.in_avals)} inputs -> {len(exported.out_avals)} outputs")
        elif path.suffix == onnx_export.SUFFIX:
            graph = onnx_modules[path.stem].graph
            print(f"{path}: {len(graph.input)} inputs -> {len(graph.output)} outputs (ONNX)")
        else:
            print(f"{path}: {payload['task']}, {len(payload['labels'])} labels")
    return 0
