"""Tracking evaluator (MultiQT): TIMESTEP and INSTANCE scores of a label predictor.

    scores = tracking.evaluate(predict, batches, num_classes=7)

`predict(batch)` returns (predicted int [B, T], gold int [B, T], mask bool [B, T]) on the
model's output clock (e.g. `multiqt_jax.train.predict`, or a baseline's sliding labels).
Counts are summed over all batches (`metrics.timestep_counts`,
`metrics.instance_counts`), so the scores are those of the whole set, not a mean over
batches. Returns {"timestep": {precision, recall, f1}, "instance": {...},
"timestep_f1_per_class": [float or None (class absent)]}.

    scored = tracking.evaluate_decoded(predict, batches, num_classes=7,
                                       decoders={"smoothed": smooth})
    scored["raw"], scored["smoothed"]      # each as `evaluate` returns

scores the raw labels and each decoder's relabelling of them (`decoder(pred, mask)` ->
int32 [B, T], e.g. `multiqt_jax.decode.smooth` with a fixed config) from one pass of
`predict` over the batches.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping

import jax
import numpy as np

import metrics

SCORES = ("timestep", "instance")
PARTS = ("precision", "recall", "f1")


@functools.partial(jax.jit, static_argnames="num_classes")
def counts(pred, gold, mask, *, num_classes: int) -> dict:
    """One batch's mergeable counts {"timestep", "instance"} (merge with `+`)."""
    return {
        "timestep": metrics.timestep_counts(pred, gold, mask, num_classes=num_classes),
        "instance": metrics.instance_counts(pred, gold, mask, num_classes=num_classes),
    }


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
    return evaluate_decoded(predict, batches, num_classes=num_classes, decoders={})["raw"]


def evaluate_decoded(
    predict: Callable, batches: Iterable, *, num_classes: int, decoders: Mapping[str, Callable]
) -> dict[str, dict]:
    """{"raw": scores of `predict`, name: scores of `decoder(pred, mask)` for each of
    `decoders`}, every batch predicted once (see the module docstring)."""
    if "raw" in decoders:
        raise ValueError("tracking.evaluate_decoded: decoders: 'raw' names the undecoded labels")
    total = None
    for batch in batches:
        pred, gold, mask = predict(batch)
        found = {"raw": counts(pred, gold, mask, num_classes=num_classes)}
        for name, decoder in decoders.items():
            found[name] = counts(decoder(pred, mask), gold, mask, num_classes=num_classes)
        total = (
            found
            if total is None
            else {name: {k: total[name][k] + found[name][k] for k in SCORES} for name in found}
        )
    if total is None:
        raise ValueError("tracking.evaluate: no batches")
    return {name: scores_from_counts(counted) for name, counted in total.items()}
