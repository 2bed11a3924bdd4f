"""speechkit.onnx_export: a lowered module round-trips through bytes and runs; ONNX files
from someone else that could run code, read files or take unbounded memory are refused
before a session exists (or, for a size known only when running, fail the call with an
error); every operator the lowering emits is on the allowlist."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from speechkit import onnx_export, onnx_lower
from speechkit.bundle import BundleError

B, T = onnx_export.sizes()
SIGNATURE = onnx_export.Signature(
    {"x": jax.ShapeDtypeStruct((B, 4 * T, 3), jnp.float32)},
    {"y": jax.ShapeDtypeStruct((B, T, 3), jnp.float32)},
)


def _model() -> onnx.ModelProto:
    def pool(x):
        return (x.reshape(x.shape[0], -1, 4, 3).max(axis=2) * 2.0,)

    return onnx_export.lower_module(pool, SIGNATURE, "pool")


def _read(model: onnx.ModelProto, signature=SIGNATURE):
    return onnx_export.read(model.SerializeToString(), "m.onnx", signature)


def test_a_lowered_module_round_trips_and_runs():
    module = _read(_model())
    x = np.random.default_rng(0).normal(size=(2, 12, 3)).astype(np.float32)
    found = module.call(x=x)["y"]
    np.testing.assert_allclose(found, 2 * x.reshape(2, 3, 4, 3).max(axis=2), rtol=1e-6)


def test_every_operator_the_lowering_emits_is_allowed():
    source = Path(onnx_lower.__file__).read_text()
    emitted = set(re.findall(r'"([A-Z][A-Za-z0-9]+)"', source)) - {"ONNX"}  # its docstring
    assert {"Conv", "Scan", "DFT", "Einsum"} <= emitted
    assert emitted <= onnx_export.ALLOWED_OPS, emitted - onnx_export.ALLOWED_OPS


def _with_node(model, node, initializers=()) -> onnx.ModelProto:
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    changed.graph.node.insert(0, node)
    changed.graph.initializer.extend(initializers)
    return changed


@pytest.mark.parametrize(
    "node, message",
    [
        (helper.make_node("Relu", ["x"], ["r"], domain="com.evil"), "operator com.evil.Relu"),
        (helper.make_node("ConstantOfShape", ["x"], ["r"]), "operator ConstantOfShape"),
        (helper.make_node("If", ["x"], ["r"]), "operator If"),
    ],
)
def test_operators_off_the_allowlist_are_refused(node, message):
    with pytest.raises(BundleError, match=rf"m.onnx: {re.escape(message)}.*refused"):
        _read(_with_node(_model(), node))


def test_external_data_functions_and_other_opsets_are_refused():
    outside = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    outside.data_location = TensorProto.EXTERNAL
    outside.external_data.add(key="location", value="../../etc/passwd")
    outside.ClearField("raw_data")
    model = _model()
    model.graph.initializer.append(outside)
    with pytest.raises(BundleError, match="tensor 'w' is stored outside the file"):
        _read(model)
    model = _model()
    model.functions.add(name="f", domain="local")
    with pytest.raises(BundleError, match="local functions; refused"):
        _read(model)
    model = _model()
    model.opset_import[0].version = 21
    with pytest.raises(BundleError, match="expected ONNX's own operators at opset 18"):
        _read(model)
    with pytest.raises(BundleError, match="m.onnx: not an ONNX model"):
        onnx_export.read(b"\x08\x07garbage\xff\xff", "m.onnx", SIGNATURE)


def test_a_module_of_another_signature_is_refused():
    other = onnx_export.Signature(
        {"x": jax.ShapeDtypeStruct((B, 8 * T, 3), jnp.float32)}, SIGNATURE.results
    )
    with pytest.raises(BundleError, match=r"input x is float32\[b,4\*t,3\].*float32\[b,8\*t,3\]"):
        _read(_model(), other)
    renamed = onnx_export.Signature({"z": SIGNATURE.arguments["x"]}, SIGNATURE.results)
    with pytest.raises(BundleError, match=r"its inputs are \['x'\]; .* \['z'\]"):
        _read(_model(), renamed)


def test_sizes_shape_inference_finds_too_large_are_refused():
    shape = numpy_helper.from_array(np.array([1 << 40], np.int64), "huge_shape")
    one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    model = _model()
    model.graph.initializer.extend([shape, one])
    model.graph.node.append(helper.make_node("Expand", ["one", "huge_shape"], ["huge"]))
    with pytest.raises(BundleError, match="'huge' holds 1099511627776 elements.*refused"):
        _read(model)


def test_a_size_known_only_when_running_is_bounded_by_the_arena():
    count = helper.make_tensor_value_info("n", TensorProto.INT64, [1])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    nodes = [
        helper.make_node("Expand", ["x", "n"], ["big"]),
        helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0),
    ]
    graph = helper.make_graph(nodes, "g", [x, count], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", onnx_lower.OPSET)])
    model.ir_version = 9
    signature = onnx_export.Signature(
        {
            "x": jax.ShapeDtypeStruct((1,), jnp.float32),
            "n": jax.ShapeDtypeStruct((1,), jnp.int64),
        },
        {"y": jax.ShapeDtypeStruct((), jnp.float32)},
    )
    module = _read(model, signature)
    ones = np.ones(1, np.float32)
    assert module.call(x=ones, n=np.array([1000]))["y"] == 1000
    with pytest.raises(BundleError, match="m.onnx: onnxruntime failed"):
        module.call(x=ones, n=np.array([onnx_export.MAX_BYTES]))  # 4 x MAX_BYTES bytes


@pytest.mark.parametrize(
    "text, message",
    [
        ("4*t + 8", None),
        ("t*t*t*t*t", "expected 1 to"),
        ("2**64", "not a size"),
        ("__import__('os')", "not a size"),
        ("x", "is not a number"),
    ],
)
def test_symbolic_input_sizes_are_parsed_not_evaluated(text, message):
    if message is None:
        assert onnx_export._reference_size(text, "m.onnx") == 4 * 1500 + 8
    else:
        with pytest.raises(BundleError, match=message):
            onnx_export._reference_size(text, "m.onnx")


def test_a_custom_operator_inside_a_scan_body_is_refused():
    def running_sum(x):
        return (
            jax.lax.cumsum(x, axis=1)
            + jax.lax.scan(lambda c, v: (c + v, c), x[:, 0], x.swapaxes(0, 1))[1].swapaxes(0, 1),
        )

    signature = onnx_export.Signature(
        {"x": jax.ShapeDtypeStruct((B, 4 * T, 3), jnp.float32)},
        {"y": jax.ShapeDtypeStruct((B, 4 * T, 3), jnp.float32)},
    )
    model = onnx_export.lower_module(running_sum, signature, "scan")
    _read(model, signature)  # as lowered: accepted
    scan = next(node for node in model.graph.node if node.op_type == "Scan")
    body = next(a for a in scan.attribute if a.name == "body").g
    body.node.insert(0, helper.make_node("Run", [body.input[0].name], ["r"], domain="evil"))
    with pytest.raises(BundleError, match="operator evil.Run"):
        _read(model, signature)


def test_a_tensor_of_constants_alone_must_have_a_known_size():
    """onnxruntime computes such a tensor while it loads the model, outside the memory
    cap: a Range up to the maximum of a constant (a size shape inference cannot find) is
    refused."""
    model = _model()
    model.graph.initializer.extend(
        numpy_helper.from_array(np.array(v, np.int64), n)
        for n, v in (("zero", 0), ("limits", [1 << 40]), ("step", 1))
    )
    model.graph.node.extend(
        [
            helper.make_node("ReduceMax", ["limits"], ["huge"], keepdims=0),
            helper.make_node("Range", ["zero", "huge", "step"], ["counted"]),
        ]
    )
    with pytest.raises(BundleError, match="'counted' .*constants alone.* cannot find"):
        _read(model)


def test_an_oversized_file_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(onnx_export, "MAX_FILE_BYTES", 100)
    with pytest.raises(BundleError, match=r"m.onnx: \d+ bytes; refused"):
        _read(_model())
