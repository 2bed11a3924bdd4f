"""Sequence-labelling metrics of MultiQT: TIMESTEP and INSTANCE precision / recall / F1.

Definitions: `docs/metrics.md`, section "Sequence labelling". Every function takes
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
    return type(self)(*(a + b for a, b in zip(self, other, strict=True)))


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


def _bin_counts(bins: jax.Array, num_bins: int) -> jax.Array:
    """How often each of 0..num_bins-1 occurs in `bins` (int32 [num_bins]).

    Other values (e.g. -1 for "skip") are not counted. A scatter-add: one pass over the
    data, where a one-hot [..., num_bins] reduction is ~10x slower on CPU. Skipped
    entries go to an extra bin, so every index is in bounds (the unchecked scatter is
    2x faster than `mode="drop"` on XLA:CPU), and small bin ids travel as int8.
    """
    bins = bins.reshape(-1)
    bins = jnp.where((bins >= 0) & (bins < num_bins), bins, num_bins)
    if num_bins < 127:
        bins = bins.astype(jnp.int8)
    counts = jnp.zeros(num_bins + 1, jnp.int32).at[bins].add(1, mode="promise_in_bounds")
    return counts[:num_bins]


def _in_range(labels: jax.Array, num_classes: int) -> jax.Array:
    """labels with out-of-range values (< 0 or >= num_classes) replaced by num_classes."""
    return jnp.where((labels >= 0) & (labels < num_classes), labels, num_classes)


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
    # Confusion matrix [gold, pred] over the classes plus one "out of range" row/column.
    size = num_classes + 1
    cell = _in_range(gold, num_classes) * size + _in_range(pred, num_classes)
    confusion = _bin_counts(jnp.where(mask, cell, -1), size * size).reshape(size, size)
    tp = jnp.diagonal(confusion)[:num_classes]
    predicted = confusion.sum(axis=0)[:num_classes]
    actual = confusion.sum(axis=1)[:num_classes]
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


def _shift_right(values: jax.Array, by: int, fill) -> jax.Array:
    """values[t - by] along the last axis, `fill` for t < by."""
    if by == 0:
        return values
    pad = [(0, 0)] * (values.ndim - 1) + [(by, 0)]
    return jnp.pad(values[..., : values.shape[-1] - by], pad, constant_values=fill)[
        ..., : values.shape[-1]
    ]


def _window_all(values: jax.Array, width: int) -> jax.Array:
    """True at t when values[t - width + 1 .. t] are all True (False for t < width - 1)."""
    if width <= 8:  # a few shifted ANDs fuse into one pass
        out = values
        for by in range(1, width):
            out = out & _shift_right(values, by, False)
        return out
    window = jax.lax.reduce_window(
        values.astype(jnp.int32),
        0,
        jax.lax.add,
        (1,) * (values.ndim - 1) + (width,),
        (1,) * values.ndim,
        [(0, 0)] * (values.ndim - 1) + [(width - 1, 0)],
    )
    return window == width


def _run_events(labels, agree, mask, *, background, min_run):
    """Instance boundaries and qualifying windows of one side, bool [B, T] each.

    starts / ends: first and last timestep of each instance (maximal run of one
    non-background label; a masked timestep ends it). qualifies: the `min_run`
    timesteps ending here all agree (pred == gold, valid) and lie inside one instance.
    """
    in_run = mask & (labels != background)
    same_as_before = _shift_right(labels, 1, 0) == labels
    continues = in_run & _shift_right(in_run, 1, False) & same_as_before
    starts = in_run & ~continues
    next_continues = jnp.pad(continues[:, 1:], ((0, 0), (0, 1)))
    ends = in_run & ~next_continues
    qualifies = _window_all(agree & in_run, min_run)
    if min_run > 1:  # ...and no instance starts inside the window after its first step
        qualifies &= _window_all(~starts, min_run - 1)
    return starts, ends, qualifies


def _latest_nonzero(earlier: jax.Array, later: jax.Array) -> jax.Array:
    """Associative: the later value unless it is 0 (no event), then the earlier one."""
    return jnp.where(later != 0, later, earlier)


_NO_EVENT, _RUN_START, _QUALIFIES = 0, 1, 2


def _instance_histograms(sides, agree, mask, *, background, min_run, num_classes):
    """(hits, instances) per class for the runs of each labels array in `sides`.

    Returns int32 [len(sides), num_classes] twice. A run is a hit when a window
    qualifies inside it, i.e. when at its last timestep the latest event (run start or
    qualifying window) is a qualifying window. One int8 scan over event codes answers
    that for every side at once and one scatter-add makes all the histograms: O(B T)
    work with no per-run loop and no sequential loop over time.
    """
    events, ends = [], []
    for labels in sides:
        starts, run_ends, qualifies = _run_events(
            labels, agree, mask, background=background, min_run=min_run
        )
        # A window that qualifies at a run's first step (min_run 1) belongs to that run.
        code = jnp.where(qualifies, _QUALIFIES, jnp.where(starts, _RUN_START, _NO_EVENT))
        events.append(code.astype(jnp.int8))
        ends.append(run_ends)
    latest = jax.lax.associative_scan(_latest_nonzero, jnp.stack(events), axis=-1)
    hit = latest == _QUALIFIES
    classes = jnp.stack([_in_range(labels, num_classes) for labels in sides])
    side = jnp.arange(len(sides))[:, None, None]
    bins = jnp.where(jnp.stack(ends), (side * 2 + hit) * (num_classes + 1) + classes, -1)
    counts = _bin_counts(bins, len(sides) * 2 * (num_classes + 1))
    counts = counts.reshape(len(sides), 2, num_classes + 1)[..., :num_classes]
    return counts[:, 1], counts.sum(axis=1)


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
    hits, instances = _instance_histograms(
        (pred, gold),
        mask & (pred == gold),
        mask,
        background=background,
        min_run=min_run,
        num_classes=num_classes,
    )
    return InstanceCounts(correct=hits[0], predicted=instances[0], found=hits[1], gold=instances[1])


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
