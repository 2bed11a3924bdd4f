"""Early question frames (MultiQT): how much of a tracker's output for a question comes
before that question is spoken at all.

Entry points: `early_frames` (the share per class and overall), `early_frame_counts` and
`early_frames_from_counts` (int32 counts that add over batches). Inputs as the sequence
metrics (`metrics.sequence`): int `[B, T]` pred and gold, bool `[B, T]` mask, one call
per row; `hop_s` and `margin_s` are static. Pure, jittable and vmappable.

    early = early_frames(pred, gold, mask, num_classes=7, hop_s=0.04, margin_s=0.5)
    early.share, early.overall

Specification (definition, edge cases, precision, a worked example): docs/metrics.md,
"Early question frames". Labels outside [0, num_classes) belong to no class;
`metrics.checked` makes them an error.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from metrics import _validate, sequence
from metrics.detection import _rounded_ratio

# A ratio margin_s / hop_s this close to a whole number is that number: 0.07 / 0.01 is
# 7.000000000000001 in float64, and 0.07 s at 10 ms is meant as exactly 7 frames.
_WHOLE_FRAMES_TOLERANCE = 1e-9


class EarlyFrameCounts(NamedTuple):
    """Per-class frame counts, int32 [..., num_classes]; 0 at the background class.

    early: valid frames predicted as the class more than the margin before its onset in
      their call (every such frame where the call never has the class).
    predicted: valid frames predicted as the class.
    """

    early: jax.Array
    predicted: jax.Array

    __add__ = sequence._add_counts


class EarlyFrames(NamedTuple):
    """Shares of early frames (float32) and the counts they come from.

    share: [..., num_classes], early / predicted per class; 0 where the class has no
      predicted frame, and at the background class.
    overall: [...], all early frames / all predicted frames of the non-background
      classes; 0 when there are none.
    counts: the `EarlyFrameCounts` (sum them to pool batches, then `early_frames_from_counts`).
    """

    share: jax.Array
    overall: jax.Array
    counts: EarlyFrameCounts


def margin_frames(margin_s: float, hop_s: float) -> int:
    """The largest lead over the onset, in whole frames, that is not early:
    floor(margin_s / hop_s), the ratio taken as a whole number when within 1e-9 of one
    (relative, for ratios above 1). A frame `lead` frames before the onset is early iff
    lead > margin_frames."""
    margin_s = _validate.require_seconds("margin_s", margin_s, positive=False)
    hop_s = _validate.require_seconds("hop_s", hop_s, positive=True)
    ratio = margin_s / hop_s
    if not math.isfinite(ratio):
        raise ValueError(f"margin_s / hop_s: expected a finite ratio, got {ratio}")
    nearest = round(ratio)
    if abs(ratio - nearest) <= _WHOLE_FRAMES_TOLERANCE * max(1.0, ratio):
        return int(nearest)
    return math.floor(ratio)


def early_frame_counts(
    pred, gold, mask, *, num_classes: int, hop_s: float, margin_s: float = 0.5, background: int = 0
) -> EarlyFrameCounts:
    """Per-class early and predicted frame counts, summed over the calls of the batch.

    Args:
      pred, gold: int [B, T] class ids per frame, one call per row; mask: bool [B, T].
      num_classes: static number of classes (background included), >= 2.
      hop_s: static seconds per frame (> 0), the clock of `pred` and `gold`.
      margin_s: static seconds (>= 0) a prediction may lead the spoken onset by.
      background: static class id that is not a question (never counted).

    Returns:
      `EarlyFrameCounts` of int32 [num_classes] arrays.
    """
    sequence._check_sequences(pred, gold, mask)
    num_classes = sequence._require_num_classes(num_classes)
    background = _validate.require_class_index("background", background, num_classes)
    lead = margin_frames(margin_s, hop_s)
    length = _validate.shape_and_dtype("gold", gold)[0][1]
    return _early_frame_counts(
        jnp.asarray(pred),
        jnp.asarray(gold),
        jnp.asarray(mask),
        num_classes=num_classes,
        background=background,
        lead=min(lead, length),  # a larger margin makes no spoken question's frame early
    )


# Checked arguments, then one jitted program: see `metrics.sequence._joint_histogram`.
@functools.partial(jax.jit, static_argnames=("num_classes", "background", "lead"))
def _early_frame_counts(pred, gold, mask, *, num_classes, background, lead) -> EarlyFrameCounts:
    """`early_frame_counts` of checked arguments; `lead` = min(margin_frames, T)."""
    batch, length = gold.shape
    frame = jnp.arange(length, dtype=jnp.int32)
    onset = _onsets(gold, mask, num_classes, never=length + lead)  # [B, C + 1]
    pred_class = jnp.where(mask, sequence._in_range(pred, num_classes), num_classes)
    counted = (pred_class != num_classes) & (pred_class != background)
    onset_of_pred = jnp.take_along_axis(onset, pred_class, axis=1)  # [B, T]
    early = counted & (onset_of_pred - frame > lead)
    return EarlyFrameCounts(
        early=_class_totals(pred_class, early, num_classes),
        predicted=_class_totals(pred_class, counted, num_classes),
    )


def _onsets(gold, mask, num_classes: int, never: int) -> jax.Array:
    """int32 [B, C + 1]: each call's first valid frame of each class, `never` where the
    call has none; column C (out-of-range and masked frames) is not a class."""
    batch, length = gold.shape
    gold_class = jnp.where(mask, sequence._in_range(gold, num_classes), num_classes)
    frame = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (batch, length))
    rows = jnp.arange(batch)[:, None]
    return jnp.full((batch, num_classes + 1), never, jnp.int32).at[rows, gold_class].min(frame)


def _class_totals(classes, flags, num_classes: int) -> jax.Array:
    """int32 [C]: how many frames of each class (classes int [B, T] in 0..C) are flagged."""
    totals = jnp.zeros(num_classes + 1, jnp.int32).at[classes.reshape(-1)]
    return totals.add(flags.reshape(-1).astype(jnp.int32))[:num_classes]


def _share(early, predicted) -> jax.Array:
    """early / predicted as a correctly rounded float32; 0 where predicted is 0."""
    has_frames = predicted > 0
    ratio = _rounded_ratio(early.astype(jnp.float32), jnp.maximum(predicted, 1).astype(jnp.float32))
    return jnp.where(has_frames, ratio, 0.0)


def early_frames_from_counts(counts: EarlyFrameCounts) -> EarlyFrames:
    """Shares from (possibly summed) counts, int [..., num_classes]; see `EarlyFrames`."""
    if not isinstance(counts, EarlyFrameCounts):
        raise TypeError(f"counts: expected EarlyFrameCounts, got {type(counts).__name__}")
    return _from_counts(EarlyFrameCounts(*(jnp.asarray(c, jnp.int32) for c in counts)))


# One program per shape: op by op, the few operations would each compile on their own
# wherever results are scored (once per fold, stream and split).
@jax.jit
def _from_counts(counts: EarlyFrameCounts) -> EarlyFrames:
    early, predicted = counts
    overall = _share(early.sum(-1), predicted.sum(-1))  # background counts are 0
    return EarlyFrames(_share(early, predicted), overall, EarlyFrameCounts(early, predicted))


def early_frames(
    pred, gold, mask, *, num_classes: int, hop_s: float, margin_s: float = 0.5, background: int = 0
) -> EarlyFrames:
    """Early question frames: per class, the share of its predicted frames that come more
    than `margin_s` seconds before the class is first spoken in their call (all of them
    where it never is), counts summed over the batch; and over all non-background classes.

    Args: as `early_frame_counts`.

    Returns:
      `EarlyFrames`: share float32 [num_classes], overall float32 [], and the int32
      counts (0 shares where a class has no predicted frame, and at the background).
    """
    counts = early_frame_counts(
        pred,
        gold,
        mask,
        num_classes=num_classes,
        hop_s=hop_s,
        margin_s=margin_s,
        background=background,
    )
    return early_frames_from_counts(counts)
