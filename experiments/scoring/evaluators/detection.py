"""Detection evaluator (CS-KWS): scores and curves of a keyword detector on whole test
utterances.

    result = detection.evaluate(detect, batches, num_keywords=20)
    result["scores"]["mAP"], result["curves"]["det"]["fa_per_hour"], result["seconds"]

`evaluate` detects every batch (timed after compilation with `timed=True`) and returns
scores, PR and DET curves, hours, seconds and the stacked detections, truth and
durations, which `bootstrap_intervals` turns into intervals over test utterances.

Specification (inputs, returned fields): docs/architecture.md#the-detection-evaluator.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np

import metrics
from cskws_jax import train
from speechkit import checks, progress

CURVE_POINTS = 400
PR_IOU, DET_IOU = 0.5, 0.05
BOOTSTRAP_LEVEL = 0.95
BOOTSTRAP_CHUNK = 16  # resamples scored together (vmapped); memory grows with it


def _stack(dicts: list[dict]) -> dict[str, np.ndarray]:
    """Batches of [B_i, D_i] fields -> one [sum B_i, max D_i] batch, padded invalid."""
    width = max(d["valid"].shape[1] for d in dicts)
    return {
        key: np.concatenate([np.pad(d[key], ((0, 0), (0, width - d[key].shape[1]))) for d in dicts])
        for key in dicts[0]
    }


def _run(detect: Callable, batches: Sequence, timed: bool) -> tuple[list[dict], float]:
    passes = 2 if timed else 1
    with progress.bar(passes * len(batches), "detection", "batch") as shown:
        if timed:
            for batch in batches:  # compile every shape once, outside the timing
                jax.block_until_ready(detect(batch))
                shown.update(1)
        found, started = [], time.perf_counter()
        for batch in batches:
            found.append(jax.block_until_ready(detect(batch)))
            shown.update(1)
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
        pooled = _pooled(detections, truth, num_classes=num_keywords, iou=iou)
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
    durations = np.concatenate(
        [
            np.asarray(b["duration"], np.float64) * np.asarray(b["example_mask"], bool)
            for b in batches
        ]
    )
    # Summed batch by batch in float32 as before `durations` existed, so that hours (and
    # every FRR allowance) stay bit for bit what earlier runs saved.
    hours = (
        sum(
            float(np.sum(np.asarray(b["duration"]) * np.asarray(b["example_mask"])))
            for b in batches
        )
        / 3600
    )
    if not hours > 0:
        raise ValueError("detection.evaluate: the batches hold no audio (0 hours)")
    detections, ground_truth = _stack(found), _stack(truth)
    static = {k: tuple(v) if isinstance(v, Sequence) else v for k, v in options.items()}
    scores = _scores(detections, ground_truth, hours, num_classes=num_keywords, **static)
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
        "durations": durations,
    }


# Both metrics compiled as one program each: run op by op, their few hundred small
# operations compile one by one, each too fast for the persistent compilation cache (about
# half a minute of every fresh process's first evaluation on CPU). `metrics.pooled_matches`
# is one jitted program already (checks, then `_pooled_matches`): called as it is, its
# DET-curve program (IoU 0.05) is also the one `cskws_jax.operating_points.outcomes` runs
# on the same arrays, compiled once for both instead of once per caller.
_pooled = metrics.pooled_matches


@functools.partial(
    jax.jit,
    static_argnames=("num_classes", "ignore_classes", "iou_thresholds", "frr_iou", "fa_per_hour"),
)
def _scores(detections, truth, hours, *, num_classes, **options):
    """`metrics.detection_scores` of float `hours` of audio."""
    return metrics.detection_scores(
        detections, truth, num_classes=num_classes, total_hours=hours, **options
    )


@functools.partial(jax.jit, static_argnames=("num_classes", "fa_per_hour", "chunk"))
def _resampled_scores(detections, truth, rows, hours, *, num_classes, fa_per_hour, chunk):
    """`metrics.detection_scores` of each resample: rows int32 [R, N] (the utterances
    drawn), hours float32 [R] (their summed durations)."""

    def one(resample):
        chosen, total_hours = resample
        return metrics.detection_scores(
            {k: v[chosen] for k, v in detections.items()},
            {k: v[chosen] for k, v in truth.items()},
            num_classes=num_classes,
            total_hours=total_hours,
            fa_per_hour=fa_per_hour,
        )

    scores = jax.lax.map(one, (rows, hours), batch_size=chunk)
    return {key: value for key, value in scores.items() if key != "AP"}


def bootstrap_intervals(
    detections: Mapping[str, np.ndarray],
    truth: Mapping[str, np.ndarray],
    durations,
    num_classes: int,
    *,
    resamples: int = 200,
    seed: int = 0,
    level: float = BOOTSTRAP_LEVEL,
    fa_per_hour: Sequence[float] = (5.0, 25.0),
) -> dict[str, list]:
    """Percentile bootstrap intervals over test utterances for mAP, AP@0.05 and FRR.

    What is resampled: the utterances (the rows of `detections` [N, D] and `truth`
    [N, G], padded as for `metrics.detection_scores`; rows whose `durations` entry is 0,
    the evaluator's filler rows, are dropped first). Each of `resamples` resamples draws
    N utterances with replacement, each keeping its own detections and ground truth (an
    utterance drawn twice counts twice), and is scored with `metrics.detection_scores`
    over its own hours (the sum of the drawn utterances' `durations`, in seconds), so
    FRR@b's false-alarm allowance (b x hours) moves with the audio drawn; mAP and AP
    average over the classes with ground truth in the resample. The unit is the
    utterance, so the keywords and false alarms of one utterance move together. The
    resamples are scored jitted, `BOOTSTRAP_CHUNK` at a time under `jax.vmap`.

    What the interval means: [lo, hi] are the (1 - level) / 2 and (1 + level) / 2
    quantiles (linear interpolation) of the resampled scores: roughly the range the
    score would take on other test sets of the same size drawn like this one, with the
    detector fixed. It reflects which utterances happened to be in the test split, not
    training randomness (seeds, steps), and need not be centred on the score. A
    resample whose score is undefined (NaN: e.g. no ground truth drawn, for FRR) is left
    out; a score undefined in every resample gets [None, None]. The draws come from
    `numpy.random.default_rng(seed)`, so the same arrays and seed give the same interval.

    Returns: {"mAP", "AP@0.05", "FRR@<b>" for each b in fa_per_hour: [lo, hi]} (floats).
    """
    resamples = checks.require_int("resamples", resamples, at_least=1)
    checks.require_number("level", level, above=0, below=1)
    durations = np.asarray(durations, np.float64)
    arrays = (*detections.values(), *truth.values())
    if durations.ndim != 1 or any(np.shape(v)[:1] != durations.shape for v in arrays):
        raise ValueError(
            f"durations: expected one entry per row of detections and truth, got shape "
            f"{durations.shape} for rows {sorted({np.shape(v)[:1] for v in arrays})}"
        )
    if not np.all(np.isfinite(durations) & (durations >= 0)):
        raise ValueError("durations: expected finite seconds >= 0")
    keep = np.flatnonzero(durations > 0)
    if keep.size == 0:
        raise ValueError("durations: no utterance with a duration > 0")
    budgets = tuple(float(b) for b in fa_per_hour)
    chosen = np.random.default_rng(seed).integers(0, keep.size, size=(resamples, keep.size))
    # Whole chunks only (the last one topped up with repeats, scored and dropped): one
    # compiled chunk instead of a second one for a remainder.
    chunk = min(BOOTSTRAP_CHUNK, resamples)
    padded = np.resize(chosen, (-(-resamples // chunk) * chunk, keep.size))
    hours = np.sum(durations[keep][padded], axis=1) / 3600  # float64, as `evaluate` sums
    scores = _resampled_scores(
        {k: np.asarray(v)[keep] for k, v in detections.items()},
        {k: np.asarray(v)[keep] for k, v in truth.items()},
        padded.astype(np.int32),
        hours.astype(np.float32),
        num_classes=int(num_classes),
        fa_per_hour=budgets,
        chunk=chunk,
    )
    quantiles = (100 * (1 - level) / 2, 100 * (1 + level) / 2)
    intervals = {}
    for key in ("mAP", "AP@0.05", *(f"FRR@{b:g}" for b in budgets)):
        values = np.asarray(scores[key][:resamples], np.float64)
        values = values[np.isfinite(values)]
        intervals[key] = (
            [float(q) for q in np.percentile(values, quantiles)] if values.size else [None, None]
        )
    return intervals
