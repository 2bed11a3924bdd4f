"""AF-KWS training targets from padded keyword lists: pure jnp, jittable, vmappable.

For a word (start, end in seconds, class c) and output frames of `hop_s` seconds:
  centre   u = (start + end) / 2 / hop_s   (output frames, real-valued)
  frame    i = floor(u), offset u - i in [0, 1), length (end - start) / hop_s frames
  heatmap  [t, c] = max over the class's words of exp(-(t - i)^2 / (2 sigma^2)),
           sigma = max(length * sigma_per_length, min_sigma): wider for longer words,
           exactly 1 at each centre frame
  length, offset, centre_mask at the centre frames; where two words share a centre frame
  the later one in the list keeps it (both still peak in the heatmap).
Words outside the class range (e.g. the unknown class in the ablation) are dropped.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def centre_targets(
    start,
    end,
    label,
    valid,
    *,
    num_frames: int,
    num_classes: int,
    hop_s: float,
    sigma_per_length: float = 1 / 6,
    min_sigma: float = 0.5,
) -> dict[str, jax.Array]:
    """Targets for one example.

    Args:
      start, end: float [G] seconds; label: int [G]; valid: bool [G] (padded word list).
      num_frames, num_classes, hop_s: static; the output clock and the heatmap classes.

    Returns:
      heatmap float32 [num_frames, num_classes]; length float32 [num_frames] (output
      frames); offset float32 [num_frames]; centre_mask bool [num_frames]; count int32
      (words whose centre lies inside the frames).
    """
    start, end = jnp.asarray(start, jnp.float32), jnp.asarray(end, jnp.float32)
    label = jnp.asarray(label, jnp.int32)
    centre = (start + end) / 2 / hop_s
    frame = jnp.floor(centre).astype(jnp.int32)
    length = (end - start) / hop_s
    keep = (
        jnp.asarray(valid, bool)
        & (label >= 0)
        & (label < num_classes)
        & (frame >= 0)
        & (frame < num_frames)
        & (end > start)
    )
    sigma = jnp.maximum(length * sigma_per_length, min_sigma)
    times = jnp.arange(num_frames, dtype=jnp.float32)
    bumps = jnp.exp(-((times[None, :] - frame[:, None]) ** 2) / (2 * sigma[:, None] ** 2))
    bumps = jnp.where(keep[:, None], bumps, 0.0)  # [G, T]
    one_hot = jax.nn.one_hot(label, num_classes, dtype=jnp.float32) * keep[:, None]  # [G, C]
    heatmap = jnp.max(bumps[:, :, None] * one_hot[:, None, :], axis=0, initial=0.0)
    target_frame = jnp.where(keep, frame, num_frames)  # out of range: dropped
    heatmap = heatmap.at[target_frame, jnp.clip(label, 0, num_classes - 1)].max(1.0, mode="drop")
    # The later word wins a shared centre frame (a deterministic scatter-max of indices).
    winner = (
        jnp.full(num_frames, -1, jnp.int32)
        .at[target_frame]
        .max(jnp.arange(label.shape[0], dtype=jnp.int32), mode="drop")
    )
    centre_mask = winner >= 0
    chosen = jnp.maximum(winner, 0)
    length_target = jnp.where(centre_mask, length[chosen], 0.0)
    offset_target = jnp.where(centre_mask, (centre - frame)[chosen], 0.0)
    return {
        "heatmap": heatmap,
        "length": length_target,
        "offset": offset_target,
        "centre_mask": centre_mask,
        "count": jnp.sum(keep).astype(jnp.int32),
    }


def batch_targets(batch, *, num_frames: int, num_classes: int, hop_s: float, **kwargs):
    """`centre_targets` over a batch's padded [B, E] start / end / label / valid."""
    valid = batch["valid"] & batch["example_mask"][:, None]
    one = functools.partial(
        centre_targets, num_frames=num_frames, num_classes=num_classes, hop_s=hop_s, **kwargs
    )
    return jax.vmap(one)(batch["start"], batch["end"], batch["label"], valid)
