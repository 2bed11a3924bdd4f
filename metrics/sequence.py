"""Sequence-labelling metrics of MultiQT: TIMESTEP and INSTANCE precision / recall / F1.

Definitions: `shared/METRICS.md`, section "Sequence labelling". Every function takes
padded batch-first arrays:

  pred, gold: int  [B, T]  class ids in [0, num_classes)
  mask:       bool [B, T]  False marks padding

and is pure, jittable (class counts and run lengths are static) and vmappable.

Both metrics reduce to per-class integer counts (`TimestepCounts`, `InstanceCounts`).
Counts merge by `+` (or `jax.lax.psum` across devices), so a batch-by-batch loop adds
counts and calls `prf_from_counts` once at the end, with the same result as one call
on all the data.

Out-of-range label values (< 0 or >= num_classes) cannot be checked inside `jit`
without a host round-trip. They match no class: a gold timestep of class c predicted
as 99 counts as a false negative of c and as nobody's false positive; a run of 99s is
an instance of no class. Use `metrics.checked` to make them an error instead.
Counts are int32: exact up to 2**31 - 1 timesteps per class.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from metrics import _validate


class PRF(NamedTuple):
    """Macro-averaged precision, recall and F1 (float32 scalars, or [..] under vmap)."""

    precision: jax.Array
    recall: jax.Array
    f1: jax.Array


def _add_counts(self, other):
    """Merges counts field by field (`+` on the NamedTuple, not tuple concatenation)."""
    if type(other) is not type(self):
        return NotImplemented
    return type(self)(*(a + b for a, b in zip(self, other)))


class TimestepCounts(NamedTuple):
    """Per-class TIMESTEP counts, int32 [..., num_classes]."""

    tp: jax.Array
    fp: jax.Array
    fn: jax.Array

    __add__ = _add_counts


class InstanceCounts(NamedTuple):
    """Per-class INSTANCE counts, int32 [..., num_classes].

    correct: predicted instances with >= min_run consecutive gold timesteps of their class.
    predicted: predicted instances (maximal runs of one non-background predicted label).
    found: gold instances with >= min_run consecutive predicted timesteps of their class.
    gold: gold instances.
    """

    correct: jax.Array
    predicted: jax.Array
    found: jax.Array
    gold: jax.Array

    __add__ = _add_counts


def _check_sequences(pred, gold, mask) -> None:
    _validate.require_same_shape({"pred": pred, "gold": gold, "mask": mask}, rank=2)
    _validate.require_dtype("pred", pred, "int")
    _validate.require_dtype("gold", gold, "int")
    _validate.require_dtype("mask", mask, "bool")


def _class_histogram(labels: jax.Array, include: jax.Array, num_classes: int) -> jax.Array:
    """Counts of `labels` over positions where `include`; int32 [num_classes]."""
    classes = jnp.arange(num_classes, dtype=labels.dtype)
    hits = (labels[..., None] == classes) & include[..., None]
    return hits.sum(axis=tuple(range(labels.ndim)), dtype=jnp.int32)


def timestep_counts(pred, gold, mask, *, num_classes: int) -> TimestepCounts:
    """Per-class true positives, false positives and false negatives over valid timesteps.

    Args:
      pred: int [B, T] predicted class per timestep.
      gold: int [B, T] gold class per timestep.
      mask: bool [B, T], False = padding.
      num_classes: static number of classes (background included), >= 2.

    Returns:
      `TimestepCounts` of int32 [num_classes] arrays.
    """
    _check_sequences(pred, gold, mask)
    num_classes = _validate.require_int_at_least("num_classes", num_classes, 2)
    pred, gold, mask = jnp.asarray(pred), jnp.asarray(gold), jnp.asarray(mask)
    tp = _class_histogram(pred, mask & (pred == gold), num_classes)
    predicted = _class_histogram(pred, mask, num_classes)
    actual = _class_histogram(gold, mask, num_classes)
    return TimestepCounts(tp=tp, fp=predicted - tp, fn=actual - tp)


def _safe_ratio(numerator, denominator):
    """numerator / denominator as float32, with 0/0 (and x/0) = 0."""
    numerator = jnp.asarray(numerator, jnp.float32)
    denominator = jnp.asarray(denominator, jnp.float32)
    return jnp.where(denominator > 0, numerator / jnp.where(denominator > 0, denominator, 1), 0.0)


def _macro(values: jax.Array, eligible: jax.Array) -> jax.Array:
    """Mean of `values` [..., C] over eligible classes; 0 when none is eligible."""
    total = jnp.sum(jnp.where(eligible, values, 0.0), axis=-1)
    return _safe_ratio(total, jnp.sum(eligible, axis=-1))


def per_class_prf(counts: TimestepCounts | InstanceCounts) -> PRF:
    """Per-class precision, recall and F1, float32 [..., num_classes]; any 0/0 is 0."""
    if isinstance(counts, TimestepCounts):
        precision = _safe_ratio(counts.tp, counts.tp + counts.fp)
        recall = _safe_ratio(counts.tp, counts.tp + counts.fn)
        f1 = _safe_ratio(2 * counts.tp, 2 * counts.tp + counts.fp + counts.fn)
    elif isinstance(counts, InstanceCounts):
        precision = _safe_ratio(counts.correct, counts.predicted)
        recall = _safe_ratio(counts.found, counts.gold)
        f1 = _safe_ratio(2 * precision * recall, precision + recall)
    else:
        raise TypeError(
            f"counts: expected TimestepCounts or InstanceCounts, got {type(counts).__name__}"
        )
    return PRF(precision, recall, f1)


def eligible_classes(counts: TimestepCounts | InstanceCounts, average_over=None) -> jax.Array:
    """Classes that enter the macro average, bool [..., num_classes].

    TIMESTEP: classes present in gold or pred at a valid timestep. INSTANCE: classes with
    a gold or predicted instance (background never has one). Both further restricted by
    `average_over`, bool [num_classes], when given.
    """
    if isinstance(counts, TimestepCounts):
        present = (counts.tp + counts.fp + counts.fn) > 0
    elif isinstance(counts, InstanceCounts):
        present = (counts.gold + counts.predicted) > 0
    else:
        raise TypeError(
            f"counts: expected TimestepCounts or InstanceCounts, got {type(counts).__name__}"
        )
    if average_over is None:
        return present
    num_classes = present.shape[-1]
    shape, _ = _validate.shape_and_dtype("average_over", average_over)
    if shape != (num_classes,):
        raise ValueError(f"average_over: expected shape ({num_classes},), got {shape}")
    _validate.require_dtype("average_over", average_over, "bool")
    return present & jnp.asarray(average_over)


def prf_from_counts(counts: TimestepCounts | InstanceCounts, average_over=None) -> PRF:
    """Macro P/R/F1 from (possibly merged) counts; macro F1 is the mean of per-class F1."""
    per_class = per_class_prf(counts)
    eligible = eligible_classes(counts, average_over)
    return PRF(*(_macro(values, eligible) for values in per_class))


def timestep_prf(pred, gold, mask, *, num_classes: int, average_over=None) -> PRF:
    """TIMESTEP macro precision / recall / F1, counts pooled over all valid timesteps.

    With default arguments equals scikit-learn's
    `precision_recall_fscore_support(gold[mask], pred[mask], average='macro',
    zero_division=0)`.

    Args:
      pred, gold: int [B, T] class ids; mask: bool [B, T].
      num_classes: static, >= 2.
      average_over: optional bool [num_classes]; classes outside it are left out of the mean.
    """
    counts = timestep_counts(pred, gold, mask, num_classes=num_classes)
    return prf_from_counts(counts, average_over)


def _runs(labels, mask, background: int):
    """Run structure of the non-background labels of one side.

    Returns (in_run, run_start_index, is_run_end), each [B, T]: whether a timestep lies in
    an instance, the time index where its instance began, and whether it is the last
    timestep of its instance. A masked timestep ends a run.
    """
    time = jnp.arange(labels.shape[-1])
    in_run = mask & (labels != background)
    prev_label = jnp.pad(labels[:, :-1], ((0, 0), (1, 0)))
    prev_in_run = jnp.pad(in_run[:, :-1], ((0, 0), (1, 0)))
    starts = in_run & ~(prev_in_run & (prev_label == labels))
    next_starts = jnp.pad(starts[:, 1:], ((0, 0), (0, 1)), constant_values=True)
    next_in_run = jnp.pad(in_run[:, 1:], ((0, 0), (0, 1)))
    ends = in_run & (next_starts | ~next_in_run)
    run_start = jax.lax.cummax(jnp.where(starts, time, 0), axis=1)
    return in_run, run_start, ends


def _instance_hits(labels, agree, mask, *, background, min_run, num_classes):
    """(hits, instances) per class for the runs of `labels`, int32 [num_classes] each.

    A run is a hit when it contains >= `min_run` consecutive timesteps where `agree`
    (pred == gold, valid). Inside a run of class c, agreement means the other side is c.
    """
    time = jnp.arange(labels.shape[-1])
    in_run, run_start, ends = _runs(labels, mask, background)
    last_disagreement = jax.lax.cummax(jnp.where(agree, -1, time), axis=1)
    streak = jnp.where(agree & in_run, time - jnp.maximum(last_disagreement, run_start - 1), 0)
    reaches_min_run = (streak == min_run).astype(jnp.int32)
    reached_so_far = jnp.cumsum(reaches_min_run, axis=1)
    reached_before_run = jnp.take_along_axis(reached_so_far - reaches_min_run, run_start, axis=1)
    hit_at_end = ends & (reached_so_far > reached_before_run)
    hits = _class_histogram(labels, hit_at_end, num_classes)
    instances = _class_histogram(labels, ends, num_classes)
    return hits, instances


def instance_counts(
    pred, gold, mask, *, num_classes: int, background: int = 0, min_run: int = 5
) -> InstanceCounts:
    """Per-class INSTANCE counts.

    An instance is a maximal run of one non-background label (a masked timestep ends a
    run). A gold instance is found, and a predicted instance correct, when inside its
    span the other side carries its class for >= `min_run` consecutive timesteps.

    Args:
      pred, gold: int [B, T] class ids; mask: bool [B, T].
      num_classes: static, >= 2. background: static class id that is never an instance.
      min_run: static, >= 1.

    Returns:
      `InstanceCounts` of int32 [num_classes] arrays (zero at the background class).
    """
    _check_sequences(pred, gold, mask)
    num_classes = _validate.require_int_at_least("num_classes", num_classes, 2)
    background = _validate.require_class_index("background", background, num_classes)
    min_run = _validate.require_int_at_least("min_run", min_run, 1)
    pred, gold, mask = jnp.asarray(pred), jnp.asarray(gold), jnp.asarray(mask)
    agree = mask & (pred == gold)
    options = dict(background=background, min_run=min_run, num_classes=num_classes)
    correct, predicted = _instance_hits(pred, agree, mask, **options)
    found, gold_instances = _instance_hits(gold, agree, mask, **options)
    return InstanceCounts(correct=correct, predicted=predicted, found=found, gold=gold_instances)


def instance_prf(
    pred, gold, mask, *, num_classes: int, background: int = 0, min_run: int = 5
) -> PRF:
    """INSTANCE macro precision / recall / F1 over non-background classes with instances.

    `P_c = correct_c / predicted_c`, `R_c = found_c / gold_c`, `F1_c = 2 P_c R_c / (P_c + R_c)`;
    see `instance_counts` for the rule. A gold instance shorter than `min_run` can never be
    found (the paper's rule).
    """
    counts = instance_counts(
        pred, gold, mask, num_classes=num_classes, background=background, min_run=min_run
    )
    return prf_from_counts(counts)
