"""speechkit.onnx_lower: each lowering run by onnxruntime equals jax on random inputs
(shapes, layouts and edge values drawn per case), symbolic sizes included; a primitive
it does not lower is an error naming it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime
import pytest

from speechkit import onnx_lower


def _run(fn, *args, specs=None):
    """(onnxruntime's outputs, jax's) of fn(*args), lowered with `specs` (default: the
    arguments' own shapes)."""
    specs = specs or [
        jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype), x)
        for x in args
    ]
    names = [f"a{i}" for i in range(len(args))]
    out = jax.jit(fn)(*args)
    outputs = out if isinstance(out, tuple) else (out,)
    model = onnx_lower.lower(
        lambda **kw: (lambda r: r if isinstance(r, tuple) else (r,))(
            fn(*(jax.tree_util.tree_map(jnp.asarray, v) for v in kw.values()))
        ),
        dict(zip(names, specs, strict=True)),
        [f"r{i}" for i in range(len(outputs))],
    )
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    feed = {}
    for name, arg in zip(names, args, strict=True):
        leaves = jax.tree_util.tree_leaves(arg)
        feed |= dict(zip(onnx_lower.leaf_names(name, arg), map(np.asarray, leaves), strict=True))
    found = session.run(None, feed)
    return found, [np.asarray(o) for o in jax.tree_util.tree_leaves(outputs)]


def _check(fn, *args, atol=1e-5, specs=None):
    found, want = _run(fn, *args, specs=specs)
    assert len(found) == len(want)
    for got, expected in zip(found, want, strict=True):
        assert got.shape == expected.shape and got.dtype == expected.dtype
        if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, atol=atol, rtol=1e-5)


RNG = np.random.default_rng(0)


def _normal(*shape):
    return RNG.normal(size=shape).astype(np.float32)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: (x + y, x - y, x * y, x / (jnp.abs(y) + 1), jnp.maximum(x, y)),
        lambda x, y: (jnp.minimum(x, y), -x, jnp.exp(x), jnp.log(jnp.abs(x) + 1e-3)),
        lambda x, y: (jnp.log1p(jnp.abs(x)), jax.nn.sigmoid(x), jnp.tanh(y), jnp.sign(x)),
        lambda x, y: (jnp.sqrt(jnp.abs(x)), x**3, jnp.fmod(x, jnp.abs(y) + 0.5), jnp.abs(x)),
        lambda x, y: (x < y, x <= y, x > y, x >= y, x == y, x != y),
        lambda x, y: (jnp.where(x > 0, x, y), jnp.clip(x, -0.5, 0.5), (x > 0) & (y > 0)),
        lambda x, y: ((x > 0) | (y > 0), ~(x > 0), x.astype(jnp.int32), (x > 0).astype(float)),
        lambda x, y: (jnp.floor(x), jnp.ceil(y), jax.nn.relu(x), jax.nn.softplus(y)),
    ],
)
def test_elementwise_and_comparisons(fn):
    x, y = _normal(3, 5), _normal(3, 5)
    x[0, 0], y[0, 0] = 0.0, 0.0  # edges: zeros, equal values
    _check(fn, x, y)


def test_integer_arithmetic():
    a = RNG.integers(-50, 50, size=(4, 6)).astype(np.int32)
    b = RNG.integers(1, 9, size=(4, 6)).astype(np.int32)
    _check(lambda a, b: (a + b, a * b, jnp.maximum(a, b), a & b, a | b, a % b), a, b)


@pytest.mark.parametrize("seed", range(3))
def test_shapes_layouts_and_reductions(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 6, 4)).astype(np.float32)

    def fn(x):
        return (
            jnp.broadcast_to(x[:, :1], (2, 6, 4)) + x.reshape(2, 24).reshape(2, 6, 4),
            jnp.transpose(x, (2, 0, 1)),
            jnp.concatenate([x, 2 * x], axis=1),
            jnp.stack([x, x + 1], axis=2),
            x[:, 1:5:2, ::3],
            jnp.pad(x, ((0, 0), (2, 1), (0, 0)), constant_values=-1.0),
            x[0],
            jnp.squeeze(x[:, :1], 1),
            x.sum(axis=(0, 2)),
            x.max(axis=1),
            x.min(axis=-1),
            jnp.argmax(x, axis=1),
            (x > 0).all(axis=2),
            (x > 1).any(axis=0),
            jnp.arange(6, dtype=jnp.float32)[None, :, None] * x,
        )

    _check(fn, x)


@pytest.mark.parametrize(
    "equation, left, right",
    [
        ("ij,jk->ik", (3, 4), (4, 5)),
        ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
        ("btf,fc->btc", (2, 7, 6), (6, 3)),
        ("ijk,jkl->il", (3, 4, 2), (4, 2, 5)),
    ],
)
def test_dot_general(equation, left, right):
    _check(lambda a, b: jnp.einsum(equation, a, b), _normal(*left), _normal(*right))


@pytest.mark.parametrize(
    "stride, dilation, groups, padding",
    [(1, 1, 1, ((2, 0),)), (2, 1, 1, ((1, 1),)), (1, 2, 2, ((4, 0),)), (3, 1, 4, ((0, 2),))],
)
def test_causal_conv_in_flax_layout(stride, dilation, groups, padding):
    x, kernel = _normal(2, 11, 8), _normal(3, 8 // groups, 4)

    def conv(x, kernel):
        return jax.lax.conv_general_dilated(
            x,
            kernel,
            (stride,),
            padding,
            rhs_dilation=(dilation,),
            dimension_numbers=("NWC", "WIO", "NWC"),
            feature_group_count=groups,
        )

    _check(conv, x, kernel)


def test_windowed_max_gather_and_fft_magnitude():
    x = _normal(2, 9, 3)
    x[0, 3:6] = 1.0  # ties inside a window
    window = lambda x: jax.lax.reduce_window(  # noqa: E731
        x, -jnp.inf, jax.lax.max, (1, 3, 1), (1, 1, 1), "SAME"
    )
    _check(window, x)
    strided = lambda x: jax.lax.reduce_window(  # noqa: E731
        x, -jnp.inf, jax.lax.max, (1, 2, 1), (1, 2, 1), "VALID"
    )
    _check(strided, x)
    frames = np.arange(4)[:, None] * 3 + np.arange(5)[None, :]
    _check(lambda s: s[:, frames], _normal(2, 20))
    _check(lambda s: jnp.abs(jnp.fft.rfft(s, n=16, axis=-1)), _normal(3, 4, 12), atol=1e-4)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_consts_carry_and_outputs(reverse):
    xs, scale = _normal(7, 2, 3), _normal(3)

    def fn(xs, scale):
        def body(carry, x):
            total = carry * 0.5 + x * scale
            return total, (total, total.sum(-1))

        return jax.lax.scan(body, jnp.zeros((2, 3)), xs, reverse=reverse)

    _check(fn, xs, scale)


def test_symbolic_sizes_are_computed_from_the_inputs():
    batch, frames = jax.export.symbolic_shape("b, t")
    specs = [jax.ShapeDtypeStruct((batch, 4 * frames, 3), jnp.float32)]

    def fn(x):
        pooled = x.reshape(x.shape[0], x.shape[1] // 4, 4, 3).mean(axis=2)
        shifted = jnp.pad(pooled, ((0, 0), (2, 0), (0, 0)))[:, : pooled.shape[1]]
        return shifted + jnp.zeros(pooled.shape), x[:, ::4], jnp.cumsum(pooled, axis=1)

    for shape in ((1, 8, 3), (3, 20, 3)):
        _check(fn, _normal(*shape), specs=specs)


def test_a_primitive_without_a_lowering_is_named():
    with pytest.raises(NotImplementedError, match="'sort'.*onnx_lower.LOWERINGS"):
        onnx_lower.lower(
            lambda x: (jnp.sort(x),), {"x": jax.ShapeDtypeStruct((4,), jnp.float32)}, ["y"]
        )


def test_outputs_named_as_inputs_are_refused():
    with pytest.raises(ValueError, match="outputs named as inputs"):
        onnx_lower.lower(lambda x: (x,), {"x": jax.ShapeDtypeStruct((4,), jnp.float32)}, ["x"])


@pytest.mark.parametrize("kind", ["cmn", "cmvn", "pcen"])
def test_every_input_normaliser_lowers(kind):
    """The models' causal normalisers (a scan, rsqrt, powers) with their state."""
    from speechkit import normalise

    config = normalise.NormaliseConfig(kind, time_s=0.05)
    features = _normal(2, 9, 4) - 3.0
    mask = np.ones((2, 9), bool)
    mask[1, 6:] = False
    state = normalise.initial_state(config, 2, 4)

    def fn(features, mask, state):
        return normalise.normalise_features(config, features, mask, state, hop_s=0.01)

    found, want = _run(fn, features, mask, state)
    for got, expected in zip(found, want, strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)  # rsqrt: ~5e-5


def test_sizes_round_down_and_windows_clamp_as_jax():
    """A symbolic size whose numerator can be negative rounds down (jax's //), and a
    window gather whose start would overrun the axis is moved back inside it."""
    batch, frames = jax.export.symbolic_shape("b, t")
    specs = [jax.ShapeDtypeStruct((batch, frames), jnp.float32)]

    def fn(x):
        kept = (x.shape[1] - 3) // 4 + 1  # 0 for t = 1 and 2
        late = jax.lax.dynamic_slice_in_dim(x, 5, x.shape[1] // 2, axis=1)
        return jnp.zeros((x.shape[0], kept)), late

    for shape in ((1, 1), (2, 2), (1, 7), (3, 12)):
        _check(fn, _normal(*shape), specs=specs)
