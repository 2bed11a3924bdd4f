"""Operating points of a keyword detector: DET curves, and per-keyword score thresholds
for a system false-alarm budget, chosen on labelled held-out data (offline, NumPy).

    found = outcomes(detections, truth, num_keywords=20, hours=1.5)   # arrays of the evaluator
    curves = det_curves(found)              # {"pooled": Curve, "per_keyword": [Curve, ...]}
    points = choose(found, (1, 5, 25), split="synthetic_kws/quick:test")
    measure(other_found, points[1].thresholds)    # FA/h and miss rate they give elsewhere
    choose(found, (1, 5, 25), rule="fitted_tail")  # another rule of RULES
    compare_rules(dev_found, final_found, (1, 5, 25))  # every rule, chosen on dev, read on final

`detections` and `truth` are the padded dicts of `metrics.detection_scores`. Rules in
brief: docs/models.md#choosing-thresholds-for-a-false-alarm-budget; specification
(matching, DET cuts, each rule's formulas and fallbacks): docs/models.md#the-rules-precisely.
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
RULES = ("equal_share", "pooled_offsets", "fitted_tail")  # threshold rules of `choose`
MIN_TAIL = 10  # false alarms a keyword needs for its own tail fit (`fitted_tail`)
TAIL_FRACTION = 0.1  # share of a keyword's false alarms in its tail, at least MIN_TAIL
LOGIT_CLIP = 1e-12  # scores are clipped to [LOGIT_CLIP, 1 - LOGIT_CLIP] before logit


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


def pooled(parts: Sequence[Outcomes]) -> Outcomes:
    """The `Outcomes` of several sets of audio taken together (the same keywords and
    IoU): their detections in one descending score order (ties keep the parts' order),
    ground truths and hours summed."""
    if not parts:
        raise ValueError("pooled: no outcomes given")
    first = parts[0]
    for index, part in enumerate(parts[1:], 1):
        if part.num_keywords != first.num_keywords or part.iou != first.iou:
            raise ValueError(
                f"pooled: parts[{index}] has {part.num_keywords} keywords at IoU {part.iou}; "
                f"parts[0] has {first.num_keywords} at IoU {first.iou}"
            )
    score = np.concatenate([part.score for part in parts])
    order = np.argsort(-score, kind="stable")
    return Outcomes(
        score=score[order],
        label=np.concatenate([part.label for part in parts])[order],
        hit=np.concatenate([part.hit for part in parts])[order],
        ground_truth=np.sum([part.ground_truth for part in parts], axis=0),
        hours=float(sum(part.hours for part in parts)),
        iou=first.iou,
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


def choose(
    found: Outcomes, budgets: Sequence, split: str = "", rule: str = "equal_share"
) -> tuple[OperatingPoint, ...]:
    """One `cskws_jax.config.OperatingPoint` per budget (FA/h, > 0, distinct), chosen on
    `found` by `rule` (one of RULES, module docstring); `split` names the data (stored
    with them)."""
    thresholds_of = _rule(rule)
    budgets = [_budget(f"budgets[{i}]", b) for i, b in enumerate(budgets)]
    if len(set(budgets)) != len(budgets):
        raise ValueError(f"budgets: expected distinct budgets, got {budgets}")
    return tuple(
        OperatingPoint(b, thresholds_of(found, b), split=split, hours=found.hours, rule=rule)
        for b in budgets
    )


def _rule(name: str):
    """The thresholds function of rule `name` (found, fa_per_hour) -> [C] thresholds."""
    checks.require_choice("rule", name, RULES)
    return {
        "equal_share": keyword_thresholds,
        "pooled_offsets": pooled_offset_thresholds,
        "fitted_tail": fitted_tail_thresholds,
    }[name]


# ------------------------------------------------------------- scores as logits


def _logits(found: Outcomes) -> np.ndarray:
    """float64 [N] logits of the (clipped) scores; a ValueError unless they are
    probabilities in [0, 1]."""
    score = found.score.astype(np.float64)
    bad = score[(score < 0) | (score > 1) | ~np.isfinite(score)]
    if bad.size:
        raise ValueError(
            f"score: {float(bad[0])!r}; this rule reads scores as probabilities in [0, 1]"
        )
    clipped = np.clip(score, LOGIT_CLIP, 1 - LOGIT_CLIP)
    return np.log(clipped) - np.log1p(-clipped)


def _sigmoid(logit: float) -> float:
    """The probability of a logit (float64, without overflow)."""
    if logit >= 0:
        return 1 / (1 + math.exp(-logit))
    return math.exp(logit) / (1 + math.exp(logit))


def _just_above(score: float) -> float:
    """The smallest float32 above `score` (a float32 value)."""
    return float(np.nextafter(np.float32(score), np.float32(np.inf)))


def _no_false_alarm_threshold(found: Outcomes, keyword: int) -> float:
    """Equal shares' threshold of a keyword without false alarms: its lowest detection
    (every detection passes), or ABOVE_ALL without any."""
    score, _, _ = found.keyword(keyword)
    return float(score[-1]) if score.size else ABOVE_ALL


def _checked(found: Outcomes, fa_per_hour) -> tuple[float, float]:
    """(budget FA/h, hours) after checking both (> 0)."""
    return _budget("fa_per_hour", fa_per_hour), _hours(found.hours)


# ---------------------------------------------------------------- pooled offsets


def false_alarm_offsets(found: Outcomes) -> np.ndarray:
    """float64 [C]: each keyword's offset m_k, the median logit of its false alarms (NaN
    for a keyword without false alarms)."""
    logit, false = _logits(found), ~found.hit
    offsets = np.full(found.num_keywords, np.nan)
    for k in np.unique(found.label[false]):
        offsets[k] = np.median(logit[false & (found.label == k)])
    return offsets


def _pooled_cut(normalised: np.ndarray, allowed: int) -> float:
    """The lowest distinct value tau of `normalised` [n] (false alarms' z) whose cut
    z >= tau keeps at most `allowed` of them; just above the highest if none does."""
    if normalised.size == 0:
        return -np.inf
    z = np.sort(normalised)[::-1]
    ends = np.flatnonzero(np.append(z[1:] != z[:-1], True))  # last of each tie group
    fits = ends[ends + 1 <= allowed]
    return float(z[fits[-1]]) if fits.size else float(np.nextafter(z[0], np.inf))


def _offset_threshold(score, normalised, offset: float, cut: float) -> float:
    """One keyword's threshold for the pooled cut: sigmoid(offset + cut), within the gap
    the cut leaves in its false alarms' scores [n] (descending) and z [n], in float32."""
    kept = normalised >= cut
    low = _just_above(score[~kept][0]) if np.any(~kept) else 0.0
    high = float(score[kept][-1]) if np.any(kept) else ABOVE_ALL
    return float(np.float32(min(max(_sigmoid(offset + cut), low), high)))


def pooled_offset_thresholds(found: Outcomes, fa_per_hour) -> tuple[float, ...]:
    """[C] thresholds of the `pooled_offsets` rule (module docstring) for a system budget
    of `fa_per_hour` (> 0) false alarms per hour: at most that many on `found`."""
    budget, hours = _checked(found, fa_per_hour)
    false = ~found.hit
    offsets = false_alarm_offsets(found)
    normalised = _logits(found) - offsets[found.label]  # NaN for keywords without FAs
    cut = _pooled_cut(normalised[false], allowed_false_alarms(budget, hours))
    thresholds = []
    for k in range(found.num_keywords):
        mine = false & (found.label == k)
        if not np.any(mine):
            thresholds.append(_no_false_alarm_threshold(found, k))
        else:
            thresholds.append(
                _offset_threshold(found.score[mine], normalised[mine], offsets[k], cut)
            )
    return tuple(thresholds)


# ------------------------------------------------------------------- fitted tails


@dataclasses.dataclass(frozen=True)
class TailFit:
    """An exponential tail of one keyword's false-alarm logits over `hours` of audio:
    rate(t) = count / hours * exp(-(t - anchor) / scale) FA/h at logits t >= anchor.
    anchor: the logit of the count-th highest false alarm (whose score is `anchor_score`,
    a probability); scale (logits, >= 0); pooled: the scale is all keywords' (too few
    false alarms of its own)."""

    anchor: float
    anchor_score: float
    count: int
    scale: float
    pooled: bool
    hours: float

    def logit_at(self, fa_per_hour: float) -> float:
        """The logit t >= anchor where the fitted rate equals `fa_per_hour` (anchor when
        the rate there is already at most that)."""
        return self.anchor + self.scale * max(0.0, math.log(self.count / self.hours / fa_per_hour))


def _tail(logit_desc: np.ndarray, min_tail: int, tail_fraction: float) -> tuple[int, float]:
    """(m, summed excess over the m-th highest of the m - 1 above it) of one keyword's
    false-alarm logits [n >= 1], descending."""
    n = len(logit_desc)
    count = min(n, max(min_tail, math.ceil(tail_fraction * n)))
    return count, float(np.sum(logit_desc[: count - 1] - logit_desc[count - 1]))


def tail_fits(
    found: Outcomes, min_tail: int = MIN_TAIL, tail_fraction: float = TAIL_FRACTION
) -> list[TailFit | None]:
    """[C] the `fitted_tail` fit of each keyword's false alarms (module docstring); None
    for a keyword without false alarms, or with fewer than `min_tail` when no keyword has
    two false alarms to lend a pooled scale."""
    min_tail = checks.require_int("min_tail", min_tail, at_least=2)
    checks.require_number("tail_fraction", tail_fraction, above=0, at_most=1)
    hours, logit, false = _hours(found.hours), _logits(found), ~found.hit
    mine = {k: false & (found.label == k) for k in range(found.num_keywords)}
    mine = {k: keep for k, keep in mine.items() if np.any(keep)}  # in descending order
    tails = {k: _tail(logit[keep], min_tail, tail_fraction) for k, keep in mine.items()}
    spacings = sum(count - 1 for count, _ in tails.values())
    pooled = sum(excess for _, excess in tails.values()) / spacings if spacings else None
    fits: list[TailFit | None] = [None] * found.num_keywords
    for k, (count, excess) in tails.items():
        own = int(np.sum(mine[k])) >= min_tail
        scale = excess / (count - 1) if own else pooled
        if scale is not None:
            anchor = int(np.flatnonzero(mine[k])[count - 1])  # its count-th highest
            fits[k] = TailFit(
                float(logit[anchor]),
                float(found.score[anchor]),
                count,
                float(scale),
                pooled=not own,
                hours=hours,
            )
    return fits


def _tail_threshold(curve: Curve, fit: TailFit | None, share: float) -> float:
    """One keyword's `fitted_tail` threshold for its share (FA/h): equal shares' cut where
    the share allows at least fit.count false alarms on the data (or without a fit), else
    the fitted tail's, in float32, never below the cut that keeps fit.count of them (so
    the threshold never rises with the share)."""
    if fit is None or allowed_false_alarms(share, fit.hours) >= fit.count:
        return keyword_threshold(curve, share)
    floor = keyword_threshold(curve, fit.count / fit.hours)  # the anchor's, but for ties
    if fit.scale == 0:  # the whole tail tied at the anchor: nothing fitted above it
        return max(_just_above(fit.anchor_score), floor)
    return max(float(np.float32(_sigmoid(fit.logit_at(share)))), floor)


def fitted_tail_thresholds(
    found: Outcomes,
    fa_per_hour,
    min_tail: int = MIN_TAIL,
    tail_fraction: float = TAIL_FRACTION,
) -> tuple[float, ...]:
    """[C] thresholds of the `fitted_tail` rule (module docstring) for a system budget of
    `fa_per_hour` (> 0) false alarms per hour: each keyword's fitted rate meets its equal
    share B / C (on average over new data, not necessarily on `found`)."""
    budget, _ = _checked(found, fa_per_hour)
    share = budget / found.num_keywords
    fits = tail_fits(found, min_tail, tail_fraction)
    return tuple(
        _tail_threshold(det_curve(*found.keyword(k), found.hours), fits[k], share)
        for k in range(found.num_keywords)
    )


# ------------------------------------------------------------------ measuring them


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


def compare_rules(
    dev_found: Outcomes, final_found: Outcomes, budgets: Sequence, rules: Sequence[str] = RULES
) -> list[dict]:
    """A table, one row per rule and budget: thresholds chosen on `dev_found` by the rule,
    measured on it and on `final_found` (the same keywords). Columns: rule, budget (FA/h),
    dev_fa_per_hour, dev_miss_rate, final_fa_per_hour, final_miss_rate (None without
    ground truth), final_false_alarms, final_hours, ratio (final FA/h / budget)."""
    if final_found.num_keywords != dev_found.num_keywords:
        raise ValueError(
            f"final_found: {final_found.num_keywords} keywords; dev_found has "
            f"{dev_found.num_keywords}"
        )
    rows = []
    for rule in rules:
        for point in choose(dev_found, budgets, rule=rule):
            dev = measure(dev_found, point.thresholds)
            final = measure(final_found, point.thresholds)
            rows.append(
                {
                    "rule": rule,
                    "budget": point.fa_per_hour,
                    "dev_fa_per_hour": dev["fa_per_hour"],
                    "dev_miss_rate": dev["miss_rate"],
                    "final_fa_per_hour": final["fa_per_hour"],
                    "final_miss_rate": final["miss_rate"],
                    "final_false_alarms": final["false_alarms"],
                    "final_hours": final["hours"],
                    "ratio": final["fa_per_hour"] / point.fa_per_hour,
                }
            )
    return rows


def comparison_markdown(rows: Sequence[Mapping]) -> str:
    """`compare_rules`' rows as a Markdown table (FA/h to 2 decimals, rates in %)."""

    def rate(value):
        return "n/a" if value is None else f"{100 * value:.1f}%"

    lines = [
        "| rule | budget FA/h | dev FA/h | final FA/h | final / budget | final miss rate |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['rule']} | {row['budget']:g} | {row['dev_fa_per_hour']:.2f} | "
            f"{row['final_fa_per_hour']:.2f} | {row['ratio']:.2f} | "
            f"{rate(row['final_miss_rate'])} |"
        )
    return "\n".join(lines)
