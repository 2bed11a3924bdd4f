"""SpecAugment-style masking of log-mel features, for training both tasks' models.

    masked = spec_augment(features, mask, rng, MaskConfig(freq_masks=2, time_masks=2))

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
