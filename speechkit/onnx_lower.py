"""jax functions as ONNX graphs: a jaxpr, traced with `jax.make_jaxpr`, lowered primitive
by primitive to ONNX nodes (opset `OPSET`), its constants (a model's parameters) as
initializers.

    model = onnx_lower.lower(fn, {"features": spec, "mask": mask_spec}, ("heads", "out_mask"))
    onnx.save(model, "forward.onnx")   # onnxruntime runs it: speechkit.onnx_export

Sizes may be symbolic (`b`, `t`, `4*t`) and stay symbolic in the graph; inputs and
outputs are named by their path in the pytrees (`leaf_names`). A primitive without a
lowering is a `NotImplementedError` naming it. The contract of `lower`:
docs/speechkit.md, "onnx_lower"; how the lowering works and why not jax2onnx:
docs/models.md, "ONNX".
"""

from __future__ import annotations

import ast
import functools
import itertools
import operator
import re
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.extend.core as jex
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
CALLS = ("jit", "closed_call", "custom_jvp_call", "custom_vjp_call", "remat2")
"""Primitives whose body is inlined, by their names in the pinned jax: `jit` calls,
custom derivatives (only the primal runs), rematerialisation (`jax.checkpoint`)."""
_DIM = re.compile(r"(?:(\d+)\*)?([A-Za-z_]\w*)")


def leaf_names(name: str, tree) -> list[str]:
    """The graph names of a pytree's leaves: `name`, then each key of the path, `.`-joined
    (`state.0`, `inputs.audio`)."""
    paths = jax.tree_util.tree_flatten_with_path(tree)[0]
    names = [".".join([name, *(_key(k) for k in path)]) for path, _ in paths]
    if len(set(names)) < len(names):  # keys that print alike: number the leaves instead
        names = [f"{name}.{i}" for i in range(len(names))]
    return names


def _key(key) -> str:
    for attribute in ("key", "idx", "name"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def dim_text(size) -> str:
    """A size as a graph dimension: an int's digits, a symbolic size as jax writes it."""
    return str(size)


def value_info(name: str, aval) -> onnx.ValueInfoProto:
    """A graph input or output: its element type and sizes (symbolic ones by name)."""
    shape = [int(d) if isinstance(d, int) else dim_text(d) for d in aval.shape]
    return helper.make_tensor_value_info(name, _onnx_type(aval.dtype), shape)


def _onnx_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def lower(
    fn: Callable,
    arguments: Mapping[str, object],
    output_names: Sequence[str],
    name: str = "speechkit",
) -> onnx.ModelProto:
    """The ONNX model of `fn(**arguments)` (see the module docstring); checked by
    `onnx.checker` before it is returned."""
    arg_names = list(arguments)
    trees = [arguments[key] for key in arg_names]
    flat, in_tree = jax.tree_util.tree_flatten(trees)

    def flat_fn(*leaves):
        values = jax.tree_util.tree_unflatten(in_tree, list(leaves))
        outputs = fn(**dict(zip(arg_names, values, strict=True)))
        if not isinstance(outputs, tuple) or len(outputs) != len(output_names):
            raise ValueError(
                f"expected {len(output_names)} outputs ({output_names}), got "
                f"{type(outputs).__name__}"
            )
        return outputs

    closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*flat)
    inputs = [n for key, tree in zip(arg_names, trees, strict=True) for n in leaf_names(key, tree)]
    outputs = [
        n for key, tree in zip(output_names, out_shape, strict=True) for n in leaf_names(key, tree)
    ]
    if set(inputs) & set(outputs):
        raise ValueError(f"{name}: outputs named as inputs: {sorted(set(inputs) & set(outputs))}")
    graph = _Graph()
    graph.bind_inputs(closed.jaxpr.invars, inputs)
    graph.bind_consts(closed.jaxpr.constvars, closed.consts)
    results = graph.lower(closed.jaxpr)
    graph.finish(results, outputs, closed.jaxpr.outvars)
    model = helper.make_model(
        helper.make_graph(graph.nodes, name, graph.inputs, graph.outputs, graph.initializers),
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="speechkit.onnx_lower",
    )
    model.ir_version = 9  # what onnxruntime >= 1.16 reads
    onnx.checker.check_model(model)
    return model


class _Complex:
    """A complex tensor [..., n, 2] (real, imaginary) between `fft` and `abs`."""

    def __init__(self, name: str):
        self.name = name


class _Dim:
    """A size computed in the graph: an int64 [1] tensor, with the arithmetic of jax's
    symbolic sizes (`+ - * // %`, `//` rounded down), what `_Graph.dim_tensor` evaluates
    their written form with."""

    def __init__(self, graph: _Graph, name: str):
        self.graph, self.name = graph, name

    def _op(self, op: str, other, swap: bool = False) -> _Dim:
        a, b = self.name, self.graph.dim_tensor(other)
        return _Dim(self.graph, self.graph.node(op, [b, a] if swap else [a, b]))

    def __add__(self, other):
        return self._op("Add", other)

    __radd__ = __add__

    def __mul__(self, other):
        return self._op("Mul", other)

    __rmul__ = __mul__

    def __sub__(self, other):
        return self._op("Sub", other)

    def __rsub__(self, other):
        return self._op("Sub", other, swap=True)

    def __floordiv__(self, other):  # rounded down, as jax's sizes: (a - a mod b) / b
        remainder = self % other
        return _Dim(
            self.graph,
            self.graph.node("Div", [(self - remainder).name, self.graph.dim_tensor(other)]),
        )

    def __rfloordiv__(self, other):
        return _Dim(self.graph, self.graph.dim_tensor(other)) // self

    def __mod__(self, other):  # Mod with fmod=0: the divisor's sign, as Python's %
        return self._op("Mod", other)

    def __rmod__(self, other):
        return self._op("Mod", other, swap=True)

    def __divmod__(self, other):
        return self // other, self % other


class _Graph:
    """Nodes, initializers and the jaxpr variable -> tensor name map of one graph (a
    Scan body is a graph of its own, reading the outer one's names)."""

    def __init__(self, outer: _Graph | None = None):
        self.outer = outer
        self.nodes: list = []
        self.initializers: list = []
        self.inputs: list = []
        self.outputs: list = []
        self.names: dict = {} if outer is None else outer.names.copy()
        self.dims: dict[str, _Dim] = {} if outer is None else outer.dims
        self._counter = itertools.count() if outer is None else outer._counter
        self._constants: dict = {}
        self.where = ""

    # ---------------------------------------------------------------- building blocks

    def fresh(self, hint: str = "t") -> str:
        return f"{hint}_{next(self._counter)}"

    def node(self, op: str, inputs, outputs: int | list[str] = 1, **attributes):
        names = (
            [self.fresh(op.lower()) for _ in range(outputs)]
            if isinstance(outputs, int)
            else outputs
        )
        self.nodes.append(helper.make_node(op, list(inputs), names, **attributes))
        return names[0] if len(names) == 1 else names

    def constant(self, value, dtype=None) -> str:
        array = np.asarray(value, dtype)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        key = (array.dtype.str, array.shape, array.tobytes()) if array.size <= 64 else id(value)
        if key not in self._constants:
            name = self.fresh("c")
            self.initializers.append(numpy_helper.from_array(array, name))
            self._constants[key] = (name, value)  # value kept alive: its id stays unique
        return self._constants[key][0]

    def dim_tensor(self, size) -> str:
        """int64 [1] tensor of a size (int, `_Dim` or jax symbolic size)."""
        if isinstance(size, _Dim):
            return size.name
        if isinstance(size, int | np.integer):
            return self.constant([int(size)], np.int64)
        value = self.evaluate(str(size))
        return value.name if isinstance(value, _Dim) else self.constant([int(value)], np.int64)

    def evaluate(self, size: str):
        """A symbolic size's written form (`floordiv(t - 3, 4) + 1`, `2*b*t^2`, `max(t, 4)`)
        as an int or a `_Dim`, its variables the input sizes bound to them."""
        return self._size(ast.parse(size.replace("^", "**"), mode="eval").body)

    def _size(self, node):
        match node:
            case ast.Constant(value=int() as value):
                return value
            case ast.Name(id=name):
                return self._variable(name)
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                return 0 - self._size(operand)
            case ast.BinOp(left=left, op=ast.Pow(), right=ast.Constant(value=int() as power)):
                return functools.reduce(operator.mul, [self._size(left)] * power)
            case ast.BinOp(left=left, op=op, right=right) if type(op) in _SIZE_OPERATORS:
                return _SIZE_OPERATORS[type(op)](self._size(left), self._size(right))
            case ast.Call(func=ast.Name(id=name), args=[a, b]) if name in _SIZE_FUNCTIONS:
                return self._size_function(name, self._size(a), self._size(b))
        raise NotImplementedError(f"{self.where}: a size with {ast.unparse(node)!r}")

    def _variable(self, name: str):
        if name not in self.dims:
            raise NotImplementedError(
                f"{self.where}: the size variable {name!r} is no input's size (alone or "
                f"times a constant)"
            )
        return self.dims[name]

    def _size_function(self, name: str, a, b):
        if name in ("max", "min") and not (isinstance(a, int) and isinstance(b, int)):
            return _Dim(self, self.node(name.title(), [self.dim_tensor(a), self.dim_tensor(b)]))
        return _SIZE_FUNCTIONS[name](a, b)

    def shape_tensor(self, shape) -> str:
        """int64 [rank] tensor of a shape whose sizes may be symbolic."""
        if all(isinstance(d, int | np.integer) for d in shape):
            return self.constant([int(d) for d in shape], np.int64)
        if not shape:
            return self.constant(np.zeros(0, np.int64))
        return self.node("Concat", [self.dim_tensor(d) for d in shape], axis=0)

    def axes(self, axes) -> str:
        return self.constant([int(a) for a in axes], np.int64)

    # ----------------------------------------------------------------- the graph's edges

    def bind_inputs(self, invars, names) -> None:
        for var, name in zip(invars, names, strict=True):
            self.inputs.append(value_info(name, var.aval))
            self.names[var] = name
        for var, name in zip(invars, names, strict=True):
            for axis, size in enumerate(var.aval.shape):
                if isinstance(size, int):
                    continue
                match = _DIM.fullmatch(str(size).replace(" ", ""))
                if match and match.group(2) not in self.dims:
                    shape = self.node("Shape", [name], start=axis, end=axis + 1)
                    factor = int(match.group(1) or 1)
                    if factor != 1:
                        shape = self.node("Div", [shape, self.constant([factor], np.int64)])
                    self.dims[match.group(2)] = _Dim(self, shape)

    def bind_consts(self, constvars, consts) -> None:
        for var, value in zip(constvars, consts, strict=True):
            self.names[var] = self.constant(np.asarray(value))

    def finish(self, results, names, outvars) -> None:
        for result, name, var in zip(results, names, outvars, strict=True):
            self.node("Identity", [self.tensor(result)], [name])
            self.outputs.append(value_info(name, var.aval))

    def tensor(self, value) -> str:
        if isinstance(value, _Complex):
            raise NotImplementedError(f"{self.where}: a complex value other than |fft(x)|")
        return value

    def read(self, atom):
        if isinstance(atom, jex.Literal):
            return self.constant(np.asarray(atom.val, atom.aval.dtype))
        return self.names[atom]

    # ------------------------------------------------------------------------ lowering

    def lower(self, jaxpr: jex.Jaxpr) -> list:
        for eqn in jaxpr.eqns:
            self.where = f"{eqn.primitive.name} ({_source(eqn)})"
            inputs = [self.read(v) for v in eqn.invars]
            outputs = self.equation(eqn, inputs)
            for var, value in zip(eqn.outvars, outputs, strict=True):
                self.names[var] = value
        return [self.read(v) for v in jaxpr.outvars]

    def equation(self, eqn, inputs) -> list:
        name = eqn.primitive.name
        if name in CALLS:
            body = (
                eqn.params.get("jaxpr")
                or eqn.params.get("call_jaxpr")
                or eqn.params.get("fun_jaxpr")
            )
            return self.inline(body, inputs)
        if name != "abs":
            inputs = [self.tensor(value) for value in inputs]
        if name == "scan":
            return self.scan(eqn, inputs)
        rule = LOWERINGS.get(name)
        if rule is None:
            raise NotImplementedError(
                f"{self.where}: no ONNX lowering for the primitive {name!r} "
                f"(speechkit.onnx_lower.LOWERINGS)"
            )
        result = rule(self, eqn, *inputs)
        return list(result) if isinstance(result, tuple | list) else [result]

    def inline(self, body, inputs) -> list:
        jaxpr = body.jaxpr if isinstance(body, jex.ClosedJaxpr) else body
        consts = body.consts if isinstance(body, jex.ClosedJaxpr) else ()
        self.bind_consts(jaxpr.constvars, consts)
        for var, value in zip(jaxpr.invars, inputs, strict=True):
            self.names[var] = value
        where = self.where
        results = self.lower(jaxpr)
        self.where = where
        return results

    def scan(self, eqn, inputs) -> list:
        """lax.scan as ONNX Scan: consts read from the outer graph by name, the carry as
        the Scan's state, xs scanned along axis 0 (backwards when `reverse`)."""
        params = eqn.params
        body = params["jaxpr"]
        consts, carry, xs = (
            inputs[: params["num_consts"]],
            inputs[params["num_consts"] : params["num_consts"] + params["num_carry"]],
            inputs[params["num_consts"] + params["num_carry"] :],
        )
        if not xs:
            raise NotImplementedError(f"{self.where}: a scan without inputs to scan over")
        sub = _Graph(self)
        jaxpr = body.jaxpr
        sub.bind_consts(jaxpr.constvars, body.consts)
        const_vars = jaxpr.invars[: len(consts)]
        for var, value in zip(const_vars, consts, strict=True):
            sub.names[var] = value
        loop_vars = jaxpr.invars[len(consts) :]
        for var in loop_vars:
            name = sub.fresh("scan_in")
            sub.inputs.append(value_info(name, var.aval))
            sub.names[var] = name
        results = sub.lower(jaxpr)
        outs = [sub.fresh("scan_out") for _ in results]
        sub.finish(results, outs, jaxpr.outvars)
        graph = helper.make_graph(
            sub.nodes, sub.fresh("scan_body"), sub.inputs, sub.outputs, sub.initializers
        )
        backwards = 1 if params["reverse"] else 0
        outputs = self.node(
            "Scan",
            [*carry, *xs],
            len(eqn.outvars),
            body=graph,
            num_scan_inputs=len(xs),
            scan_input_directions=[backwards] * len(xs),
            scan_output_directions=[backwards] * (len(eqn.outvars) - len(carry)),
        )
        return [outputs] if isinstance(outputs, str) else outputs


_SIZE_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_SIZE_FUNCTIONS = {"floordiv": operator.floordiv, "mod": operator.mod, "max": max, "min": min}
"""The operators and functions of a symbolic size's written form, on ints and `_Dim`s
(`max` and `min` of two ints only: `_Graph._size_function` builds the others' nodes)."""


def _source(eqn) -> str:
    """file:line of the user code that called a primitive, as jax records it."""
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(eqn.source_info.traceback)
    except Exception:  # jax's private helper moved: the message loses only the line
        return "unknown source"
    return f"{frame.file_name}:{frame.start_line}" if frame else "unknown source"


# ----------------------------------------------------------------------- lowerings


def _out(eqn, index: int = 0):
    return eqn.outvars[index].aval


def _elementwise(op: str) -> Callable:
    return lambda g, eqn, *xs: g.node(op, xs)


def _not_equal(g, eqn, x, y):
    return g.node("Not", [g.node("Equal", [x, y])])


def _logical(op_bool: str, op_int: str) -> Callable:
    def lower(g, eqn, *xs):
        dtype = eqn.invars[0].aval.dtype
        return g.node(op_bool if dtype == np.bool_ else op_int, xs)

    return lower


def _rem(g, eqn, x, y):
    return g.node("Mod", [x, y], fmod=1)  # C's remainder: the sign of the dividend


def _log1p(g, eqn, x):
    return g.node("Log", [g.node("Add", [x, g.constant(1, eqn.invars[0].aval.dtype)])])


def _rsqrt(g, eqn, x):
    return g.node("Reciprocal", [g.node("Sqrt", [x])])


def _dim_as_value(g, eqn):
    """A symbolic size as a value (a dynamic slice's start, an average's count)."""
    size = g.node("Squeeze", [g.dim_tensor(eqn.params["dim"])])
    return g.node("Cast", [size], to=_onnx_type(_out(eqn).dtype))


def _integer_pow(g, eqn, x):
    """x ** y by squaring, the products in jax's order; 1 / x ** -y for y < 0 (jax refuses
    a negative power of an integer)."""
    power = eqn.params["y"]
    one = g.constant(1, _out(eqn).dtype)
    if power == 0:
        return g.node("Expand", [one, g.node("Shape", [x])])
    result, rest = None, abs(power)
    while rest:
        if rest & 1:
            result = x if result is None else g.node("Mul", [result, x])
        rest >>= 1
        if rest:
            x = g.node("Mul", [x, x])
    return g.node("Div", [one, result]) if power < 0 else result


def _convert(g, eqn, x):
    return g.node("Cast", [x], to=_onnx_type(eqn.params["new_dtype"]))


def _select_n(g, eqn, which, *cases):
    if len(cases) == 1:
        return g.node("Identity", [cases[0]])
    if len(cases) != 2 or eqn.invars[0].aval.dtype != np.bool_:
        raise NotImplementedError(f"{g.where}: select_n of more than two cases")
    return g.node("Where", [which, cases[1], cases[0]])


def _clamp(g, eqn, low, x, high):
    return g.node("Min", [g.node("Max", [x, low]), high])


def _broadcast_in_dim(g, eqn, x):
    shape, dims = eqn.params["shape"], eqn.params["broadcast_dimensions"]
    missing = [axis for axis in range(len(shape)) if axis not in dims]
    if missing:
        x = g.node("Unsqueeze", [x, g.axes(missing)])
    return g.node("Expand", [x, g.shape_tensor(shape)])


def _reshape(g, eqn, x):
    if eqn.params.get("dimensions") is not None:
        raise NotImplementedError(f"{g.where}: reshape with dimensions")
    return g.node("Reshape", [x, g.shape_tensor(eqn.params["new_sizes"])])


def _squeeze(g, eqn, x):
    return g.node("Squeeze", [x, g.axes(eqn.params["dimensions"])])


def _transpose(g, eqn, x):
    return g.node("Transpose", [x], perm=list(eqn.params["permutation"]))


def _concatenate(g, eqn, *xs):
    return g.node("Concat", xs, axis=eqn.params["dimension"])


def _stack(g, eqn, *xs):
    axis = eqn.params["axis"]
    return g.node("Concat", [g.node("Unsqueeze", [x, g.axes([axis])]) for x in xs], axis=axis)


def _slice(g, eqn, x):
    starts, limits = eqn.params["start_indices"], eqn.params["limit_indices"]
    strides = eqn.params["strides"] or (1,) * len(starts)
    axes = list(range(len(starts)))
    return g.node(
        "Slice",
        [x, g.shape_tensor(starts), g.shape_tensor(limits), g.axes(axes), g.axes(strides)],
    )


def _pad(g, eqn, x, value):
    config = eqn.params["padding_config"]
    if any(interior for _, _, interior in config):
        raise NotImplementedError(f"{g.where}: pad with interior padding")
    pads = [int(lo) for lo, _, _ in config] + [int(hi) for _, hi, _ in config]
    return g.node("Pad", [x, g.constant(pads, np.int64), value], mode="constant")


def _iota(g, eqn):
    dtype, shape, dimension = eqn.params["dtype"], eqn.params["shape"], eqn.params["dimension"]
    if all(isinstance(size, int) for size in shape):  # a constant, computed here
        line = np.arange(shape[dimension], dtype=dtype)
        view = [1] * len(shape)
        view[dimension] = shape[dimension]
        return g.constant(np.broadcast_to(line.reshape(view), shape).copy())
    size = g.node("Squeeze", [g.dim_tensor(shape[dimension])])
    line = g.node("Range", [g.constant(0, np.int64), size, g.constant(1, np.int64)])
    line = g.node("Cast", [line], to=_onnx_type(dtype))
    others = [axis for axis in range(len(shape)) if axis != dimension]
    if others:
        line = g.node("Unsqueeze", [line, g.axes(others)])
    return g.node("Expand", [line, g.shape_tensor(shape)])


def _reduce(op: str) -> Callable:
    def lower(g, eqn, x):
        axes = eqn.params["axes"]
        dtype = eqn.invars[0].aval.dtype
        if dtype == np.bool_:  # and / or as min / max of 0 / 1
            x = g.node("Cast", [x], to=TensorProto.INT32)
        result = g.node(op, [x, g.axes(axes)], keepdims=0)
        return g.node("Cast", [result], to=TensorProto.BOOL) if dtype == np.bool_ else result

    return lower


def _argmax(g, eqn, x):
    (axis,) = eqn.params["axes"]
    index = g.node("ArgMax", [x], axis=axis, keepdims=0)
    return g.node("Cast", [index], to=_onnx_type(eqn.params["index_dtype"]))


def _cumsum(g, eqn, x):
    axis = g.constant(eqn.params["axis"], np.int64)
    return g.node("CumSum", [x, axis], reverse=int(eqn.params["reverse"]))


def _dot_general(g, eqn, lhs, rhs):
    """As an Einsum: batch dims, then lhs free, then rhs free, as dot_general orders them."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    left_rank, right_rank = len(eqn.invars[0].aval.shape), len(eqn.invars[1].aval.shape)
    left, right = [None] * left_rank, [None] * right_rank
    for i, j in zip(lb, rb, strict=True):
        left[i] = right[j] = next(letters)
    for i, j in zip(lc, rc, strict=True):
        left[i] = right[j] = next(letters)
    for i in range(left_rank):
        left[i] = left[i] or next(letters)
    for j in range(right_rank):
        right[j] = right[j] or next(letters)
    batch = [left[i] for i in lb]
    free_left = [left[i] for i in range(left_rank) if i not in lb and i not in lc]
    free_right = [right[j] for j in range(right_rank) if j not in rb and j not in rc]
    equation = f"{''.join(left)},{''.join(right)}->{''.join(batch + free_left + free_right)}"
    result = g.node("Einsum", [lhs, rhs], equation=equation)
    if _out(eqn).dtype != eqn.invars[0].aval.dtype:
        result = g.node("Cast", [result], to=_onnx_type(_out(eqn).dtype))
    return result


def _conv(g, eqn, lhs, rhs):
    """conv_general_dilated as Conv: both operands transposed to [N, C, spatial...] /
    [O, I, spatial...], the result back to the output's layout."""
    p = eqn.params
    if any(d != 1 for d in p["lhs_dilation"]) or p["batch_group_count"] != 1:
        raise NotImplementedError(f"{g.where}: a transposed or batch-grouped convolution")
    numbers = p["dimension_numbers"]
    lhs = g.node("Transpose", [lhs], perm=list(numbers.lhs_spec))
    rhs = g.node("Transpose", [rhs], perm=list(numbers.rhs_spec))
    padding = p["padding"]
    pads = [int(lo) for lo, _ in padding] + [int(hi) for _, hi in padding]
    if any(pad < 0 for pad in pads):
        raise NotImplementedError(f"{g.where}: a convolution with negative padding")
    out = g.node(
        "Conv",
        [lhs, rhs],
        strides=list(p["window_strides"]),
        dilations=list(p["rhs_dilation"]),
        pads=pads,
        group=p["feature_group_count"],
    )
    return g.node("Transpose", [out], perm=list(np.argsort(numbers.out_spec)))


def _reduce_window(op: str) -> Callable:
    """A windowed reduction as the `op` over the window's shifted slices of the operand
    padded with the reduction's identity (peak picking's windows are a few frames)."""

    def lower(g, eqn, x):
        p = eqn.params
        if any(d != 1 for d in (*p["base_dilation"], *p["window_dilation"])):
            raise NotImplementedError(f"{g.where}: a dilated window")
        dtype = eqn.invars[0].aval.dtype
        limits = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
        low = -np.inf if np.issubdtype(dtype, np.floating) else limits.min
        high = np.inf if np.issubdtype(dtype, np.floating) else limits.max
        identity = {"Max": low, "Min": high, "Add": 0}[op]
        pads = [int(lo) for lo, _ in p["padding"]] + [int(hi) for _, hi in p["padding"]]
        padded = g.node("Pad", [x, g.constant(pads, np.int64), g.constant(identity, dtype)])
        shape = _out(eqn).shape
        axes = list(range(len(shape)))
        window, strides = p["window_dimensions"], p["window_strides"]
        parts = []
        for offset in itertools.product(*(range(size) for size in window)):
            ends = [o + (n - 1) * s + 1 for o, n, s in zip(offset, shape, strides, strict=True)]
            parts.append(
                g.node(
                    "Slice",
                    [
                        padded,
                        g.shape_tensor(offset),
                        g.shape_tensor(ends),
                        g.axes(axes),
                        g.axes(strides),
                    ],
                )
            )
        return parts[0] if len(parts) == 1 else g.node(op if op != "Add" else "Sum", parts)

    return lower


def _gather(g, eqn, operand, indices):
    """`x[..., idx, ...]` along one axis (`jnp.take`, the front end's framing) as Gather."""
    numbers = eqn.params["dimension_numbers"]
    shape = eqn.invars[0].aval.shape
    slice_sizes = eqn.params["slice_sizes"]
    if not numbers.collapsed_slice_dims and eqn.invars[1].aval.shape == (
        len(numbers.start_index_map),
    ):  # one window of slice_sizes at the given start: a slice of symbolic size
        others = [a for a in range(len(shape)) if a not in numbers.start_index_map]
        if any(not _same_size(slice_sizes[a], shape[a]) for a in others):
            raise NotImplementedError(f"{g.where}: a window gather that cuts other axes")
        axes = list(numbers.start_index_map)
        return _window(g, operand, indices, axes, [slice_sizes[a] for a in axes], shape)
    if len(numbers.start_index_map) != 1:
        raise NotImplementedError(f"{g.where}: a gather other than along one axis")
    (axis,) = numbers.start_index_map
    full = all(
        s == d or k == axis
        for k, (s, d) in enumerate(zip(eqn.params["slice_sizes"], shape, strict=True))
    )
    if (
        numbers.collapsed_slice_dims != (axis,)
        or numbers.operand_batching_dims
        or not full
        or eqn.params["slice_sizes"][axis] != 1
    ):
        raise NotImplementedError(f"{g.where}: a gather other than along one axis")
    index = g.node("Squeeze", [indices, g.axes([len(eqn.invars[1].aval.shape) - 1])])
    taken = g.node("Gather", [operand, index], axis=axis)
    # Gather's layout: operand[:axis], indices, operand[axis+1:]; jax puts the operand's
    # kept axes at offset_dims and the indices' axes in the others, in order.
    index_rank = len(eqn.invars[1].aval.shape) - 1
    onnx_axes = (
        [("o", k) for k in range(axis)]
        + [("i", k) for k in range(index_rank)]
        + [("o", k) for k in range(axis + 1, len(shape))]
    )
    kept = iter(("o", k) for k in range(len(shape)) if k != axis)
    batch = iter(("i", k) for k in range(index_rank))
    rank = len(_out(eqn).shape)
    jax_axes = [next(kept) if d in numbers.offset_dims else next(batch) for d in range(rank)]
    perm = [onnx_axes.index(a) for a in jax_axes]
    return taken if perm == sorted(perm) else g.node("Transpose", [taken], perm=perm)


def _window(g, operand, starts, axes, sizes, shape):
    """operand[starts : starts + sizes] on `axes`, each start clamped as jax clamps it,
    into [0, size of the axis - window], so that the window fits."""
    sizes = g.shape_tensor(sizes)
    last = g.node("Sub", [g.shape_tensor([shape[a] for a in axes]), sizes])
    starts = g.node("Cast", [starts], to=TensorProto.INT64)
    zeros = g.constant([0] * len(axes), np.int64)
    starts = g.node("Min", [g.node("Max", [starts, zeros]), last])
    ends = g.node("Add", [starts, sizes])
    return g.node("Slice", [operand, starts, ends, g.axes(axes)])


def _dynamic_slice(g, eqn, operand, *starts):
    shape = eqn.invars[0].aval.shape
    axes = list(range(len(shape)))
    start = g.node("Concat", [g.node("Unsqueeze", [s, g.axes([0])]) for s in starts], axis=0)
    return _window(g, operand, start, axes, eqn.params["slice_sizes"], shape)


def _same_size(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # symbolic sizes jax cannot compare
        return False


def _fft(g, eqn, x):
    if eqn.params["fft_type"] != jax.lax.FftType.RFFT or len(eqn.params["fft_lengths"]) != 1:
        raise NotImplementedError(f"{g.where}: an fft other than a 1-D real one")
    (n,) = eqn.params["fft_lengths"]
    signal = g.node("Unsqueeze", [x, g.axes([-1])])
    rank = len(eqn.invars[0].aval.shape)
    spectrum = g.node("DFT", [signal, g.constant(n, np.int64)], axis=rank - 1, onesided=1)
    return _Complex(spectrum)


def _abs(g, eqn, x):
    if isinstance(x, _Complex):  # |re + i im| over the last axis
        return g.node("ReduceL2", [x.name, g.axes([-1])], keepdims=0)
    return g.node("Abs", [x])


LOWERINGS: dict[str, Callable] = {
    "add": _elementwise("Add"),
    "sub": _elementwise("Sub"),
    "mul": _elementwise("Mul"),
    "div": _elementwise("Div"),
    "max": _elementwise("Max"),
    "min": _elementwise("Min"),
    "pow": _elementwise("Pow"),
    "rem": _rem,
    "and": _logical("And", "BitwiseAnd"),
    "or": _logical("Or", "BitwiseOr"),
    "not": _logical("Not", "BitwiseNot"),
    "eq": _elementwise("Equal"),
    "ne": _not_equal,
    "lt": _elementwise("Less"),
    "le": _elementwise("LessOrEqual"),
    "gt": _elementwise("Greater"),
    "ge": _elementwise("GreaterOrEqual"),
    "neg": _elementwise("Neg"),
    "exp": _elementwise("Exp"),
    "log": _elementwise("Log"),
    "log1p": _log1p,
    "logistic": _elementwise("Sigmoid"),
    "tanh": _elementwise("Tanh"),
    "sign": _elementwise("Sign"),
    "sqrt": _elementwise("Sqrt"),
    "rsqrt": _rsqrt,
    "square": lambda g, eqn, x: g.node("Mul", [x, x]),
    "floor": _elementwise("Floor"),
    "ceil": _elementwise("Ceil"),
    "erf": _elementwise("Erf"),
    "abs": _abs,
    "integer_pow": _integer_pow,
    "convert_element_type": _convert,
    "copy": _elementwise("Identity"),
    "select_n": _select_n,
    "clamp": _clamp,
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "squeeze": _squeeze,
    "transpose": _transpose,
    "concatenate": _concatenate,
    "stack": _stack,
    "slice": _slice,
    "pad": _pad,
    "iota": _iota,
    "dim_as_value": _dim_as_value,
    "reduce_sum": _reduce("ReduceSum"),
    "reduce_max": _reduce("ReduceMax"),
    "reduce_min": _reduce("ReduceMin"),
    "reduce_and": _reduce("ReduceMin"),
    "reduce_or": _reduce("ReduceMax"),
    "argmax": _argmax,
    "cumsum": _cumsum,
    "dot_general": _dot_general,
    "conv_general_dilated": _conv,
    "reduce_window_max": _reduce_window("Max"),
    "reduce_window_min": _reduce_window("Min"),
    "reduce_window_sum": _reduce_window("Add"),
    "gather": _gather,
    "dynamic_slice": _dynamic_slice,
    "fft": _fft,
}
"""Primitive name -> rule(graph, equation, *input tensor names) -> output name(s)."""
