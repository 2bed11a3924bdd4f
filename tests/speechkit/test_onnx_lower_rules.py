"""speechkit.onnx_lower, the rules test_onnx_lower.py leaves out, each lowered through
`onnx_lower.lower`, run by onnxruntime and compared with jax on CPU in float32: erf,
windowed sums and minima, negative integer powers, `copy` and the inlined calls, sizes
computed with max, min, floordiv, mod and powers. Every refusal is raised and names the
primitive and what it refuses; every name in the lowering's tables is a primitive of the
installed jax."""

from __future__ import annotations

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import primitives

from speechkit import onnx_lower

from .test_onnx_lower import _check, _normal

ATOL = 1e-6


def _primitives(fn, *specs) -> set[str]:
    """The names of the primitives of fn's jaxpr, outside any call body."""
    return {eqn.primitive.name for eqn in jax.make_jaxpr(fn)(*specs).jaxpr.eqns}


def _spec(*shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def test_erf():
    """erf over [3, 7], tails included (|x| up to ~6)."""
    x = 2 * _normal(3, 7)
    x[0, :3] = (0.0, -6.0, 6.0)
    assert _primitives(lax.erf, x) == {"erf"}
    _check(lax.erf, x, atol=ATOL)


WINDOWS = [
    ((1, 3, 1), (1, 1, 1), "SAME"),
    ((1, 2, 1), (1, 2, 1), "VALID"),
    ((2, 3, 1), (1, 2, 1), ((0, 0), (2, 0), (0, 0))),
]


@pytest.mark.parametrize("window, strides, padding", WINDOWS)
@pytest.mark.parametrize(
    "init, reducer, primitive",
    [(0.0, lax.add, "reduce_window_sum"), (jnp.inf, lax.min, "reduce_window_min")],
    ids=["sum", "min"],
)
def test_windowed_sum_and_min(init, reducer, primitive, window, strides, padding):
    """A window over x [2, 9, 3], ties inside a window, each primitive itself."""
    x = _normal(2, 9, 3)
    x[0, 3:6] = -1.0

    def fn(x):
        return lax.reduce_window(x, init, reducer, window, strides, padding)

    assert _primitives(fn, x) == {primitive}
    _check(fn, x, atol=ATOL)


@pytest.mark.parametrize("power", [-1, -2, -3, -5])
def test_negative_integer_powers(power):
    """x ** power over x [4, 6], |x| in [0.5, 2] of either sign."""
    rng = np.random.default_rng(-power)
    x = (rng.uniform(0.5, 2.0, (4, 6)) * rng.choice([-1, 1], (4, 6))).astype(np.float32)
    assert _primitives(lambda x: x**power, x) == {"integer_pow"}
    _check(lambda x: x**power, x, atol=ATOL)


@jax.custom_vjp
def _doubled(x):
    return 2 * x


_doubled.defvjp(lambda x: (_doubled(x), None), lambda _, g: (2 * g,))


def test_copy_and_inlined_calls():
    """`copy`, and the bodies of a jit call, a checkpoint and custom derivatives, over
    x [3, 5]."""
    x = _normal(3, 5)

    def fn(x):
        return (
            jnp.copy(x),
            jax.jit(jnp.exp)(x),
            jax.checkpoint(jnp.tanh)(x),
            _doubled(x),
            jax.nn.relu(x),
        )

    assert _primitives(fn, x) == {"copy", "jit", "remat2", "custom_vjp_call", "custom_jvp_call"}
    _check(fn, x, atol=ATOL)


def _max(a, b):
    return a.max(b) if jax.export.is_symbolic_dim(a) else max(a, b)


def _min(a, b):
    return a.min(b) if jax.export.is_symbolic_dim(a) else min(a, b)


def test_sizes_computed_with_max_min_floordiv_mod_and_powers():
    """Ranges whose lengths jax writes `max(t, 4)`, `min(t, 4)`, `floordiv(t, 3)`,
    `mod(t, 3)`, `t^2 + t` (x [t, 2], t symbolic), each computed in the graph."""
    (frames,) = jax.export.symbolic_shape("t")
    specs = [_spec(frames, 2)]

    def fn(x):
        t = x.shape[0]
        sizes = (_max(t, 4), _min(t, 4), t // 3, t % 3, t * t + t)
        return tuple(lax.iota(jnp.float32, size) for size in sizes)

    for t in (1, 5, 9):
        _check(fn, _normal(t, 2), specs=specs, atol=0)


def _conv(lhs_dilation=(1,), padding=((0, 0),), batch_group_count=1):
    def conv(x, kernel):
        return lax.conv_general_dilated(
            x,
            kernel,
            (1,),
            padding,
            lhs_dilation=lhs_dilation,
            dimension_numbers=("NWC", "WIO", "NWC"),
            batch_group_count=batch_group_count,
        )

    return conv


_WINDOW_GATHER = lax.GatherDimensionNumbers(
    offset_dims=(0, 1), collapsed_slice_dims=(), start_index_map=(0,)
)
_ROW_GATHER = lax.GatherDimensionNumbers(
    offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)
)
(_T,) = jax.export.symbolic_shape("t")
INDEX = _spec(3, dtype=jnp.int32)
REFUSALS = {
    "complex output": (jnp.fft.rfft, [_spec(8)], r"a complex value other than \|fft\(x\)\|"),
    "complex operand": (
        lambda x: jnp.abs(2 * jnp.fft.rfft(x)),
        [_spec(8)],
        r"^mul \(.*\): a complex value other than \|fft\(x\)\|",
    ),
    "scan without xs": (
        lambda c: lax.scan(lambda c, _: (c + 1, c), c, None, length=3)[1],
        [_spec(2)],
        r"^scan \(.*\): a scan without inputs to scan over",
    ),
    "select_n of three": (
        lambda i, a: lax.select_n(i, a, a + 1, a + 2),
        [INDEX, _spec(3)],
        r"^select_n \(.*\): select_n of more than two cases",
    ),
    "reshape with dimensions": (
        lambda x: lax.reshape(x, (6,), dimensions=(1, 0)),
        [_spec(2, 3)],
        r"^reshape \(.*\): reshape with dimensions",
    ),
    "interior padding": (
        lambda x: lax.pad(x, 0.0, [(0, 0, 1)]),
        [_spec(3)],
        r"^pad \(.*\): pad with interior padding",
    ),
    "transposed convolution": (
        _conv(lhs_dilation=(2,)),
        [_spec(1, 5, 2), _spec(3, 2, 2)],
        r"^conv_general_dilated \(.*\): a transposed or batch-grouped convolution",
    ),
    "batch-grouped convolution": (
        _conv(batch_group_count=2),
        [_spec(2, 5, 2), _spec(3, 2, 2)],
        r"^conv_general_dilated \(.*\): a transposed or batch-grouped convolution",
    ),
    "negative convolution padding": (
        _conv(padding=((-1, 0),)),
        [_spec(1, 5, 2), _spec(3, 2, 2)],
        r"^conv_general_dilated \(.*\): a convolution with negative padding",
    ),
    "dilated window": (
        lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2,), (1,), "VALID", None, (2,)),
        [_spec(6)],
        r"^reduce_window_max \(.*\): a dilated window",
    ),
    "dilated base": (
        lambda x: lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID", (2,)),
        [_spec(6)],
        r"^reduce_window_sum \(.*\): a dilated window",
    ),
    "window gather cutting an axis": (
        lambda x, i: lax.gather(x, i, _WINDOW_GATHER, slice_sizes=(2, 3)),
        [_spec(4, 5), _spec(1, dtype=jnp.int32)],
        r"^gather \(.*\): a window gather that cuts other axes",
    ),
    "gather along two axes": (
        lambda x, i, j: x[i, j],
        [_spec(4, 5), INDEX, INDEX],
        r"^gather \(.*\): a gather other than along one axis",
    ),
    "gather cutting the rows": (
        lambda x, i: lax.gather(x, i[:, None], _ROW_GATHER, slice_sizes=(1, 3)),
        [_spec(4, 5), INDEX],
        r"^gather \(.*\): a gather other than along one axis",
    ),
    "2-D fft": (
        lambda x: jnp.abs(jnp.fft.rfft2(x)),
        [_spec(4, 8)],
        r"^fft \(.*\): an fft other than a 1-D real one",
    ),
    "complex fft": (
        lambda x: jnp.abs(jnp.fft.fft(x)),
        [_spec(8)],
        r"^fft \(.*\): an fft other than a 1-D real one",
    ),
    "size of no input's size": (
        lambda x: x + jnp.zeros(x.shape),
        [_spec(2 * _T + 1)],
        r"^broadcast_in_dim \(.*\): the size variable 't' is no input's size",
    ),
}


@pytest.mark.parametrize("fn, specs, message", REFUSALS.values(), ids=REFUSALS)
def test_each_refusal_names_the_primitive_and_what(fn, specs, message):
    """Each NotImplementedError the lowering raises, from a function of a few elements."""
    arguments = {f"a{i}": spec for i, spec in enumerate(specs)}
    with pytest.raises(NotImplementedError, match=message):
        onnx_lower.lower(lambda **kw: (fn(*kw.values()),), arguments, ["y"])


def test_a_size_jax_does_not_write_is_refused():
    with pytest.raises(NotImplementedError, match=r"a size with 't \*\* t'"):
        onnx_lower._Graph().evaluate("t ^ t")


def test_a_wrong_number_of_outputs_is_refused():
    with pytest.raises(ValueError, match=r"expected 2 outputs \(\('y', 'z'\)\), got tuple"):
        onnx_lower.lower(lambda x: (x,), {"x": _spec(4)}, ("y", "z"))


def test_every_name_in_the_tables_is_a_primitive_of_the_installed_jax():
    """A primitive of `jax.extend.core.primitives`, or one a traced function emits."""
    public = {p.name for p in vars(primitives).values() if isinstance(p, jex.Primitive)}
    (frames,) = jax.export.symbolic_shape("t")
    traced = _primitives(lambda x: jnp.stack([x, x]).mean(axis=2), _spec(2, frames))
    assert {"stack", "dim_as_value"} <= traced
    names = {*onnx_lower.CALLS, *onnx_lower.LOWERINGS, "scan"}
    assert names - public - traced == set()
