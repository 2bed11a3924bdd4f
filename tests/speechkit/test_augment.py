"""speechkit.augment: SpecAugment-style masks and feature-domain noise."""

import jax
import numpy as np
import pytest

from speechkit import augment


def _features(batch=3, frames=50, bins=16):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(batch, frames, bins)).astype(np.float32)
    mask = np.ones((batch, frames), bool)
    mask[1, 30:] = False  # a shorter example
    return features, mask


def test_masks_are_bands_and_runs_at_the_mean_level():
    features, mask = _features()
    config = augment.MaskConfig(freq_masks=1, max_freq_width=4, time_masks=1, max_time_width=6)
    out = np.asarray(augment.spec_augment(features, mask, jax.random.key(0), config))
    changed = out != features
    for b in range(3):
        level = features[b][mask[b]].mean()
        assert np.allclose(out[b][changed[b]], level)
        assert not changed[b][~mask[b]].any()  # padding untouched
        rows, cols = np.nonzero(changed[b])
        if rows.size:  # each kind covers at most its widest band / run
            full_rows = np.flatnonzero(changed[b][mask[b]].all(axis=1))
            full_cols = np.flatnonzero(changed[b][mask[b]].all(axis=0))
            assert full_rows.size <= 6 and full_cols.size <= 4
    again = np.asarray(augment.spec_augment(features, mask, jax.random.key(0), config))
    np.testing.assert_array_equal(out, again)


def test_no_masks_is_the_identity_and_masking_happens():
    features, mask = _features()
    none = augment.spec_augment(features, mask, jax.random.key(1), augment.MaskConfig())
    np.testing.assert_array_equal(np.asarray(none), features)
    many = augment.MaskConfig(freq_masks=4, max_freq_width=8, time_masks=4, max_time_width=20)
    out = np.asarray(
        jax.jit(augment.spec_augment, static_argnums=3)(features, mask, jax.random.key(1), many)
    )
    assert (out != features).mean() > 0.2


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="MaskConfig.time_masks"):
        augment.MaskConfig(time_masks=-1)


def test_mix_noise_adds_energy_at_the_asked_snr():
    features, mask = _features(batch=2, frames=400, bins=16)
    energy = np.exp(features)
    mean = np.array([energy[b][mask[b]].mean() for b in range(2)])
    quiet = np.asarray(augment.mix_noise(features, mask, jax.random.key(0), 80.0))
    np.testing.assert_allclose(quiet, features, atol=1e-3)  # 80 dB: almost nothing added
    snr_db = np.array([0.0, 10.0], np.float32)[:, None, None]
    noisy = np.asarray(jax.jit(augment.mix_noise)(features, mask, jax.random.key(0), snr_db))
    added = np.exp(noisy) - energy
    assert (added > 0).all()
    for b, expected in enumerate((1.0, 0.1)):  # noise energy / mean signal energy
        assert added[b][mask[b]].mean() / mean[b] == pytest.approx(expected, rel=0.05)


def test_vtlp_moves_a_formant_and_leaves_warp_one_alone():
    from cskws_jax.datasets.features import FEATURES

    features = np.random.default_rng(1).normal(size=(3, 4, 64)).astype(np.float32)
    same = np.asarray(augment.warp_mel_bands(features, np.ones(3, np.float32), FEATURES))
    np.testing.assert_allclose(same, features, atol=1e-4)
    peak = np.zeros((3, 1, 64), np.float32)
    peak[:, 0, 30] = 1.0  # one band's energy, as a formant there
    warped = np.asarray(
        jax.jit(augment.warp_mel_bands, static_argnums=2)(
            peak, np.array([0.85, 1.0, 1.15], np.float32), FEATURES
        )
    )
    centres = [np.sum(np.arange(64) * w[0]) / np.sum(w[0]) for w in warped]
    assert centres[0] < 29.5 and abs(centres[1] - 30) < 1e-3 and centres[2] > 30.5
    # A shorter vocal tract (warp > 1) raises frequencies: its formant sits higher.
    hz = np.interp(centres, np.arange(64), _centres_hz(FEATURES))
    np.testing.assert_allclose(hz[0] / hz[1], 0.85, rtol=0.03)
    np.testing.assert_allclose(hz[2] / hz[1], 1.15, rtol=0.03)


def _centres_hz(config):
    from speechkit import frontend

    low, high = frontend.hz_to_mel(config.lower_hz), frontend.hz_to_mel(config.upper)
    return frontend.mel_to_hz(low + (high - low) * np.arange(1, 65) / 65)


def test_random_eq_is_smooth_bounded_and_per_example():
    features, _ = _features(batch=4, frames=6, bins=64)
    out = np.asarray(augment.random_eq(features, jax.random.key(0), 6.0))
    curve_db = (out - features) * 10 / np.log(10)
    assert np.abs(curve_db).max() <= 6.0 + 1e-4 and np.abs(curve_db).max() > 0.5
    np.testing.assert_allclose(curve_db, curve_db[:, :1].repeat(6, axis=1), atol=1e-4)
    assert not np.allclose(curve_db[0], curve_db[1])  # each example its own curve
    assert np.abs(np.diff(curve_db[:, 0], axis=-1)).max() < 1.0  # smooth across bands
