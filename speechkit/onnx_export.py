"""ONNX modules of an export folder: lowered from jax (`speechkit.onnx_lower`), checked
when read, run by onnxruntime.

    signature = onnx_export.Signature({"block": spec, "mask": spec, "state": specs},
                                      {"heads": ..., "out_mask": ..., "new_state": ...})
    model = onnx_export.lower_module(step, signature)        # onnx.ModelProto
    module = onnx_export.read(data, "step.onnx", signature)  # checked, then a session
    outputs = module.call(block=block, mask=mask, state=module.initial_state(1))

An ONNX file from someone else runs no code of theirs and asks for bounded memory:
`check_model` refuses a file that could do otherwise before a session exists, and every
session allocates from one capped arena. The checks: docs/usage.md, "Export"; the
signature, the state and the size bounds: docs/speechkit.md, "onnx_export".
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import os
import re
from collections.abc import Callable, Mapping

import jax
import numpy as np
import onnx
from onnx import shape_inference

from speechkit import bundle as bundle_lib
from speechkit import files, frontend
from speechkit.onnx_lower import OPSET, leaf_names, lower

SUFFIX = ".onnx"
ALLOWED_OPS = frozenset(
    {
        *("Abs", "Add", "And", "ArgMax", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "Cast"),
        *(
            "Ceil",
            "Concat",
            "Conv",
            "CumSum",
            "DFT",
            "Div",
            "Einsum",
            "Equal",
            "Erf",
            "Exp",
            "Expand",
        ),
        *("Floor", "Gather", "Greater", "GreaterOrEqual", "Identity", "Less", "LessOrEqual"),
        *("Log", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Pad", "Pow", "Range"),
        "Reciprocal",
        *("ReduceL2", "ReduceMax", "ReduceMin", "ReduceSum", "Reshape", "Scan", "Shape"),
        *("Sigmoid", "Sign", "Slice", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Transpose"),
        *("Unsqueeze", "Where"),
    }
)
"""The operators `speechkit.onnx_lower` emits; a module holding any other is refused."""
MAX_ELEMENTS = 1 << 27
"""The most elements (512 MiB of float32) a tensor of a module may hold at the
signature's sizes, where shape inference finds its size."""
MAX_BYTES = 1 << 30
"""The memory onnxruntime may allocate for tensors, all sessions of the process together
(an arena, `Module`): an allocation past it fails the call with an error."""
MAX_FILE_BYTES = 1 << 25
"""The largest ONNX file read (32 MiB; the default AF-KWS modules are about 3 MB), as
`speechkit.export_read.MAX_FILE_BYTES`: a file is copied a few times while it is checked
(a 60 MB module took 400 MB to read), so that a module at the cap keeps a process
under 1 GB. An export folder's is checked before the file is read."""
REFERENCE_SIZES = {"b": 1, "t": 1500}
"""The symbolic sizes `check_model` bounds memory at: one stream, a minute of 40 ms
output frames."""
MAX_SCAN_TRIPS = 1 << 16
"""The most times the Scans of a module may run their bodies, all of them together
(nested ones multiplied), at the signature's sizes (symbolic ones at
`REFERENCE_SIZES`). The project's Scan (the running mean of the "cmn" and "pcen"
normalisers) runs once per input frame: 6000 for a forward over a minute, at most 6000
for a step (a block is at most a minute); as `speechkit.stablehlo_bounds.MAX_LOOP_TRIPS`."""
MAX_SCAN_DEPTH = 2
"""The deepest a Scan may sit inside other Scans' bodies (1: not inside one; the
project's lowering nests none)."""


@dataclasses.dataclass(frozen=True)
class Signature:
    """A module's named arguments and results, in order: pytrees of
    `jax.ShapeDtypeStruct` (a state as a list of arrays)."""

    arguments: Mapping[str, object]
    results: Mapping[str, object]

    def inputs(self) -> dict[str, str]:
        """{graph input name: "dtype[sizes]"}."""
        return _described(self.arguments)

    def outputs(self) -> dict[str, str]:
        """{graph output name: "dtype[sizes]"}."""
        return _described(self.results)


def _described(trees: Mapping[str, object]) -> dict[str, str]:
    described = {}
    for name, tree in trees.items():
        for leaf_name, leaf in zip(
            leaf_names(name, tree), jax.tree_util.tree_leaves(tree), strict=True
        ):
            described[leaf_name] = describe(leaf.dtype, leaf.shape)
    return described


def describe(dtype, shape) -> str:
    """dtype[sizes], symbolic sizes as jax writes them: float32[b,4*t,64]."""
    return f"{np.dtype(dtype).name}[{','.join(str(size) for size in shape)}]"


@functools.cache
def sizes() -> tuple:
    """(b, t): the symbolic batch and output frames every signature's sizes are made of
    (one scope: sizes from separate `jax.export.symbolic_shape` calls do not mix)."""
    return tuple(jax.export.symbolic_shape("b, t"))


def lower_module(fn: Callable, signature: Signature, name: str) -> onnx.ModelProto:
    """`fn(**arguments) -> tuple of results` lowered to ONNX with `signature`'s names,
    checked to have exactly its inputs and outputs."""
    model = lower(fn, signature.arguments, tuple(signature.results), name)
    check_signature(model, signature, name)
    return model


def write(path: str | os.PathLike, model: onnx.ModelProto) -> str:
    """The serialized model, written atomically -> the sha256 of its bytes."""
    data = model.SerializeToString()
    with files.atomic_open(path, "wb") as out:
        out.write(data)
    return hashlib.sha256(data).hexdigest()


def frontend_signature(config: frontend.FeatureConfig, frames: int) -> Signature:
    """The front end's module: `frontend.log_mel` of the pieces `FeatureStream(config,
    frames)` computes (audio float32 [b, context + frames * hop], lengths int32 [b]) ->
    features float32 [b, samples // hop, num_mels] and their mask."""
    batch, _ = sizes()
    stream = frontend.FeatureStream(config, frames)
    samples = stream.context + stream.chunk
    out = samples // config.hop_samples
    return Signature(
        {
            "audio": jax.ShapeDtypeStruct((batch, samples), np.float32),
            "lengths": jax.ShapeDtypeStruct((batch,), np.int32),
        },
        {
            "features": jax.ShapeDtypeStruct((batch, out, config.num_mels), np.float32),
            "mask": jax.ShapeDtypeStruct((batch, out), np.bool_),
        },
    )


def lower_frontend(config: frontend.FeatureConfig, frames: int) -> onnx.ModelProto:
    """The front end's module (`frontend_signature`) as ONNX."""

    def log_mel(audio, lengths):
        return frontend.log_mel(audio, lengths, config)

    return lower_module(log_mel, frontend_signature(config, frames), "frontend")


def feature_stream(config: frontend.FeatureConfig, frames: int, module: Module):
    """A `frontend.FeatureStream` whose log-mel runs as the front end's ONNX `module`."""

    def log_mel(audio, lengths):
        return module.call(audio=audio, lengths=lengths)["features"]

    return frontend.FeatureStream(config, frames, log_mel)


# ---------------------------------------------------------------------------- checks


def parse(data: bytes, where) -> onnx.ModelProto:
    """The model in `data`, or a `BundleError` naming `where` when it is not ONNX."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as err:  # untrusted bytes: protobuf's DecodeError and kin
        raise bundle_lib.BundleError(
            f"{where}: not an ONNX model ({type(err).__name__}: {err})"
        ) from None
    if not model.HasField("graph"):
        raise bundle_lib.BundleError(f"{where}: not an ONNX model (no graph)")
    return model


def check_model(model: onnx.ModelProto, signature: Signature, where) -> None:
    """Refuses (a `BundleError` naming `where`) what the module docstring lists."""
    if model.functions:
        raise bundle_lib.BundleError(f"{where}: holds local functions; refused")
    if len(model.training_info):
        raise bundle_lib.BundleError(f"{where}: holds training information; refused")
    opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    if opsets != {"ai.onnx": OPSET}:
        raise bundle_lib.BundleError(
            f"{where}: opset_import {opsets}; expected ONNX's own operators at opset {OPSET}"
        )
    for graph in _graphs(model.graph):
        for tensor in [*graph.initializer, *_constant_tensors(graph)]:
            if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.external_data:
                raise bundle_lib.BundleError(
                    f"{where}: tensor {tensor.name!r} is stored outside the file (external "
                    "data); refused"
                )
            elements = math.prod(tensor.dims)
            if elements > MAX_ELEMENTS:
                raise bundle_lib.BundleError(
                    f"{where}: tensor {tensor.name!r} holds {elements} elements; refused (at "
                    f"most {MAX_ELEMENTS})"
                )
        if graph.sparse_initializer:
            raise bundle_lib.BundleError(f"{where}: sparse initializers; refused")
        for node in graph.node:
            if node.domain not in ("", "ai.onnx") or node.op_type not in ALLOWED_OPS:
                raise bundle_lib.BundleError(
                    f"{where}: operator {node.domain + '.' if node.domain else ''}"
                    f"{node.op_type} (node {node.name or node.output[:1]}): refused, not one "
                    "this project's lowering emits (speechkit.onnx_export.ALLOWED_OPS)"
                )
    check_signature(model, signature, where)
    _check_sizes(model, where)


def _graphs(graph: onnx.GraphProto):
    """The graph and every subgraph in its nodes' attributes (a Scan's body)."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                yield from _graphs(sub)


def _constant_tensors(graph: onnx.GraphProto):
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors


def check_signature(model: onnx.ModelProto, signature: Signature, where) -> None:
    """The graph's inputs and outputs are the signature's, by name, dtype and sizes."""
    sides = (
        ("inputs", model.graph.input, signature.inputs()),
        ("outputs", model.graph.output, signature.outputs()),
    )
    for kind, values, expected in sides:
        found = {value.name: _graph_describe(value) for value in values}
        if list(found) != list(expected):
            raise bundle_lib.BundleError(
                f"{where}: its {kind} are {_short(list(found))}; the export's fields make "
                f"{_short(list(expected))} (a module of another model, or an edited export.json)"
            )
        for name, description in found.items():
            if description != expected[name]:
                raise bundle_lib.BundleError(
                    f"{where}: {kind[:-1]} {name} is {description}; the export's fields make "
                    f"{expected[name]}"
                )


def _graph_describe(value: onnx.ValueInfoProto) -> str:
    tensor = value.type.tensor_type
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
    except Exception:  # an element type numpy has no name for
        return f"type {tensor.elem_type}"
    sizes = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in tensor.shape.dim]
    return describe(dtype, sizes)


def _short(value, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def _check_sizes(model: onnx.ModelProto, where) -> None:
    """No tensor that ONNX's shape inference (with data propagation) sizes, the symbolic
    sizes of the inputs set to `REFERENCE_SIZES`, holds more than `MAX_ELEMENTS`
    elements, in the graph or a Scan's body. Sizes it cannot find (a slice at a computed
    start) are bounded when the module runs, in the arena of `MAX_BYTES` (`Module`),
    except a tensor computed from constants alone, which onnxruntime computes while it
    creates the session: such a tensor's size must be found."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dim.dim_value = reference_size(dim.dim_param, where)
    try:
        onnx.checker.check_model(fixed)
        inferred = shape_inference.infer_shapes(fixed, strict_mode=True, data_prop=True)
    except Exception as err:  # a malformed graph, inconsistent shapes, unknown types
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise bundle_lib.BundleError(
            f"{where}: not a valid ONNX graph ({type(err).__name__}: {first[:200]})"
        ) from None
    trips = _scan_trips(inferred.graph, {}, 1, where)
    if trips > MAX_SCAN_TRIPS:
        raise bundle_lib.BundleError(
            f"{where}: its Scans run their bodies {trips} times at {REFERENCE_SIZES}; refused "
            f"(at most {MAX_SCAN_TRIPS}, speechkit.onnx_export.MAX_SCAN_TRIPS)"
        )
    constants: set[str] = set()
    for graph in _graphs(inferred.graph):
        sizes = {value.name: _elements(value) for value in [*graph.value_info, *graph.output]}
        for name, elements in sizes.items():
            if elements is not None and elements > MAX_ELEMENTS:
                raise bundle_lib.BundleError(
                    f"{where}: tensor {name!r} holds {elements} elements at "
                    f"{REFERENCE_SIZES}; refused (at most {MAX_ELEMENTS})"
                )
        constants |= {tensor.name for tensor in graph.initializer}
        for node in graph.node:  # in order: a node's inputs come before it
            if node.input and all(name in constants for name in node.input if name):
                for name in node.output:
                    if sizes.get(name) is None:
                        raise bundle_lib.BundleError(
                            f"{where}: tensor {name!r} ({node.op_type} of constants alone) has "
                            "a size shape inference cannot find; refused (onnxruntime would "
                            "compute it while loading, outside the memory cap)"
                        )
                    constants.add(name)


def _scan_trips(graph: onnx.GraphProto, outer: Mapping, depth: int, where) -> int:
    """How many times the Scans in `graph` (shapes inferred; `outer`: {name: value info}
    of the graphs around it, which a body may read) run their bodies, nested ones
    multiplied. A Scan deeper than `MAX_SCAN_DEPTH` (`depth`: the graph's, 1 at the
    top) or one whose trip count shape inference cannot find is refused."""
    values = {**outer, **{v.name: v for v in [*graph.input, *graph.value_info, *graph.output]}}
    total = 0
    for node in graph.node:
        bodies = [a.g for a in node.attribute if a.HasField("g")]
        bodies += [g for a in node.attribute for g in a.graphs]
        if node.op_type != "Scan":
            total += sum(_scan_trips(body, values, depth, where) for body in bodies)
            continue
        if depth > MAX_SCAN_DEPTH:
            raise bundle_lib.BundleError(
                f"{where}: Scan {node.name or node.output[:1]} sits {depth} Scans deep; "
                f"refused (at most {MAX_SCAN_DEPTH}, speechkit.onnx_export.MAX_SCAN_DEPTH)"
            )
        trips = _scan_trip_count(node, values, where)
        inner = sum(_scan_trips(body, values, depth + 1, where) for body in bodies)
        total += trips * (1 + inner)
    return total


def _scan_trip_count(node: onnx.NodeProto, values: Mapping, where) -> int:
    """How many times a Scan runs its body: its scanned inputs' size along their scan
    axes, which shape inference must have found."""
    attributes = {a.name: a for a in node.attribute}
    scanned = attributes["num_scan_inputs"].i if "num_scan_inputs" in attributes else 0
    axes = list(attributes["scan_input_axes"].ints) if "scan_input_axes" in attributes else []
    names = list(node.input[len(node.input) - scanned :]) if scanned > 0 else []
    sizes = set()
    for index, name in enumerate(names):
        dims = _known_dims(values.get(name))
        axis = axes[index] if index < len(axes) else 0
        if dims is None or not -len(dims) <= axis < len(dims):
            sizes.add(None)
        else:
            sizes.add(dims[axis])
    if not sizes or None in sizes:
        raise bundle_lib.BundleError(
            f"{where}: Scan {node.name or node.output[:1]}: how many times it runs (its "
            f"scanned inputs' size) cannot be found at {REFERENCE_SIZES}; refused"
        )
    return max(sizes)


def _known_dims(value: onnx.ValueInfoProto | None) -> list[int] | None:
    """A value's sizes when shape inference found them all, else None."""
    if value is None or not value.type.tensor_type.HasField("shape"):
        return None
    dims = value.type.tensor_type.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        return None
    return [d.dim_value for d in dims]


def _elements(value: onnx.ValueInfoProto) -> int | None:
    """The element count of a value whose sizes are all known, else None."""
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = tensor.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        return None
    return int(np.prod([d.dim_value for d in dims], dtype=np.float64))


_TOKEN = re.compile(r"\s*(\d{1,9}|[a-z]\w{0,7}|[-+*])")


def reference_size(text: str, where) -> int:
    """A symbolic size (`4*t + 8`: integers and names joined by +, - and *) at
    `REFERENCE_SIZES`, parsed here (never evaluated as code)."""
    refused = f"{where}: input size {text[:64]!r}"
    tokens, position = [], 0
    while position < len(text) and len(tokens) < 64:
        match = _TOKEN.match(text, position)
        if not match:
            break
        tokens.append(match.group(1))
        position = match.end()
    operands, operators = tokens[::2], tokens[1::2]
    if position != len(text) or len(operands) != len(operators) + 1:
        raise bundle_lib.BundleError(f"{refused}: not a size of this project")
    values = []
    for operand in operands:
        if not operand.isdigit() and operand not in REFERENCE_SIZES:
            raise bundle_lib.BundleError(
                f"{refused}: {operand!r} is not a number or one of {sorted(REFERENCE_SIZES)}"
            )
        values.append(int(operand) if operand.isdigit() else REFERENCE_SIZES[operand])
    total, sign, product = 0, 1, values[0]
    for operator, value in zip(operators, values[1:], strict=True):
        if operator == "*":
            product *= value
        else:
            total, sign, product = total + sign * product, 1 if operator == "+" else -1, value
    total += sign * product
    if not 1 <= total <= MAX_ELEMENTS:
        raise bundle_lib.BundleError(
            f"{refused}: {total} at {REFERENCE_SIZES}; expected 1 to {MAX_ELEMENTS}"
        )
    return total


_reference_size = reference_size  # its name before speechkit.export used it too


# ---------------------------------------------------------------------------- running


class Module:
    """A checked ONNX model in an onnxruntime session on the CPU."""

    def __init__(
        self, model: onnx.ModelProto, signature: Signature, threads: int = 1, where="module"
    ):
        import onnxruntime

        _register_arena()
        options = onnxruntime.SessionOptions()
        options.add_session_config_entry("session.use_env_allocators", "1")
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: not the shape-merge warnings
        self.signature, self.where = signature, where
        self.session = onnxruntime.InferenceSession(
            model.SerializeToString(),
            options,
            providers=["CPUExecutionProvider"],
        )

    def call(self, **arguments) -> dict:
        """Named arguments (pytrees as the signature's) -> {result name: pytree}."""
        feed = {}
        for name, tree in arguments.items():
            leaves = jax.tree_util.tree_leaves(tree)
            for leaf_name, leaf in zip(leaf_names(name, tree), leaves, strict=True):
                feed[leaf_name] = np.asarray(leaf)
        try:
            values = self.session.run(None, feed)
        except Exception as err:  # onnxruntime's Fail, e.g. past the arena's MAX_BYTES
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise bundle_lib.BundleError(
                f"{self.where}: onnxruntime failed ({type(err).__name__}: {first[:300]})"
            ) from None
        results, start = {}, 0
        for name, tree in self.signature.results.items():
            leaves, treedef = jax.tree_util.tree_flatten(tree)
            results[name] = jax.tree_util.tree_unflatten(
                treedef, values[start : start + len(leaves)]
            )
            start += len(leaves)
        return results

    def initial_state(self, batch_size: int, name: str = "state") -> list[np.ndarray]:
        """Zeros of the state argument `name`, its symbolic batch set to `batch_size`."""
        return [
            np.zeros([batch_size if not isinstance(d, int) else d for d in s.shape], s.dtype)
            for s in self.signature.arguments[name]
        ]


@functools.cache
def _register_arena() -> None:
    """The process's CPU arena for onnxruntime, capped at `MAX_BYTES` (once)."""
    import onnxruntime

    info = onnxruntime.OrtMemoryInfo(
        "Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxruntime.OrtMemType.DEFAULT
    )
    onnxruntime.create_and_register_allocator(info, onnxruntime.OrtArenaCfg(MAX_BYTES, -1, -1, -1))


def read(data: bytes, where, signature: Signature, threads: int = 1) -> Module:
    """A module from the bytes of an ONNX file, checked (`check_model`) before onnxruntime
    sees it."""
    if len(data) > MAX_FILE_BYTES:
        raise bundle_lib.BundleError(
            f"{where}: {len(data)} bytes; refused (an ONNX module of at most {MAX_FILE_BYTES})"
        )
    model = parse(data, where)
    check_model(model, signature, where)
    return Module(model, signature, threads, where)
