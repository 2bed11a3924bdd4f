"""Tracking evaluator (MultiQT): TIMESTEP and INSTANCE scores of a label predictor.

    scores = tracking.evaluate(predict, batches, num_classes=7)

`predict(batch)` returns (predicted int [B, T], gold int [B, T], mask bool [B, T]) on the
model's output clock (e.g. `multiqt_jax.train.predict`, or a baseline's sliding labels).
Counts are summed over all batches (`metrics.timestep_counts`,
`metrics.instance_counts`), so the scores are those of the whole set, not a mean over
batches. Returns {"timestep": {precision, recall, f1}, "instance": {...},
"timestep_f1_per_class": [float or None (class absent)]}.

    scored = tracking.evaluate_smoothed(predict, batches, num_classes=7,
                                        smoothers={"smoothed": smooth})
    scored["raw"], scored["smoothed"]      # each as `evaluate` returns

scores the raw labels and each smoother's relabelling of them (`smoother(pred, mask)` ->
int32 [B, T], e.g. `multiqt_jax.decode.smooth` with a fixed config) from one pass of
`predict` over the batches. With `latency=True` each also holds "latency_frames" (float32
[N]) and "latency_valid" (bool [N]): `metrics.tracking_latency` of every batch, pooled
(output frames from a gold onset to the first correctly labelled frame; valid where the
instance was found).
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


@functools.partial(jax.jit, static_argnames="num_classes")
def counts(pred, gold, mask, *, num_classes: int) -> dict:
    """One batch's mergeable counts {"timestep", "instance"} (merge with `+`)."""
    timestep, instance = metrics.sequence_counts(pred, gold, mask, num_classes=num_classes)
    return {"timestep": timestep, "instance": instance}


def scores_from_counts(total: dict) -> dict:
    """Summed counts -> P/R/F1 of both scores and per-class TIMESTEP F1."""
    per_class = np.asarray(metrics.per_class_prf(total["timestep"]).f1, np.float64)
    result = {}
    for name in SCORES:
        prf = metrics.prf_from_counts(total[name])
        result[name] = {part: float(getattr(prf, part)) for part in PARTS}
    result["timestep_f1_per_class"] = [None if np.isnan(v) else float(v) for v in per_class]
    return result


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
) -> dict[str, dict]:
    """{"raw": scores of `predict`, name: scores of `smoother(pred, mask)` for each of
    `smoothers`}, every batch predicted once (see the module docstring)."""
    if "raw" in smoothers:
        raise ValueError("tracking.evaluate_smoothed: smoothers: 'raw' names the unsmoothed labels")
    total, lags = None, {}
    for batch in progress.wrap(batches, "tracking", "batch"):
        pred, gold, mask = predict(batch)
        labelled = {"raw": pred} | {name: fn(pred, mask) for name, fn in smoothers.items()}
        found = {
            name: counts(labels, gold, mask, num_classes=num_classes)
            for name, labels in labelled.items()
        }
        total = (
            found
            if total is None
            else {name: {k: total[name][k] + found[name][k] for k in SCORES} for name in found}
        )
        if latency:
            for name, labels in labelled.items():
                late = metrics.tracking_latency(labels, gold, mask, num_classes=num_classes)
                lags.setdefault(name, []).append(
                    (np.asarray(late.latency, np.float32).ravel(), np.asarray(late.valid).ravel())
                )
    if total is None:
        raise ValueError("tracking.evaluate: no batches")
    scored = {name: scores_from_counts(counted) for name, counted in total.items()}
    for name, pieces in lags.items():
        scored[name]["latency_frames"] = np.concatenate([frames for frames, _ in pieces])
        scored[name]["latency_valid"] = np.concatenate([valid for _, valid in pieces])
    return scored
