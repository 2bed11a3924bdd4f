"""AF-KWS losses (CenterNet's, in 1-D): pure jnp, masked, normalised by keyword count.

  heatmap  penalty-reduced focal loss (alpha 2, beta 4): at centre frames (target 1)
           -(1 - p)^alpha log p; elsewhere -(1 - y)^beta p^alpha log(1 - p)
  length   L1 at centre frames (weight 0.1), in output frames
  offset   L1 at centre frames (weight 1)
Each term is summed over valid frames and divided by max(1, number of centres).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class LossConfig:
    alpha: float = 2.0
    beta: float = 4.0
    length_weight: float = 0.1
    offset_weight: float = 1.0


def focal_loss(logits, target, mask, alpha: float = 2.0, beta: float = 4.0):
    """Summed penalty-reduced focal loss: logits, target float [..., T, C]; mask bool
    [..., T]. Positives are target == 1. Computed from logits (log-sigmoid) for
    stability."""
    log_p = jax.nn.log_sigmoid(logits)
    log_not_p = jax.nn.log_sigmoid(-logits)
    p = jnp.exp(log_p)
    positive = target >= 1.0
    positive_loss = -((1 - p) ** alpha) * log_p
    negative_loss = -((1 - target) ** beta) * (p**alpha) * log_not_p
    per_cell = jnp.where(positive, positive_loss, negative_loss)
    return jnp.sum(per_cell * mask[..., None])


def detection_loss(heads, mask, targets, config: LossConfig = LossConfig()):
    """Total loss and its parts for model heads (heatmap logits [B, T, C], length, offset
    [B, T]), their mask bool [B, T] and `targets.batch_targets` of the same frames."""
    centres = targets["centre_mask"] & mask
    count = jnp.maximum(jnp.sum(centres), 1).astype(jnp.float32)
    heatmap = (
        focal_loss(heads["heatmap"], targets["heatmap"], mask, config.alpha, config.beta) / count
    )
    length = jnp.sum(jnp.abs(heads["length"] - targets["length"]) * centres) / count
    offset = jnp.sum(jnp.abs(heads["offset"] - targets["offset"]) * centres) / count
    total = heatmap + config.length_weight * length + config.offset_weight * offset
    return total, {"heatmap": heatmap, "length": length, "offset": offset}
