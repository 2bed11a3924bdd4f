"""Tracking evaluator (MultiQT): TIMESTEP and INSTANCE scores of a label predictor.

    scores = tracking.evaluate(predict, batches, num_classes=7)
    scored = tracking.evaluate_smoothed(predict, batches, num_classes=7,
                                        smoothers={"smoothed": smooth})
    intervals = tracking.bootstrap_intervals(scored["raw"]["per_call"], resamples=1000, seed=0)

`evaluate` scores the whole set (counts summed over batches); `evaluate_smoothed` scores
the raw labels and each smoother's from one pass, optionally with latency, early frames
and per-call counts, which `bootstrap_intervals` resamples.

Specification (inputs, returned fields): docs/architecture.md#the-tracking-evaluator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping

import jax
import numpy as np

import metrics
from speechkit import progress

SCORES = ("timestep", "instance")
PARTS = ("precision", "recall", "f1")
EARLY = "early_frames"
EARLY_MARGIN_S = 0.5  # seconds a prediction may lead the spoken question (`metrics.early_frames`)
BACKGROUND = 0  # the non-question class of both MultiQT tasks


@functools.partial(jax.jit, static_argnames=("num_classes", "hop_s", "margin_s"))
def counts(pred, gold, mask, *, num_classes: int, hop_s=None, margin_s=EARLY_MARGIN_S) -> dict:
    """One batch's mergeable counts {"timestep", "instance"} (merge with `+`), and with
    `hop_s` (seconds per frame) also "early_frames" (`metrics.EarlyFrameCounts`)."""
    timestep, instance = metrics.sequence_counts(pred, gold, mask, num_classes=num_classes)
    found = {"timestep": timestep, "instance": instance}
    if hop_s is not None:
        found[EARLY] = metrics.early_frame_counts(
            pred, gold, mask, num_classes=num_classes, hop_s=hop_s, margin_s=margin_s
        )
    return found


@functools.partial(jax.jit, static_argnames="num_classes")
def row_counts(pred, gold, mask, *, num_classes: int) -> dict:
    """`counts` of each row of a batch on its own: every leaf [B, num_classes]."""
    return jax.vmap(lambda p, g, m: counts(p[None], g[None], m[None], num_classes=num_classes))(
        pred, gold, mask
    )


def bootstrap_intervals(per_call: dict, *, resamples: int, seed: int, level: float = 0.95):
    """{"timestep_f1", "instance_f1"}: [low, high] percentile intervals at `level` of the
    macro F1 of the calls' pooled counts, over `resamples` sets of calls drawn with
    replacement (NumPy's generator seeded with `seed`). `per_call`: the "per_call" counts
    of `evaluate_smoothed`."""
    calls = len(per_call["timestep"].tp)
    if calls == 0:
        raise ValueError("tracking.bootstrap_intervals: no calls")
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, calls, (resamples, calls))
    weights = np.stack([np.bincount(row, minlength=calls) for row in drawn])  # [R, calls]
    found = {}
    for name in SCORES:
        pooled = type(per_call[name])(*(weights @ np.asarray(c) for c in per_call[name]))
        f1 = np.asarray(metrics.prf_from_counts(pooled).f1, np.float64)  # [R]
        tail = (1 - level) / 2 * 100
        found[f"{name}_f1"] = [float(np.percentile(f1, tail)), float(np.percentile(f1, 100 - tail))]
    return found


def scores_from_counts(total: dict, early: dict | None = None) -> dict:
    """Summed counts -> P/R/F1 of both scores and per-class TIMESTEP F1; where `total`
    holds early-frame counts also "early_frames" (`early_frames_record`; `early`:
    {"margin_s", "hop_s"} they were counted with)."""
    per_class = np.asarray(metrics.per_class_prf(total["timestep"]).f1, np.float64)
    result = {}
    for name in SCORES:
        prf = metrics.prf_from_counts(total[name])
        result[name] = {part: float(getattr(prf, part)) for part in PARTS}
    result["timestep_f1_per_class"] = [None if np.isnan(v) else float(v) for v in per_class]
    if EARLY in total:
        result[EARLY] = early_frames_record(total[EARLY], **early)
    return result


def early_frames_record(counts: metrics.EarlyFrameCounts, *, margin_s: float, hop_s: float):
    """results.json's "early_frames" of summed counts: {"margin_s", "hop_s" (seconds per
    frame), "per_class" (share of each class's predicted frames that are early: None at
    the background, 0 where "predicted" is 0), "overall", "early", "predicted" (int
    frame counts per class, which add up across folds)}."""
    shares = metrics.early_frames_from_counts(
        metrics.EarlyFrameCounts(*(np.asarray(c, np.int32) for c in counts))
    )
    per_class = [float(v) for v in np.asarray(shares.share)]
    per_class[BACKGROUND] = None
    return {
        "margin_s": margin_s,
        "hop_s": hop_s,
        "per_class": per_class,
        "overall": float(shares.overall),
        "early": [int(v) for v in np.asarray(counts.early)],
        "predicted": [int(v) for v in np.asarray(counts.predicted)],
    }


def evaluate(predict: Callable, batches: Iterable, *, num_classes: int) -> dict:
    """Scores of `predict` over every batch (see the module docstring)."""
    return evaluate_smoothed(predict, batches, num_classes=num_classes, smoothers={})["raw"]


def evaluate_smoothed(
    predict: Callable,
    batches: Iterable,
    *,
    num_classes: int,
    smoothers: Mapping[str, Callable],
    latency: bool = False,
    per_call: bool = False,
    hop_s: float | None = None,
    early_margin_s: float = EARLY_MARGIN_S,
) -> dict[str, dict]:
    """{"raw": scores of `predict`, name: scores of `smoother(pred, mask)` for each of
    `smoothers`}, every batch predicted once (see the module docstring)."""
    if "raw" in smoothers:
        raise ValueError("tracking.evaluate_smoothed: smoothers: 'raw' names the unsmoothed labels")
    total, lags, rows = None, {}, {}
    for batch in progress.wrap(batches, "tracking", "batch"):
        pred, gold, mask = predict(batch)
        labelled = {"raw": pred} | {name: fn(pred, mask) for name, fn in smoothers.items()}
        found = {
            name: counts(
                labels, gold, mask, num_classes=num_classes, hop_s=hop_s, margin_s=early_margin_s
            )
            for name, labels in labelled.items()
        }
        total = (
            found
            if total is None
            else {name: {k: total[name][k] + v for k, v in found[name].items()} for name in found}
        )
        if per_call:
            real = np.ones(len(pred), bool)  # a batch's filler rows are left out
            if isinstance(batch, Mapping) and "example_mask" in batch:
                real = np.asarray(batch["example_mask"], bool)
            for name, labels in labelled.items():
                each = row_counts(labels, gold, mask, num_classes=num_classes)
                rows.setdefault(name, []).append(
                    jax.tree_util.tree_map(lambda c, r=real: np.asarray(c)[r], each)
                )
        if latency:
            for name, labels in labelled.items():
                late = metrics.tracking_latency(labels, gold, mask, num_classes=num_classes)
                lags.setdefault(name, []).append(
                    (np.asarray(late.latency, np.float32).ravel(), np.asarray(late.valid).ravel())
                )
    if total is None:
        raise ValueError("tracking.evaluate: no batches")
    early = {"margin_s": early_margin_s, "hop_s": hop_s}
    scored = {name: scores_from_counts(counted, early) for name, counted in total.items()}
    for name, pieces in rows.items():
        scored[name]["per_call"] = jax.tree_util.tree_map(
            lambda *parts: np.concatenate(parts), *pieces
        )
    for name, pieces in lags.items():
        scored[name]["latency_frames"] = np.concatenate([frames for frames, _ in pieces])
        scored[name]["latency_valid"] = np.concatenate([valid for _, valid in pieces])
    return scored
