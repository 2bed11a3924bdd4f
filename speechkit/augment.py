"""Feature-domain augmentation of log-mel features, for both tasks' models.

    masked = spec_augment(features, mask, rng, MaskConfig(freq_masks=2, time_masks=2))
    noisy = mix_noise(features, mask, rng, snr_db=10.0)

`spec_augment` masks bands of mel bins and runs of frames, `mix_noise` adds noise at an
SNR in the mel energy domain, and `warp_mel_bands` (VTLP) and `random_eq` change the
speaker and the channel. Jittable; `rng` is a JAX PRNG key. What each draws and how:
docs/speechkit.md, "augment".
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from speechkit import checks, frontend

VTLP_BOUNDARY_HZ = 4800.0  # VTLP's warp is linear below this, then meets Nyquist


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


def _band_positions(hz, config: frontend.FeatureConfig):
    """Fractional mel-band index of frequencies `hz` under `config`'s filterbank (band i
    is centred at position i; the centres are uniform on the HTK mel scale)."""
    low, high = frontend.hz_to_mel(config.lower_hz), frontend.hz_to_mel(config.upper)
    step = (high - low) / (config.num_mels + 1)
    mel = 2595.0 * jnp.log10(1.0 + hz / 700.0)
    return (mel - low) / step - 1.0


def warp_mel_bands(features, warp, config: frontend.FeatureConfig):
    """features float [B, T, F] log-mel of `config`'s filterbank, warp float [B] (factors
    around 1) -> the features of a speaker whose frequencies are `warp` times these:
    VTLP's piecewise-linear map f -> warp x f up to VTLP_BOUNDARY_HZ x min(1, warp) / warp,
    then straight to Nyquist (which stays put). Each band takes the log-mel interpolated
    at its source frequency; bands beyond the edges repeat the edge band."""
    bands = config.num_mels
    nyquist = config.upper
    low, high = frontend.hz_to_mel(config.lower_hz), frontend.hz_to_mel(nyquist)
    centres = jnp.asarray(
        frontend.mel_to_hz(low + (high - low) * np.arange(1, bands + 1) / (bands + 1)),
        jnp.float32,
    )
    warp = jnp.asarray(warp, jnp.float32)[:, None]
    knee = VTLP_BOUNDARY_HZ * jnp.minimum(warp, 1.0) / warp  # source frequency of the knee
    above = knee + (centres - warp * knee) * (nyquist - knee) / (nyquist - warp * knee)
    source = jnp.where(centres <= warp * knee, centres / warp, above)  # [B, F]
    position = jnp.clip(_band_positions(source, config), 0.0, bands - 1.0)
    below = jnp.floor(position).astype(jnp.int32)
    upper = jnp.minimum(below + 1, bands - 1)
    share = (position - below)[:, None, :]
    take = jax.vmap(lambda f, i: f[:, i])  # per example: [T, F] at band indices [F]
    return (1.0 - share) * take(features, below) + share * take(features, upper)


def random_eq(features, rng, max_db: float, components: int = 4):
    """features float [B, T, F] natural-log mel energies -> the same with a random smooth
    gain curve per example added: a sum of `components` cosines across the bands with
    amplitudes drawn uniformly so the curve stays within +-`max_db` dB."""
    bands = features.shape[-1]
    k = jnp.arange(1, components + 1)[:, None]
    basis = jnp.cos(jnp.pi * k * (jnp.arange(bands) + 0.5) / bands)  # [K, F]
    limit = max_db / components
    amplitude = jax.random.uniform(
        rng, (features.shape[0], components), minval=-limit, maxval=limit
    )
    curve_db = amplitude @ basis  # [B, F], |curve| <= max_db
    return features + (curve_db * jnp.log(10.0) / 10)[:, None, :]
