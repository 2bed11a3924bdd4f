"""AF-KWS losses (CenterNet's, in 1-D): pure jnp, masked, normalised by keyword count.

  heatmap  penalty-reduced focal loss (alpha 2, beta 4): at centre frames (target 1)
           -(1 - p)^alpha log p; elsewhere -(1 - y)^beta p^alpha log(1 - p)
  length   L1 at centre frames (weight 0.1), in output frames
  offset   L1 at centre frames (weight 1)
Each term is summed over valid frames and divided by max(1, number of centres): of every
word (`LossConfig.count` "all", the default) or of the keywords alone ("keywords"). With
the unknown class (every other word, about ten times as many centres as the keywords),
"all" scales the keywords' share of the loss down by that ratio; `unknown_weight` scales
the unknown class's heatmap terms.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from speechkit import checks


@dataclasses.dataclass(frozen=True)
class LossConfig:
    alpha: float = 2.0
    beta: float = 4.0
    length_weight: float = 0.1
    offset_weight: float = 1.0
    unknown_weight: float = 1.0  # the unknown class's heatmap terms (a model with one)
    count: str = "all"  # the centres each term is divided by: "all" words or "keywords"

    def __post_init__(self):
        checks.require_number("LossConfig.unknown_weight", self.unknown_weight, at_least=0)
        checks.require_choice("LossConfig.count", self.count, ("all", "keywords"))


def focal_loss(logits, target, mask, alpha: float = 2.0, beta: float = 4.0, weights=None):
    """Summed penalty-reduced focal loss: logits, target float [..., T, C]; mask bool
    [..., T]; weights float [C] per class (None: all 1). Positives are target == 1.
    Computed from logits (log-sigmoid) for stability."""
    log_p = jax.nn.log_sigmoid(logits)
    log_not_p = jax.nn.log_sigmoid(-logits)
    p = jnp.exp(log_p)
    positive = target >= 1.0
    positive_loss = -((1 - p) ** alpha) * log_p
    negative_loss = -((1 - target) ** beta) * (p**alpha) * log_not_p
    per_cell = jnp.where(positive, positive_loss, negative_loss)
    if weights is not None:
        per_cell = per_cell * weights
    return jnp.sum(per_cell * mask[..., None])


def detection_loss(
    heads, mask, targets, config: LossConfig = LossConfig(), num_keywords: int | None = None
):
    """Total loss and its parts for model heads (heatmap logits [B, T, C], length, offset
    [B, T]), their mask bool [B, T] and `targets.batch_targets` of the same frames. Classes
    from `num_keywords` on are the unknown class (None: C, no unknown class)."""
    classes = heads["heatmap"].shape[-1]
    keywords = classes if num_keywords is None else num_keywords
    centres = targets["centre_mask"] & mask
    counted = centres
    if config.count == "keywords":
        counted = centres & jnp.any(targets["heatmap"][..., :keywords] >= 1.0, axis=-1)
    count = jnp.maximum(jnp.sum(counted), 1).astype(jnp.float32)
    weights = None
    if config.unknown_weight != 1.0 and keywords < classes:
        weights = jnp.where(jnp.arange(classes) < keywords, 1.0, config.unknown_weight)
    heatmap = (
        focal_loss(heads["heatmap"], targets["heatmap"], mask, config.alpha, config.beta, weights)
        / count
    )
    length = jnp.sum(jnp.abs(heads["length"] - targets["length"]) * centres) / count
    offset = jnp.sum(jnp.abs(heads["offset"] - targets["offset"]) * centres) / count
    total = heatmap + config.length_weight * length + config.offset_weight * offset
    return total, {"heatmap": heatmap, "length": length, "offset": offset}
