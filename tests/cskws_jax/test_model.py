"""AF-KWS model: the streaming contract (random block partitions), look-ahead and
receptive field as declared, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cskws_jax import model

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


def test_bad_input_is_named(small):
    net, params, _ = small
    with pytest.raises(
        ValueError, match=r"features: shape \(1, 40, 63\), expected \[batch, frames, 64\]"
    ):
        net.apply(params, np.zeros((1, 40, 63), np.float32))
    with pytest.raises(ValueError, match="num_keywords"):
        model.AfKwsConfig(num_keywords=0)
    assert "look-ahead 0.12 s" in model.describe(SMALL, params)
