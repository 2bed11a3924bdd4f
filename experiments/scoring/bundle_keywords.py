"""An AF-KWS bundle scored on a keyword corpus (`experiments.scoring.bundles`): the
keywords of both matched by name, the detector run and scored by
`experiments.scoring.keywords.score_detector`, the bundle's operating points measured.

    payload = bundle_keywords.evaluate_kws(bundle_folder, builder, source, settings, workdir)
    payload["scores"]["mAP"], payload["AP_per_keyword@0.05"], payload["operating_points"]

Only the keywords both sides have are scored, in the bundle's order (`KeywordMatch`;
`settings.keywords` "strict" refuses any difference): the corpus's labels and the
detections are mapped onto them, and every threshold onto its scored keyword.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from cskws_jax import bundle as kws_bundle
from cskws_jax import operating_points
from cskws_jax import train as kws_train
from cskws_jax.datasets.features import FEATURES as KWS_FEATURES
from experiments import common
from experiments.scoring import keywords as kws_scoring
from experiments.scoring.corpora import BATCH_LENGTHS, EvaluationError

KEYWORD_POLICIES = ("shared", "strict")

log = common.logger("evaluate")


@dataclasses.dataclass(frozen=True)
class KeywordMatch:
    """The keywords scored: those of both the bundle and the corpus, in the bundle's
    order, and each side's class id -> shared id (-1: dropped)."""

    scored: tuple[str, ...]
    bundle_only: tuple[str, ...]
    corpus_only: tuple[str, ...]
    bundle_to_scored: np.ndarray  # int32 [bundle keywords]
    corpus_to_scored: np.ndarray  # int32 [corpus keywords]

    @classmethod
    def of(cls, bundle_keywords, corpus_keywords, policy: str) -> KeywordMatch:
        if policy not in KEYWORD_POLICIES:
            raise EvaluationError(f"--keywords: expected one of {KEYWORD_POLICIES}, got {policy!r}")
        scored = tuple(k for k in bundle_keywords if k in corpus_keywords)
        match = cls(
            scored=scored,
            bundle_only=tuple(k for k in bundle_keywords if k not in scored),
            corpus_only=tuple(k for k in corpus_keywords if k not in scored),
            bundle_to_scored=_positions(bundle_keywords, scored),
            corpus_to_scored=_positions(corpus_keywords, scored),
        )
        if not scored:
            raise EvaluationError(
                f"no keyword in common: the bundle has {list(bundle_keywords)}, the corpus "
                f"{list(corpus_keywords)}"
            )
        if policy == "strict" and (match.bundle_only or match.corpus_only):
            raise EvaluationError(
                f"--keywords=strict: the bundle's keywords differ from the corpus's (only in "
                f"the bundle: {list(match.bundle_only)}; only in the corpus: "
                f"{list(match.corpus_only)})"
            )
        return match

    def report(self) -> dict:
        return {
            "scored": list(self.scored),
            "dropped_bundle_only": list(self.bundle_only),
            "dropped_corpus_only": list(self.corpus_only),
        }


def _positions(names, scored) -> np.ndarray:
    return np.array([scored.index(n) if n in scored else -1 for n in names], np.int32)


class ScoredKeywordSource:
    """A KWS data source whose keyword labels are the shared ids (`KeywordMatch`);
    occurrences of keywords the bundle lacks become invalid."""

    def __init__(self, source, corpus_to_scored: np.ndarray):
        self.source, self.table = source, corpus_to_scored

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> dict:
        record = dict(self.source[index])
        valid = np.asarray(record["keyword_valid"], bool)
        shared = self.table[np.asarray(record["keyword_label"], np.int64)]
        record["keyword_valid"] = valid & (shared >= 0)
        record["keyword_label"] = np.maximum(shared, 0).astype(np.int32)
        return record


def scored_detections(detections: dict, bundle_to_scored) -> dict:
    """Detections (label = bundle class id) with labels as shared ids; detections of
    keywords the corpus lacks become invalid."""
    shared = jnp.asarray(bundle_to_scored)[detections["label"]]
    return {
        **detections,
        "label": jnp.maximum(shared, 0),
        "valid": detections["valid"] & (shared >= 0),
    }


# ------------------------------------------------------------------------------ cskws


def bundle_detector(net, params, decoding, match: KeywordMatch):
    """detect(batch) of a loaded bundle, its detections labelled with the scored ids of
    `match` (jitted)."""

    @jax.jit
    def detect(params, batch):
        found = kws_train.detect(net, params, batch, decoding)
        return scored_detections(found, match.bundle_to_scored)

    return lambda batch: detect(params, batch)


def scored_thresholds(thresholds, match: KeywordMatch) -> tuple[float, ...]:
    """Per-keyword `thresholds` in the bundle's class order -> those of the scored
    keywords, in `match.scored` order (the dropped keywords' are left out)."""
    if len(thresholds) != len(match.bundle_to_scored):
        raise EvaluationError(
            f"thresholds: {len(thresholds)} values, expected one per bundle keyword "
            f"({len(match.bundle_to_scored)})"
        )
    scored = [0.0] * len(match.scored)
    for bundle_id, scored_id in enumerate(match.bundle_to_scored):
        if scored_id >= 0:
            scored[scored_id] = float(thresholds[bundle_id])
    return tuple(scored)


def kws_operating_points(folder: str, points, match: KeywordMatch, split: str) -> dict:
    """results.json's "operating_points": what each of the bundle's `points`
    (`cskws_jax.config.OperatingPoint`) gives on the detections that
    `experiments.scoring.keywords.score_detector` saved in `folder` (labels: scored ids);
    writes `folder/det.json` (the split's DET curves, named `split`)."""
    found, _ = kws_scoring.write_det(folder, match.scored, split)
    budgets = []
    for point in points:
        thresholds = scored_thresholds(point.thresholds, match)
        budgets.append(
            {
                "fa_per_hour": point.fa_per_hour,
                "chosen_on": point.split,
                "chosen_hours": point.hours,
                "allowed_false_alarms": operating_points.allowed_false_alarms(
                    point.fa_per_hour, found.hours
                ),
                "thresholds": dict(zip(match.scored, thresholds, strict=True)),
                "measured": operating_points.measure(found, thresholds),
            }
        )
    return {"split": split, "iou": found.iou, "hours": found.hours, "budgets": budgets}


def evaluate_kws(
    path: str,
    builder,
    source,
    settings,
    workdir: str,
    split: str = "test",
    batch_lengths: str = BATCH_LENGTHS,
) -> dict:
    """results.json's payload for a cskws bundle scored on a keyword corpus split
    (`split` names it in det.json and "operating_points"; `batch_lengths` as
    `experiments.scoring.bundles.evaluate`)."""
    net, params, info = kws_bundle.load(path)
    if info.features != KWS_FEATURES:
        raise EvaluationError(
            f"{path}: the bundle's front end {info.features} is not the keyword corpora's "
            f"{KWS_FEATURES}"
        )
    corpus_keywords = list(builder.info.metadata["keywords"])
    match = KeywordMatch.of(info.labels, corpus_keywords, settings.keywords)
    if match.bundle_only or match.corpus_only:
        log(
            f"scoring {len(match.scored)} shared keywords; dropped, only in the bundle: "
            f"{list(match.bundle_only)}, only in the corpus: {list(match.corpus_only)}"
        )
    scores = kws_scoring.score_detector(
        bundle_detector(net, params, info.decoding, match),
        ScoredKeywordSource(source, match.corpus_to_scored),
        num_keywords=len(match.scored),
        batch_size=settings.batch_size,
        folder=workdir,
        lengths=batch_lengths,
    )
    per_keyword = scores.pop("AP_per_keyword@0.05")
    points = info.decoding.operating_points
    if not points:
        log(f"{path}: the bundle stores no operating points; none measured")
    return {
        "keywords": match.report(),
        "utterances": len(source),
        "scores": _finite_or_none(scores),
        "AP_per_keyword@0.05": {
            k: _finite_or_none(v) for k, v in zip(match.scored, per_keyword, strict=True)
        },
        "operating_points": _finite_or_none(kws_operating_points(workdir, points, match, split)),
    }


def _finite_or_none(value):
    """`value` with every NaN and inf (no ground truth) as None, in nested dicts and
    lists too, so results.json stays strict JSON."""
    if isinstance(value, dict):
        return {key: _finite_or_none(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_none(v) for v in value]
    if isinstance(value, float | np.floating) and not np.isfinite(value):
        return None
    return value
