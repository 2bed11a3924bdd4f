"""Classification losses both tasks train with.

loss = cross_entropy(logits, labels, mask, class_weights)   # a float32 scalar
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def cross_entropy(logits, labels, mask, class_weights=None) -> jax.Array:
    """Softmax cross-entropy of integer labels, the weighted mean over the valid rows.

    Args:
      logits: float [..., C] (computed in float32).
      labels: int [...] class ids in [0, C).
      mask: bool or float [...]: a row's weight (False / 0: left out).
      class_weights: optional float [C]: a row of class c also weighs class_weights[c].

    Returns:
      float32 scalar: sum(loss * weight) / sum(weight); 0 when every weight is 0.
    """
    per_row = optax.softmax_cross_entropy_with_integer_labels(
        jnp.asarray(logits).astype(jnp.float32), labels
    )
    weights = jnp.asarray(mask).astype(jnp.float32)
    if class_weights is not None:
        weights = weights * jnp.asarray(class_weights, jnp.float32)[labels]
    return jnp.sum(per_row * weights) / jnp.maximum(jnp.sum(weights), 1e-9)
