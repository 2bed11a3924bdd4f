"""speechkit.normalise: the causal normalisers against a NumPy loop, block by block
equal to whole, invalid frames holding the state, bad configs named."""

import jax
import numpy as np
import pytest

from speechkit import normalise

HOP_S = 0.01


def _reference(kind: str, features, mask, time_s: float):
    """The module docstring's definition, one frame at a time in float64."""
    rate = min(1.0, HOP_S / time_s)
    out = np.array(features, np.float64)
    for b in range(features.shape[0]):
        count, first, second = 0, np.zeros(features.shape[2]), np.zeros(features.shape[2])
        for t in range(features.shape[1]):
            if not mask[b, t]:
                continue
            x = features[b, t].astype(np.float64)
            count += 1
            weight = max(1.0 / count, rate)
            z1, z2 = (np.exp(x), np.exp(x)) if kind == "pcen" else (x, x**2)
            first += weight * (z1 - first)
            second += weight * (z2 - second)
            if kind == "cmn":
                out[b, t] = x - first
            elif kind == "cmvn":
                variance = np.maximum(second - first**2, 0.0)
                out[b, t] = (x - first) / np.sqrt(variance + normalise.VARIANCE_FLOOR)
            else:
                gain = np.exp(x) / (first + normalise.PCEN_EPSILON) ** normalise.PCEN_ALPHA
                out[b, t] = (gain + 2.0) ** 0.5 - 2.0**0.5
    return out


def _inputs(batch=3, frames=90, bands=5, seed=0):
    rng = np.random.default_rng(seed)
    features = (rng.normal(size=(batch, frames, bands)) * 2 - 4).astype(np.float32)
    mask = np.ones((batch, frames), bool)
    mask[1, 60:] = False  # a shorter example
    mask[2, 10:14] = False  # a gap: the state holds
    return features, mask


@pytest.mark.parametrize("kind", ["cmn", "cmvn", "pcen"])
def test_matches_the_loop_reference(kind):
    features, mask = _inputs()
    config = normalise.NormaliseConfig(kind, time_s=0.2)
    state = normalise.initial_state(config, 3, 5)
    out, _ = jax.jit(normalise.normalise_features, static_argnums=0, static_argnames="hop_s")(
        config, features, mask, state, hop_s=HOP_S
    )
    np.testing.assert_allclose(out, _reference(kind, features, mask, 0.2), rtol=2e-4, atol=2e-4)
    np.testing.assert_array_equal(np.asarray(out)[~mask], features[~mask])


@pytest.mark.parametrize("kind", ["cmn", "cmvn", "pcen"])
def test_blocks_of_any_length_equal_the_whole_call(kind):
    features, mask = _inputs(seed=1)
    config = normalise.NormaliseConfig(kind, time_s=0.3)
    whole, whole_state = normalise.normalise_features(
        config, features, mask, normalise.initial_state(config, 3, 5), hop_s=HOP_S
    )
    state, pieces, start = normalise.initial_state(config, 3, 5), [], 0
    for size in (1, 7, 30, 2, 50):
        out, state = normalise.normalise_features(
            config,
            features[:, start : start + size],
            mask[:, start : start + size],
            state,
            hop_s=HOP_S,
        )
        pieces.append(np.asarray(out))
        start += size
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), whole, atol=1e-5)
    assert int(state["count"][1]) == 60 and int(whole_state["count"][2]) == 86


def test_none_is_the_identity_and_level_is_removed():
    features, mask = _inputs()
    none = normalise.NormaliseConfig()
    out, state = normalise.normalise_features(none, features, mask, {}, hop_s=HOP_S)
    np.testing.assert_array_equal(out, features)
    assert state == {}
    config = normalise.NormaliseConfig("cmn", time_s=10.0)
    state = normalise.initial_state(config, 3, 5)
    louder, _ = normalise.normalise_features(config, features + 3.0, mask, state, hop_s=HOP_S)
    quieter, _ = normalise.normalise_features(config, features, mask, state, hop_s=HOP_S)
    np.testing.assert_allclose(np.asarray(louder)[mask], np.asarray(quieter)[mask], atol=1e-5)


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="NormaliseConfig.kind"):
        normalise.NormaliseConfig("mvn")
    with pytest.raises(ValueError, match="NormaliseConfig.time_s"):
        normalise.NormaliseConfig("cmn", time_s=0.0)
