"""Latency metrics: how long after the truth a streaming system reports it.

Definitions: `docs/metrics.md`, section "Latency".

- `tracking_latency` (MultiQT): for each gold instance that INSTANCE recall counts as
  found, the frames from its onset to the first frame inside it labelled with its class.
- `detection_latency` (CS-KWS): for each ground truth matched at an IoU threshold (the
  greedy matching of `detection_scores`), the emission time of the detection that took it
  minus the ground truth's end, in seconds.
- `latency_summary`: count, mean, median and 90th percentile over the valid entries.

Per-item results are padded arrays with a `valid` flag. Everything is pure and jittable
(sizes, class counts, thresholds are static) and vmappable.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from metrics import _validate, detection, sequence


class TrackingLatencies(NamedTuple):
    """Per gold instance, [B, M]: slot k of row b is example b's k-th gold instance by onset.

    latency: int32 frames from the onset to the first frame inside the instance where pred
      is its class; 0 where not `valid`. Seconds: `latency * hop_s` (the label frame hop).
    valid: bool, the slot holds a gold instance that is found (the INSTANCE recall rule).
    instance: bool, the slot holds a gold instance, found or not.
    onset: int32 first frame of the instance, -1 in an empty slot.
    label: int32 class of the instance, -1 in an empty slot.
    """

    latency: jax.Array
    valid: jax.Array
    instance: jax.Array
    onset: jax.Array
    label: jax.Array


class DetectionLatencies(NamedTuple):
    """Per ground truth, [B, G] like the ground truth.

    latency: float32 seconds, emission time of the matching detection minus the ground
      truth's end (negative when emitted before the end); 0 where not `valid`.
    valid: bool, the ground truth is evaluated and matched.
    detection: int32 index in its example's row of the detection that matched it, -1 if none.
    """

    latency: jax.Array
    valid: jax.Array
    detection: jax.Array


class LatencySummary(NamedTuple):
    """Statistics over the valid latencies: `count` int32, the rest float32 (NaN if count 0)."""

    count: jax.Array
    mean: jax.Array
    median: jax.Array
    p90: jax.Array


def _scatter(fill, dtype, shape, slot, values, op="set") -> jax.Array:
    """`fill` [B, M] with values [B, T] scattered by `op` into columns slot [B, T];
    slots >= M are dropped."""
    rows = jnp.arange(slot.shape[0])[:, None]
    target = getattr(jnp.full(shape, fill, dtype).at[rows, slot], op)
    return target(values, mode="drop")


def tracking_latency(
    pred,
    gold,
    mask,
    *,
    num_classes: int,
    background: int = 0,
    min_run: int = 5,
    max_instances: int | None = None,
) -> TrackingLatencies:
    """Onset-to-first-correct-frame latency of each found gold instance.

    Instances and "found" are those of `instance_counts` (same arguments): a gold instance
    of class c is found when pred is c on >= `min_run` consecutive frames inside it. Its
    latency is `t - onset` for the first frame t of the instance with pred = c (which may
    lie before the run that makes it found). Gold runs of labels outside [0, num_classes)
    are no instance and take no slot.

    Args:
      pred, gold: int [B, T] class ids; mask: bool [B, T].
      num_classes: static, >= 2. background: static class id. min_run: static, >= 1.
      max_instances: static slots per example M (default T, which always suffices);
        instances after the first M of an example are dropped.

    Returns:
      `TrackingLatencies` of [B, M] arrays.
    """
    sequence._check_sequences(pred, gold, mask)
    num_classes = _validate.require_int_at_least("num_classes", num_classes, 2)
    background = _validate.require_class_index("background", background, num_classes)
    min_run = _validate.require_int_at_least("min_run", min_run, 1)
    slots = _validate.shape_and_dtype("gold", gold)[0][1]  # default: T
    if max_instances is not None:
        slots = _validate.require_int_at_least("max_instances", max_instances, 0)
    return _tracking_latency(
        pred,
        gold,
        mask,
        num_classes=num_classes,
        background=background,
        min_run=min_run,
        slots=slots,
    )


# Checked arguments, then one jitted program: see `metrics.sequence._joint_histogram`.
@functools.partial(jax.jit, static_argnames=("num_classes", "background", "min_run", "slots"))
def _tracking_latency(pred, gold, mask, *, num_classes, background, min_run, slots):
    """`tracking_latency` of checked arguments, `slots` per example."""
    batch, length = gold.shape
    starts, _, qualifies = sequence._run_events(
        gold, mask & (pred == gold), mask, background=background, min_run=min_run
    )
    of_a_class = (gold >= 0) & (gold < num_classes)
    member = mask & (gold != background) & of_a_class  # frames of gold instances
    onset_frame = starts & of_a_class
    index = jnp.cumsum(onset_frame, axis=1, dtype=jnp.int32) - 1  # instance of each member
    frame = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (batch, length))
    shape = (batch, slots)

    def slot_where(condition):  # the instance's slot where condition holds, else dropped
        return jnp.where(condition, index, slots)

    onset = _scatter(-1, jnp.int32, shape, slot_where(onset_frame), frame)
    label = _scatter(-1, jnp.int32, shape, slot_where(onset_frame), gold.astype(jnp.int32))
    correct = member & (pred == gold)
    first_correct = _scatter(length, jnp.int32, shape, slot_where(correct), frame, "min")
    found = _scatter(False, bool, shape, slot_where(member & qualifies), True)
    latency = jnp.where(found, first_correct - onset, 0)
    return TrackingLatencies(latency, found, onset >= 0, onset, label)


def _check_emitted(emitted, detections) -> None:
    shape, _ = _validate.shape_and_dtype("emitted", emitted)
    expected, _ = _validate.shape_and_dtype("detections['score']", detections["score"])
    if shape != expected:
        raise ValueError(f"emitted: shape {shape} does not match detections shape {expected}")
    _validate.require_dtype("emitted", emitted, "float")


def detection_latency(
    detections: Mapping[str, jax.Array],
    emitted,
    ground_truth: Mapping[str, jax.Array],
    *,
    num_classes: int,
    iou: float = 0.05,
    ignore_classes: Sequence[int] = (),
) -> DetectionLatencies:
    """Emission time of the matching detection minus the ground truth's end, per ground truth.

    The matching is that of `detection_scores` at the single threshold `iou` (the one behind
    FRR at `frr_iou = iou`, and `pooled_matches`).

    Args:
      detections, ground_truth, num_classes, ignore_classes: as `detection_scores`.
      emitted: float [B, D] seconds at which each detection was emitted, on the clock of
        the detection and ground-truth times (what `cskws_jax.streaming.StreamDetector.detect`
        returns next to its detections).
      iou: the matching threshold in (0, 1], default 0.05.

    Returns:
      `DetectionLatencies` of [B, G] arrays.
    """
    detections, ground_truth, num_classes, ignore_classes = detection._checked(
        detections, ground_truth, num_classes, ignore_classes
    )
    _check_emitted(emitted, detections)
    (iou,) = _validate.require_thresholds("iou", (iou,))
    return _detection_latency(
        detections,
        emitted,
        ground_truth,
        num_classes=num_classes,
        iou=iou,
        ignore_classes=ignore_classes,
    )


@functools.partial(jax.jit, static_argnames=("num_classes", "iou", "ignore_classes"))
def _detection_latency(detections, emitted, ground_truth, *, num_classes, iou, ignore_classes):
    """`detection_latency` of checked arguments (see `_tracking_latency`)."""
    detections, ground_truth, det_eval, gt_eval = detection._prepared(
        detections, ground_truth, num_classes, ignore_classes
    )
    score = detections["score"].reshape(-1).astype(jnp.float32)
    by_score = detection._score_order(score, det_eval.reshape(-1))
    _, choice = detection._match(
        detections, ground_truth, det_eval, gt_eval, (iou,), by_score, with_choice=True
    )
    choice = choice[..., 0]  # [B, D]: ground truth taken by each detection, -1 for none
    (batch, num_dets), num_gts = choice.shape, ground_truth["end"].shape[1]
    target = jnp.where(choice >= 0, choice, num_gts)
    matched_by = _scatter(-1, jnp.int32, (batch, num_gts), target, jnp.arange(num_dets))
    valid = matched_by >= 0
    if num_dets == 0:
        return DetectionLatencies(jnp.zeros((batch, num_gts), jnp.float32), valid, matched_by)
    emitted = jnp.asarray(emitted, jnp.float32)
    emitted_at = jnp.take_along_axis(emitted, jnp.maximum(matched_by, 0), axis=1)
    end = ground_truth["end"].astype(jnp.float32)
    latency = jnp.where(valid, emitted_at - end, 0.0)
    return DetectionLatencies(latency, valid, matched_by)


def _quantiles(values: jax.Array, valid: jax.Array, quantiles: tuple[float, ...]) -> jax.Array:
    """Linearly interpolated quantiles of values[valid] (NumPy's default method):
    float32 [len(quantiles)]; values, valid: [N], N > 0."""
    count = jnp.sum(valid, dtype=jnp.int32)
    ordered = jnp.sort(jnp.where(valid, values, jnp.inf))  # the valid values first
    last = jnp.maximum(count - 1, 0)
    position = jnp.asarray(quantiles, jnp.float32) * last.astype(jnp.float32)
    below = jnp.minimum(jnp.floor(position).astype(jnp.int32), last)
    above = jnp.minimum(below + 1, last)
    low, high = ordered[below], ordered[above]
    fraction = position - below.astype(jnp.float32)
    return jnp.where(count > 0, low + (high - low) * fraction, jnp.nan)


def latency_summary(latency, valid) -> LatencySummary:
    """Count, mean, median and 90th percentile of latency[valid], all axes pooled.

    Percentiles are NumPy's default (linear): the q-quantile of n sorted values x_0..x_{n-1}
    is `x_i + (x_{i+1} - x_i) f` where `q (n - 1) = i + f`. Under `vmap` each example has
    its own summary.

    Args:
      latency: float or int [...] (e.g. `TrackingLatencies.latency` times the hop in
        seconds, or `DetectionLatencies.latency`). valid: bool, the same shape.

    Returns:
      `LatencySummary`; mean, median and p90 are NaN when nothing is valid.
    """
    shape, _ = _validate.shape_and_dtype("latency", latency)
    valid_shape, _ = _validate.shape_and_dtype("valid", valid)
    if shape != valid_shape:
        raise ValueError(f"valid: shape {valid_shape} does not match latency shape {shape}")
    _validate.require_dtype("valid", valid, "bool")
    values = jnp.asarray(latency, jnp.float32).reshape(-1)
    valid = jnp.asarray(valid).reshape(-1)
    count = jnp.sum(valid, dtype=jnp.int32)
    if values.shape[0] == 0:
        nan = jnp.float32(jnp.nan)
        return LatencySummary(count, nan, nan, nan)
    total = jnp.sum(jnp.where(valid, values, 0.0))
    mean = jnp.where(count > 0, total / jnp.maximum(count, 1).astype(jnp.float32), jnp.nan)
    median, p90 = _quantiles(values, valid, (0.5, 0.9))
    return LatencySummary(count, mean, median, p90)
