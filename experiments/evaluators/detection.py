"""Detection evaluator (CS-KWS): scores and curves of a keyword detector on whole test
utterances.

    result = detection.evaluate(detect, batches, num_keywords=20)
    result["scores"]["mAP"], result["curves"]["det"]["fa_per_hour"], result["seconds"]

`detect(batch)` returns padded detections (the format of `metrics.detection_scores`)
for a `cskws_jax.input_pipeline.evaluation_batches` batch built with
`PipelineConfig(unknown_class=False)`; ground truth and hours come from the batches
(`cskws_jax.train.ground_truth`, `duration` x `example_mask`). With `timed=True` every
batch is detected once to compile, then again timed: `seconds` is the detection time
after compilation. Returns
  scores:     `metrics.detection_scores` (AP as nested lists, the rest floats)
  curves:     "pr": precision and recall at IoU 0.5, "det": false alarms per hour and
              miss rate at IoU 0.05 (`metrics.pooled_matches` prefixes; at most
              `CURVE_POINTS` points each, always including the last)
  hours, seconds, detections and truth (stacked arrays, for saving).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import jax
import numpy as np

import metrics
from cskws_jax import train

CURVE_POINTS = 400
PR_IOU, DET_IOU = 0.5, 0.05


def _stack(dicts: list[dict]) -> dict[str, np.ndarray]:
    """Batches of [B_i, D_i] fields -> one [sum B_i, max D_i] batch, padded invalid."""
    width = max(d["valid"].shape[1] for d in dicts)
    return {
        key: np.concatenate([np.pad(d[key], ((0, 0), (0, width - d[key].shape[1]))) for d in dicts])
        for key in dicts[0]
    }


def _run(detect: Callable, batches: Sequence, timed: bool) -> tuple[list[dict], float]:
    if timed:
        for batch in batches:  # compile every shape once, outside the timing
            jax.block_until_ready(detect(batch))
    found, started = [], time.perf_counter()
    for batch in batches:
        found.append(jax.block_until_ready(detect(batch)))
    seconds = time.perf_counter() - started
    return [jax.tree_util.tree_map(np.asarray, f) for f in found], seconds


def _thinned(*columns: np.ndarray) -> list[list[float]]:
    """At most CURVE_POINTS evenly spaced rows of the columns, always the last."""
    size = len(columns[0])
    keep = np.unique(np.linspace(0, size - 1, min(size, CURVE_POINTS)).round().astype(int))
    return [c[keep].astype(float).tolist() for c in columns] if size else [[] for _ in columns]


def curves(detections: dict, truth: dict, num_keywords: int, hours: float) -> dict:
    """Pooled precision-recall (IoU 0.5) and DET (IoU 0.05) curves over score cuts."""
    result = {}
    for name, iou in (("pr", PR_IOU), ("det", DET_IOU)):
        pooled = metrics.pooled_matches(detections, truth, num_classes=num_keywords, iou=iou)
        evaluated = np.asarray(pooled["evaluated"])
        hits = np.asarray(pooled["hit"])[evaluated]
        total = max(int(pooled["num_ground_truth"]), 1)
        true_positives = np.cumsum(hits)
        if name == "pr":
            precision = true_positives / np.arange(1, hits.size + 1)
            recall, precision = _thinned(true_positives / total, precision)
            result[name] = {"iou": iou, "recall": recall, "precision": precision}
        else:
            fa_per_hour, miss = _thinned(np.cumsum(~hits) / hours, 1 - true_positives / total)
            result[name] = {"iou": iou, "fa_per_hour": fa_per_hour, "miss_rate": miss}
    return result


def evaluate(
    detect: Callable, batches: Sequence, *, num_keywords: int, timed: bool = True, **options
) -> dict:
    """Scores, curves and timing of `detect` over `batches` (see the module docstring);
    `options` go to `metrics.detection_scores`."""
    batches = list(batches)
    if not batches:
        raise ValueError("detection.evaluate: no batches")
    found, seconds = _run(detect, batches, timed)
    truth = [train.ground_truth(batch) for batch in batches]
    if any(np.any(t["label"][t["valid"]] >= num_keywords) for t in truth):
        raise ValueError(
            "detection.evaluate: ground truth holds labels >= num_keywords (the unknown "
            "class?); build evaluation batches with PipelineConfig(unknown_class=False)"
        )
    hours = (
        sum(
            float(np.sum(np.asarray(b["duration"]) * np.asarray(b["example_mask"])))
            for b in batches
        )
        / 3600
    )
    detections, ground_truth = _stack(found), _stack(truth)
    scores = metrics.detection_scores(
        detections, ground_truth, num_classes=num_keywords, total_hours=hours, **options
    )
    return {
        "scores": {
            key: np.asarray(value).tolist() if np.ndim(value) else float(value)
            for key, value in scores.items()
        },
        "curves": curves(detections, ground_truth, num_keywords, hours),
        "hours": hours,
        "seconds": seconds,
        "detections": detections,
        "truth": ground_truth,
    }
