"""AF-KWS model: the streaming contract (random block partitions), look-ahead and
receptive field as declared, the precision policy (float32 matmuls by default), bad
input."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cskws_jax import model
from cskws_jax.streaming import StreamDetector
from speechkit import accelerator

SMALL = model.AfKwsConfig(
    num_keywords=3,
    stem_channels=8,
    stages=(model.Stage(8, 2, 1), model.Stage(12, 2, 2, dilation=2)),
    head_channels=8,
    delay=3,
)


@pytest.fixture(scope="module")
def small():
    net = model.AfKws(SMALL)
    features = np.random.default_rng(0).normal(size=(2, 157, 64)).astype(np.float32)
    return net, net.init(jax.random.key(0), features), features


@pytest.mark.parametrize("unknown_class", [True, False])
def test_heads_have_the_documented_shapes(unknown_class):
    config = model.AfKwsConfig(num_keywords=5, unknown_class=unknown_class)
    net = model.AfKws(config)
    features = jnp.zeros((2, 403, 64))
    outputs = net.apply(net.init(jax.random.key(0), features), features)
    assert outputs["heatmap"].shape == (2, 101, 5 + unknown_class)
    assert outputs["length"].shape == outputs["offset"].shape == outputs["mask"].shape == (2, 101)
    assert np.all((outputs["offset"] >= 0) & (outputs["offset"] <= 1))
    assert np.all(outputs["length"] >= 0)


def test_streaming_over_random_partitions_equals_the_whole_call(small):
    net, params, features = small
    mask = np.ones(features.shape[:2], bool)
    mask[1, 120:] = False
    whole = net.apply(params, features, mask)
    stride, delay = SMALL.output_stride, SMALL.delay
    frames = whole["mask"].shape[1]
    total = (frames + delay) * stride
    padded = np.pad(features, ((0, 0), (0, total - features.shape[1]), (0, 0)))
    padded_mask = np.pad(mask, ((0, 0), (0, total - features.shape[1])))
    step = jax.jit(lambda block, state, m: net.apply(params, block, state, m, method=net.step))
    for trial in range(3):
        rng = np.random.default_rng(trial)
        state = net.apply(params, 2, method=net.initial_state)
        heads, start = [], 0
        while start < total:
            size = min(int(rng.integers(1, 6)) * stride, total - start)
            out, state = step(
                padded[:, start : start + size], state, padded_mask[:, start : start + size]
            )
            heads.append(out)
            start += size
        streamed = {k: np.concatenate([h[k] for h in heads], axis=1)[:, delay:] for k in heads[0]}
        valid = whole["mask"]
        for key in ("heatmap", "length", "offset"):
            np.testing.assert_allclose(streamed[key][valid], whole[key][valid], atol=1e-5)


def test_look_ahead_and_receptive_field_are_as_declared(small):
    net, params, features = small
    spec = model.streaming_spec(SMALL)
    position = 30

    def heat(features):
        return net.apply(params, features)["heatmap"][0, position].sum()

    grad = jax.grad(heat)(jnp.asarray(features))
    seen = np.flatnonzero(np.abs(grad[0]).sum(axis=1) > 0)
    assert seen.max() == (position + SMALL.delay) * spec.block
    assert seen.min() == (position + SMALL.delay) * spec.block - spec.receptive_field + 1


def _precisions(net, params, features) -> dict[str, set]:
    """Precisions asked for by the whole call, one step, the streamed detector's scan
    and the gradient of the heads."""
    state = net.apply(params, 2, method=net.initial_state)
    detector = StreamDetector(net, params, block_outputs=2)
    blocks = np.zeros((3, 2, detector.block_frames, 64), np.float32)
    step = functools.partial(net.apply, method=net.step)
    programs = {
        "call": jax.make_jaxpr(net.apply)(params, features),
        "step": jax.make_jaxpr(step)(params, features[:, :8], state),
        "scan": jax.make_jaxpr(detector._scan)(blocks, np.ones(blocks.shape[:3], bool)),
        "grad": jax.make_jaxpr(jax.grad(lambda p: net.apply(p, features)["heatmap"].sum()))(params),
    }
    found = {name: accelerator.matmul_precisions(jaxpr) for name, jaxpr in programs.items()}
    assert all(found.values())
    return {name: {precision for _, precision in ops} for name, ops in found.items()}


def test_every_matmul_and_convolution_is_float32_under_the_default_policy(small):
    """On CPU float32 is exact anyway; this pins what a GPU or TPU is asked for, even
    inside a caller's lower-precision context."""
    net, params, features = small
    assert SMALL.precision == "highest"
    with jax.default_matmul_precision("bfloat16"):
        found = _precisions(net, params, features)
    highest = (jax.lax.Precision.HIGHEST,) * 2
    assert found == dict.fromkeys(found, {highest})
    hlo = jax.jit(net.apply).lower(params, features).as_text().splitlines()
    ops = [line for line in hlo if "stablehlo.convolution" in line or "stablehlo.dot_gen" in line]
    assert ops and all("HIGHEST" in line for line in ops)


def test_faster_precisions_are_passed_on_and_bad_ones_named(small):
    _, params, features = small
    net = model.AfKws(dataclasses.replace(SMALL, precision="default"))
    found = _precisions(net, params, features)
    assert found == dict.fromkeys(found, {None})
    with pytest.raises(ValueError, match=r"precision: expected one of \('highest', 'high'"):
        model.AfKwsConfig(precision="float32")


def test_bad_input_is_named(small):
    net, params, _ = small
    with pytest.raises(
        ValueError, match=r"features: shape \(1, 40, 63\), expected \[batch, frames, 64\]"
    ):
        net.apply(params, np.zeros((1, 40, 63), np.float32))
    with pytest.raises(ValueError, match="num_keywords"):
        model.AfKwsConfig(num_keywords=0)
    assert "look-ahead 0.12 s, highest precision" in model.describe(SMALL, params)
