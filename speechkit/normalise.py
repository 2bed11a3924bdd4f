"""Causal per-band normalisation of log-mel features, whole or block by block.

Normalising each band by a running estimate of its own level removes the training
channel's and speakers' spectral balance. The kinds (`KINDS`) are "none", "cmn" (mean),
"cmvn" (mean and variance) and "pcen" (per-channel energy normalisation). Every kind is
causal, so a streaming model runs it with a carried state, and stepping blocks of any
length from `initial_state` gives the values of one call over the whole sequence.

    config = NormaliseConfig("cmvn", time_s=2.0)
    state = initial_state(config, batch_size, bands)
    out, state = normalise_features(config, features, mask, state, hop_s=0.01)

The formulas and the running means: docs/speechkit.md, "normalise".
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from speechkit import checks

KINDS = ("none", "cmn", "cmvn", "pcen")
VARIANCE_FLOOR = 1e-3  # (log-mel)^2: keeps a silent band's scale bounded
PCEN_ALPHA, PCEN_DELTA, PCEN_ROOT, PCEN_EPSILON = 0.98, 2.0, 0.5, 1e-6


@dataclasses.dataclass(frozen=True)
class NormaliseConfig:
    kind: str = "none"  # one of KINDS
    time_s: float = 2.0  # time constant of the running means, seconds

    def __post_init__(self):
        checks.require_choice("NormaliseConfig.kind", self.kind, KINDS)
        checks.require_number("NormaliseConfig.time_s", self.time_s, above=0)


def initial_state(config: NormaliseConfig, batch_size: int, bands: int) -> dict:
    """{"count": int32 [B] valid frames seen, "first": float32 [B, bands] the running
    mean (of x, or of the energy for "pcen"), and for "cmvn" "second": that of x^2};
    {} for "none"."""
    if config.kind == "none":
        return {}
    zeros = jnp.zeros((batch_size, bands), jnp.float32)
    state = {"count": jnp.zeros((batch_size,), jnp.int32), "first": zeros}
    if config.kind == "cmvn":
        state["second"] = zeros
    return state


def _running_means(config: NormaliseConfig, values: dict, mask, state, hop_s: float):
    """values {name: float32 [B, T, F]} (the quantities averaged), mask bool [B, T] ->
    ({name: running means [B, T, F] after each frame}, the state after the last one).
    A sequential scan: on CPU faster than a parallel prefix scan at these lengths, and
    the same operations in the same order however the frames come in blocks."""
    rate = min(1.0, hop_s / config.time_s)

    def frame(carry, inputs):
        count, means = carry
        value, valid = inputs
        count = count + valid.astype(jnp.int32)
        weight = jnp.where(valid, jnp.maximum(1.0 / jnp.maximum(count, 1), rate), 0.0)
        means = {k: m + weight[:, None] * (value[k] - m) for k, m in means.items()}
        return (count, means), means

    start = (state["count"], {name: state[name] for name in values})
    time_major = {name: jnp.moveaxis(value, 1, 0) for name, value in values.items()}
    (count, last), history = jax.lax.scan(frame, start, (time_major, jnp.moveaxis(mask, 1, 0)))
    means = {name: jnp.moveaxis(value, 0, 1) for name, value in history.items()}
    return means, {"count": count, **last}


def normalise_features(config: NormaliseConfig, features, mask, state: dict, *, hop_s: float):
    """features float [B, T, F] log-mel, mask bool [B, T], state from `initial_state` or
    the previous block -> (normalised float32 [B, T, F], the new state). Invalid frames
    come back unchanged."""
    features = jnp.asarray(features, jnp.float32)
    if config.kind == "none":
        return features, state
    if config.kind == "pcen":
        values = {"first": jnp.exp(features)}
    elif config.kind == "cmvn":
        values = {"first": features, "second": features**2}
    else:
        values = {"first": features}
    means, state = _running_means(config, values, mask, state, hop_s)
    first = means["first"]
    if config.kind == "cmn":
        out = features - first
    elif config.kind == "cmvn":
        variance = jnp.maximum(means["second"] - first**2, 0.0)
        out = (features - first) * jax.lax.rsqrt(variance + VARIANCE_FLOOR)
    else:
        gain = jnp.exp(features - PCEN_ALPHA * jnp.log(first + PCEN_EPSILON))
        out = (gain + PCEN_DELTA) ** PCEN_ROOT - PCEN_DELTA**PCEN_ROOT
    return jnp.where(mask[..., None], out, features), state
