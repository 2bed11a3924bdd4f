"""Feature-domain augmentation of log-mel features, for both tasks' models.

    masked = spec_augment(features, mask, rng, MaskConfig(freq_masks=2, time_masks=2))
    noisy = mix_noise(features, mask, rng, snr_db=10.0)

`mix_noise` adds white-ish noise in the mel energy domain (features are natural-log mel
energies, `speechkit.frontend`) at an SNR relative to each example's mean energy over its
valid frames and bins; CS-KWS training draws it per crop, the studies sweep it at test
time (`experiments.studies`). It approximates noise added to the waveform: energies add
in expectation, the cross terms are left out, and the noise is not filtered by the
channel the stored features went through.

Bands of mel bins and runs of frames are set to each example's mean log-mel over its
valid frames (a neutral level, not silence). Widths are drawn uniformly from
[0, max width] and positions anywhere, per example; 0 masks of a kind draw nothing of
that kind. Jittable; `rng` is a JAX PRNG key.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from speechkit import checks


@dataclasses.dataclass(frozen=True)
class MaskConfig:
    freq_masks: int = 0  # masked bands per example
    max_freq_width: int = 8  # mel bins
    time_masks: int = 0  # masked runs per example
    max_time_width: int = 20  # frames

    def __post_init__(self):
        for field in dataclasses.fields(self):
            checks.require_int(f"MaskConfig.{field.name}", getattr(self, field.name), at_least=0)


def _masked_runs(rng, batch: int, length: int, count: int, max_width: int):
    """bool [batch, length]: `count` runs per row, widths in [0, max_width], anywhere."""
    width_key, start_key = jax.random.split(rng)
    widths = jax.random.randint(width_key, (batch, count, 1), 0, max_width + 1)
    starts = jax.random.randint(start_key, (batch, count, 1), 0, length)
    positions = jnp.arange(length)[None, None, :]
    return jnp.any((positions >= starts) & (positions < starts + widths), axis=1)


def spec_augment(features, mask, rng, config: MaskConfig):
    """features float [B, T, F] log-mel, mask bool [B, T] -> masked features (same shape;
    frames outside `mask` are left as they are)."""
    batch, frames, bins = features.shape
    valid = mask[..., None].astype(features.dtype)
    fill = jnp.sum(features * valid, axis=(1, 2), keepdims=True) / jnp.maximum(
        jnp.sum(valid, axis=(1, 2), keepdims=True) * bins, 1.0
    )
    freq_key, time_key = jax.random.split(rng)
    masked = jnp.zeros((batch, frames, bins), bool)
    if config.freq_masks:
        bands = _masked_runs(freq_key, batch, bins, config.freq_masks, config.max_freq_width)
        masked = masked | bands[:, None, :]
    if config.time_masks:
        runs = _masked_runs(time_key, batch, frames, config.time_masks, config.max_time_width)
        masked = masked | runs[:, :, None]
    return jnp.where(masked & mask[..., None], fill, features)


def mix_noise(features, mask, rng, snr_db):
    """features float [B, T, F] log-mel, mask bool [B, T], snr_db float broadcastable to
    [B, 1, 1] (dB) -> log(energy + noise) [B, T, F], where each bin's noise energy is
    exponential (chi-square, 2 degrees of freedom) around mean_energy * 10^(-snr_db / 10)
    and mean_energy is the example's mean energy over its valid frames and bins. Frames
    outside `mask` get noise too (callers mask them)."""
    energy = jnp.exp(features)
    valid = mask[..., None].astype(features.dtype)
    cells = jnp.sum(valid, axis=(1, 2), keepdims=True) * features.shape[-1]  # frames x bins
    mean_energy = jnp.sum(energy * valid, axis=(1, 2), keepdims=True) / jnp.maximum(cells, 1.0)
    snr_db = jnp.asarray(snr_db, features.dtype)
    noise = jax.random.exponential(rng, features.shape) * mean_energy * 10 ** (-snr_db / 10)
    return jnp.log(energy + noise)
