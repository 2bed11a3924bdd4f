"""Operating points of a keyword detector: DET curves, and per-keyword score thresholds
for a system false-alarm budget, chosen on labelled held-out data (offline, NumPy).

    found = outcomes(detections, truth, num_keywords=20, hours=1.5)   # arrays of the evaluator
    curves = det_curves(found)              # {"pooled": Curve, "per_keyword": [Curve, ...]}
    points = choose(found, (1, 5, 25), split="synthetic_kws/quick:test")
    measure(other_found, points[1].thresholds)    # FA/h and miss rate they give elsewhere

`detections` and `truth` are the padded dicts of `metrics.detection_scores` (start, end,
score, label, valid [B, D]; start, end, label, valid [B, G]; seconds), e.g. those
`experiments.evaluators.detection.evaluate` returns. Each detection's outcome (a hit or
a false alarm) is that of `metrics.pooled_matches` at IoU `DET_IOU` (0.05, as FRR in
docs/metrics.md): matching is greedy in score order within a keyword, so a score
threshold never changes the outcome of a detection it keeps, and one matching gives every
threshold's counts.

DET curve: a list of detections in score order is cut only between different scores
(equal scores are kept or dropped together, as in docs/metrics.md); each cut keeps the
detections scoring >= its threshold and has `FA/h = false alarms / hours` and
`miss rate = 1 - hits / ground truths` (NaN without ground truth). The first point is the
cut before everything (threshold inf, FA/h 0, miss rate 1 or NaN). Per keyword: that keyword's
detections; pooled: all keywords with one shared threshold (the curve FRR@k reads).

The rule for a system budget of B false alarms per hour (`keyword_thresholds`): each of
the C keywords gets an equal share B / C, and its threshold is its lowest cut with
`FA/h <= B / C`, i.e. the lowest score that cut keeps: a threshold never reaches below
the scores seen. If only the empty cut fits, the threshold is the smallest float32 above
the keyword's highest score (nothing passes on the data); a keyword without any
detection gets `ABOVE_ALL`, above every probability (the scores are probabilities;
nothing is known of its false alarms, so none of its detections is admitted).

Why equal shares: the keywords' false alarms then add up to at most B per hour on the
data by construction,
each keyword's threshold depends on its own detections only, and no keyword with many
confident false alarms can use up the budget of the others. The cost: on little audio a
share allows few or no false alarms (`allowed_false_alarms(B / C, hours)` of them; 0 when
B / C * hours < 1, and then each threshold sits above the keyword's best-scoring false
alarm), so report those counts next to the budgets. Thresholds chosen on data and read on
the same data meet the budget by construction and look optimistic; `measure` them on
other data (e.g. another synthesiser's split).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

import metrics
from cskws_jax.config import OperatingPoint
from speechkit import checks

DET_IOU = 0.05  # matching threshold of the outcomes: that of FRR (docs/metrics.md)
ABOVE_ALL = float(np.nextafter(np.float32(1), np.float32(2)))  # keeps no probability


@dataclasses.dataclass(frozen=True)
class Outcomes:
    """Every evaluated detection of some labelled audio, in descending score order (ties
    in flat index order): score float32 [N], label int32 [N] (keyword), hit bool [N] (a
    true positive at IoU `iou`); ground_truth int64 [C]: evaluated ground truths per
    keyword; hours: the audio's duration (> 0)."""

    score: np.ndarray
    label: np.ndarray
    hit: np.ndarray
    ground_truth: np.ndarray
    hours: float
    iou: float = DET_IOU

    @property
    def num_keywords(self) -> int:
        return len(self.ground_truth)

    def keyword(self, index: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(score [n], hit [n], ground truths) of keyword `index`, in score order."""
        keep = self.label == index
        return self.score[keep], self.hit[keep], int(self.ground_truth[index])


@dataclasses.dataclass(frozen=True)
class Curve:
    """A DET curve over score cuts, [P] each, P >= 1: threshold float64 (keep scores >=
    it; inf for the cut before everything), false_alarms and hits int64 (kept), fa_per_hour
    and miss_rate float64 (miss rate NaN without ground truth)."""

    threshold: np.ndarray
    false_alarms: np.ndarray
    hits: np.ndarray
    fa_per_hour: np.ndarray
    miss_rate: np.ndarray

    def thinned(self, points: int) -> Curve:
        """At most `points` (>= 2) evenly spaced cuts, always the first and the last."""
        checks.require_int("points", points, at_least=2)
        size = len(self.threshold)
        keep = np.unique(np.linspace(0, size - 1, min(size, points)).round().astype(int))
        return Curve(*(getattr(self, f.name)[keep] for f in dataclasses.fields(self)))

    def to_json(self) -> dict[str, list]:
        """The columns as lists of numbers; inf and NaN become None."""
        return {
            f.name: [float(v) if math.isfinite(v) else None for v in getattr(self, f.name)]
            for f in dataclasses.fields(self)
        }


# ---------------------------------------------------------------------------- checks


def _hours(hours) -> float:
    """`hours` as a float > 0 (a ValueError naming `hours` otherwise)."""
    if np.ndim(hours) != 0:
        raise ValueError(f"hours: expected a number, got an array of shape {np.shape(hours)}")
    value = hours.item() if isinstance(hours, np.ndarray | np.generic) else hours
    return float(checks.require_number("hours", value, above=0))


def _budget(name: str, fa_per_hour) -> float:
    return float(checks.require_number(name, fa_per_hour, above=0))


def _labels_in_range(name: str, fields: Mapping, num_keywords: int) -> None:
    label = np.asarray(fields["label"])[np.asarray(fields["valid"], bool)]
    bad = label[(label < 0) | (label >= num_keywords)]
    if bad.size:
        raise ValueError(
            f"{name}['label']: {int(bad[0])} on a valid entry; expected keywords 0.."
            f"{num_keywords - 1} (num_keywords {num_keywords})"
        )


# -------------------------------------------------------------------------- outcomes


def outcomes(
    detections: Mapping, ground_truth: Mapping, *, num_keywords: int, hours, iou: float = DET_IOU
) -> Outcomes:
    """The `Outcomes` of padded detections and ground truth (see the module docstring)
    over `hours` of audio; every valid label must be a keyword in [0, num_keywords)."""
    num_keywords = checks.require_int("num_keywords", num_keywords, at_least=1)
    hours = _hours(hours)
    pooled = metrics.pooled_matches(  # checks the fields, shapes and dtypes
        detections, ground_truth, num_classes=num_keywords, iou=iou
    )
    _labels_in_range("detections", detections, num_keywords)
    _labels_in_range("ground_truth", ground_truth, num_keywords)
    score = np.asarray(detections["score"], np.float32).reshape(-1)
    valid = np.asarray(detections["valid"], bool).reshape(-1)
    if not np.all(np.isfinite(score[valid])):
        raise ValueError("detections['score']: non-finite score on a valid detection")
    count = int(np.sum(pooled["evaluated"]))  # the evaluated outcomes come first
    order = np.asarray(pooled["index"])[:count]  # each outcome's detection
    truth_label = np.asarray(ground_truth["label"])[np.asarray(ground_truth["valid"], bool)]
    return Outcomes(
        score=score[order],
        label=np.asarray(detections["label"]).reshape(-1)[order].astype(np.int32),
        hit=np.asarray(pooled["hit"])[:count].astype(bool),
        ground_truth=np.bincount(truth_label.astype(np.int64), minlength=num_keywords),
        hours=hours,
        iou=float(iou),
    )


# ------------------------------------------------------------------------ DET curves


def det_curve(score, hit, num_ground_truth: int, hours) -> Curve:
    """The DET curve of detections in descending score order: score [n], hit bool [n]
    (true positive or false alarm), num_ground_truth (>= 0) ground truths they may find,
    over `hours` of audio."""
    score = np.asarray(score, np.float64)
    hit = np.asarray(hit)
    if score.ndim != 1 or hit.shape != score.shape:
        raise ValueError(f"hit: shape {hit.shape}; expected score's 1-D shape {score.shape}")
    if hit.dtype != bool:
        raise TypeError(f"hit: expected dtype bool, got {hit.dtype}")
    if np.any(np.diff(score) > 0) or not np.all(np.isfinite(score)):
        raise ValueError("score: expected finite scores in descending order")
    total = checks.require_int("num_ground_truth", num_ground_truth, at_least=0)
    hours = _hours(hours)
    ends = np.flatnonzero(np.append(score[1:] != score[:-1], True)) if score.size else []
    hits = np.concatenate([[0], np.cumsum(hit)[ends]]).astype(np.int64)
    false_alarms = np.concatenate([[0], np.cumsum(~hit)[ends]]).astype(np.int64)
    miss = 1 - hits / total if total else np.full(len(hits), np.nan)
    return Curve(
        threshold=np.concatenate([[np.inf], score[ends]]),
        false_alarms=false_alarms,
        hits=hits,
        fa_per_hour=false_alarms / hours,
        miss_rate=miss,
    )


def det_curves(found: Outcomes) -> dict:
    """{"pooled": the curve of all keywords under one shared threshold, "per_keyword":
    [C] one curve per keyword}."""
    pooled = det_curve(found.score, found.hit, int(found.ground_truth.sum()), found.hours)
    per_keyword = [det_curve(*found.keyword(k), found.hours) for k in range(found.num_keywords)]
    return {"pooled": pooled, "per_keyword": per_keyword}


# ------------------------------------------------------------------- operating points


def allowed_false_alarms(fa_per_hour, hours) -> int:
    """The most false alarms n with n / hours <= fa_per_hour (a budget > 0 per hour)."""
    budget, hours = _budget("fa_per_hour", fa_per_hour), _hours(hours)
    count = math.floor(budget * hours)
    while (count + 1) / hours <= budget:  # the product may round either way
        count += 1
    while count > 0 and count / hours > budget:
        count -= 1
    return count


def keyword_threshold(curve: Curve, fa_per_hour: float) -> float:
    """The threshold of one keyword's DET curve for its share `fa_per_hour`: the lowest
    score its lowest cut with FA/h <= the share keeps (see the module docstring)."""
    share = _budget("fa_per_hour", fa_per_hour)
    last = int(np.flatnonzero(curve.fa_per_hour <= share)[-1])  # the empty cut always fits
    if last > 0:
        return float(curve.threshold[last])
    if len(curve.threshold) == 1:  # no detection at all: nothing known, nothing admitted
        return ABOVE_ALL
    top = np.float32(curve.threshold[1])
    return float(np.nextafter(top, np.float32(np.inf)))


def keyword_thresholds(found: Outcomes, fa_per_hour) -> tuple[float, ...]:
    """[C] thresholds for a system budget of `fa_per_hour` (> 0) false alarms per hour,
    all keywords together: each keyword's for its equal share (module docstring)."""
    share = _budget("fa_per_hour", fa_per_hour) / found.num_keywords
    return tuple(
        keyword_threshold(det_curve(*found.keyword(k), found.hours), share)
        for k in range(found.num_keywords)
    )


def choose(found: Outcomes, budgets: Sequence, split: str = "") -> tuple[OperatingPoint, ...]:
    """One `cskws_jax.config.OperatingPoint` per budget (FA/h, > 0, distinct), chosen on
    `found`; `split` names the data (stored with them)."""
    budgets = [_budget(f"budgets[{i}]", b) for i, b in enumerate(budgets)]
    if len(set(budgets)) != len(budgets):
        raise ValueError(f"budgets: expected distinct budgets, got {budgets}")
    return tuple(
        OperatingPoint(b, keyword_thresholds(found, b), split=split, hours=found.hours)
        for b in budgets
    )


def measure(found: Outcomes, thresholds: Sequence[float]) -> dict:
    """What per-keyword `thresholds` [C] (keep scores >= thresholds[keyword]) give on
    `found`, pooled: false_alarms, hits, fa_per_hour, miss_rate (None without ground
    truth), hours."""
    thresholds = np.asarray(thresholds, np.float64)
    if thresholds.shape != (found.num_keywords,):
        raise ValueError(
            f"thresholds: shape {thresholds.shape}; expected one per keyword "
            f"({found.num_keywords},)"
        )
    kept = found.score >= thresholds[found.label]
    hits = int(np.sum(kept & found.hit))
    false_alarms = int(np.sum(kept & ~found.hit))
    total = int(found.ground_truth.sum())
    return {
        "false_alarms": false_alarms,
        "hits": hits,
        "fa_per_hour": false_alarms / found.hours,
        "miss_rate": 1 - hits / total if total else None,
        "hours": found.hours,
    }
