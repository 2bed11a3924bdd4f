"""Keyword-spotting scoring: a detector on a split's whole utterances -> AP, mAP, FRR,
RTF, bootstrap intervals, DET curves and operating points.

    scores = keywords.score_detector(detect, source, num_keywords=20, batch_size=16,
                                     folder=folder)          # writes detections.npz, curves
    scores.update(keywords.score_intervals(folder, 20, resamples=200, seed=0))
    points, summary = keywords.choose_operating_points(folder, names, budgets, split,
                                                       other_folders={"heldout": ...})
    streamed = keywords.score_streaming(bundle_folder, batches)   # the streaming detector

`detect(batch)` returns padded detections (`metrics.detection_scores`' format) of a
`cskws_jax.input_pipeline.evaluation_batches` batch: a model's `cskws_jax.train.detect`
with its parameters, a baseline's, or one whose labels were mapped onto another keyword
list (`experiments.evaluate`). The runner (`experiments.cskws`), `experiments.evaluate`
and the studies all score through this module; its core is
`experiments.scoring.evaluators.detection`.
"""

from __future__ import annotations

import os

import numpy as np

import metrics
from cskws_jax import bundle as kws_bundle
from cskws_jax import input_pipeline, operating_points
from cskws_jax import streaming as kws_streaming
from experiments.scoring import latency
from experiments.scoring.evals import transfer_key
from experiments.scoring.evaluators import detection
from speechkit import batching, files

REPORTED = ("mAP", "AP@0.05", "AP@0.75", "FRR@5", "FRR@25")
INTERVALS = ("mAP", "AP@0.05", "FRR@5", "FRR@25")  # the scores with bootstrap intervals
FRR_BUDGETS = {"FRR@5": 5.0, "FRR@25": 25.0}  # FA per hour behind each reported FRR
OTHER_SPLIT_REPORTED = (*REPORTED, "test_hours")  # what an evaluation's entry keeps
DET_CURVE_POINTS = 400  # cuts per DET curve in det.json, at most


def evaluation_batches(source, *, num_keywords: int, batch_size: int, lengths: str = "exact"):
    """Whole-utterance batches of `source` for scoring (no unknown class). `lengths`
    ("exact" or "buckets", `speechkit.batching.LENGTHS`): with "buckets" each batch's
    audio and audio_mask [B, T] are padded further to T = `speechkit.batching.bucket_length`
    (pad_multiple x 2^k frames), masked, so that a split's batches take a few shapes."""
    batching.check_lengths(lengths)
    pipeline = input_pipeline.PipelineConfig(batch_size=batch_size, unknown_class=False)
    batches = input_pipeline.evaluation_batches(source, pipeline, num_keywords=num_keywords)
    if lengths == "exact":
        return batches
    return batches.map(lambda batch: bucketed(batch, pipeline.pad_multiple))


def bucketed(batch: dict, multiple: int) -> dict:
    """An evaluation batch with audio [B, T, F] and audio_mask [B, T] padded to
    T' = `batching.bucket_length(T, multiple)` frames (the added frames masked)."""
    frames = batching.bucket_length(batch["audio"].shape[1], multiple)
    return batching.pad_steps(batch, {"audio": frames, "audio_mask": frames})


def score_detector(
    detect, source, *, num_keywords: int, batch_size: int, folder: str, lengths: str = "exact"
) -> dict:
    """Detects and scores every utterance of `source`: REPORTED scores, "RTF" (detection
    seconds per second of audio after compilation), "AP_per_keyword@0.05" and
    "test_hours". Writes `folder/detections.npz` (padded detections and truth per row,
    `durations`: seconds per row, 0 on filler rows, and `hours`) and
    `folder/detection_curves.json`. `lengths`: how batches are padded along time
    (`evaluation_batches`; "buckets": a few compiled shapes of `detect` per split)."""
    os.makedirs(folder, exist_ok=True)
    batches = evaluation_batches(
        source, num_keywords=num_keywords, batch_size=batch_size, lengths=lengths
    )
    result = detection.evaluate(detect, batches, num_keywords=num_keywords)
    files.save_npz(
        os.path.join(folder, "detections.npz"),
        **{f"detection_{k}": v for k, v in result["detections"].items()},
        **{f"truth_{k}": v for k, v in result["truth"].items()},
        durations=result["durations"],
        hours=result["hours"],
    )
    files.write_json(os.path.join(folder, "detection_curves.json"), result["curves"])
    scores = result["scores"]
    return {
        **{key: scores[key] for key in REPORTED},
        "RTF": result["seconds"] / (result["hours"] * 3600),
        "AP_per_keyword@0.05": scores["AP"][0],
        "test_hours": result["hours"],
    }


def saved_arrays(folder: str) -> tuple[dict, dict, dict]:
    """(detections, truth, the rest: hours and, when saved, durations) of the arrays
    `score_detector` saved in `folder/detections.npz`."""
    with np.load(os.path.join(folder, "detections.npz")) as saved:
        parts = {prefix: {} for prefix in ("detection", "truth")}
        rest = {}
        for key in saved.files:
            prefix, _, field = key.partition("_")
            if prefix in parts:
                parts[prefix][field] = saved[key]
            else:
                rest[key] = saved[key]
    return parts["detection"], parts["truth"], rest


def score_intervals(folder: str, num_keywords: int, *, resamples: int, seed: int) -> dict:
    """{"intervals": 95 % bootstrap intervals of INTERVALS over the utterances saved in
    `folder` (`detection.bootstrap_intervals`), "allowed_false_alarms": per FRR budget b,
    b x hours}."""
    detections, truth, rest = saved_arrays(folder)
    if "durations" not in rest:
        raise ValueError(f"{folder}/detections.npz: no per-utterance durations (an older run)")
    intervals = detection.bootstrap_intervals(
        detections,
        truth,
        rest["durations"],
        num_keywords,
        resamples=resamples,
        seed=seed,
        fa_per_hour=tuple(FRR_BUDGETS.values()),
    )
    hours = float(rest["hours"])
    return {
        "intervals": {key: intervals[key] for key in INTERVALS},
        "allowed_false_alarms": {key: budget * hours for key, budget in FRR_BUDGETS.items()},
    }


def saved_outcomes(folder: str, num_keywords: int, rows=None) -> operating_points.Outcomes:
    """The `cskws_jax.operating_points.Outcomes` of the detections saved in `folder`;
    with `rows` (bool [utterances], in the scored split's order) of those utterances
    alone, over their hours."""
    detections, truth, rest = saved_arrays(folder)
    hours = float(rest["hours"])
    if rows is not None:
        detections, truth, hours = _rows_of(folder, detections, truth, rest, rows)
    return operating_points.outcomes(detections, truth, num_keywords=num_keywords, hours=hours)


def _rows_of(folder: str, detections: dict, truth: dict, rest: dict, rows) -> tuple:
    """(detections, truth, hours) with every row not in `rows` made invalid."""
    if "durations" not in rest:
        raise ValueError(f"{folder}/detections.npz: no per-utterance durations (an older run)")
    rows = np.asarray(rows, bool)
    durations = np.asarray(rest["durations"], np.float64)
    if rows.ndim != 1 or rows.size > durations.size or np.any(durations[: rows.size] <= 0):
        raise ValueError(
            f"rows: shape {rows.shape}; expected one per utterance scored in {folder} "
            f"(at most {int(np.sum(durations > 0))})"
        )
    keep = np.zeros(durations.size, bool)
    keep[: rows.size] = rows

    def masked(fields: dict) -> dict:
        return {**fields, "valid": np.asarray(fields["valid"], bool) & keep[:, None]}

    return masked(detections), masked(truth), float(np.sum(durations[keep])) / 3600


def write_det(folder: str, keywords, split: str) -> tuple[operating_points.Outcomes, dict]:
    """(outcomes, DET curves) of the detections saved in `folder` (labels: the classes
    `keywords` name, in order); writes them as `folder/det.json` (`det_record`)."""
    found = saved_outcomes(folder, len(keywords))
    curves = operating_points.det_curves(found)
    files.write_json(os.path.join(folder, "det.json"), det_record(found, curves, keywords, split))
    return found, curves


def det_record(found, curves: dict, keywords, split: str) -> dict:
    """det.json's content: the DET curves `curves` (`operating_points.det_curves` of
    `found`; per keyword named by `keywords`, in class order), each thinned to
    `DET_CURVE_POINTS` cuts, with the split's name, IoU and hours."""
    return {
        "split": split,
        "iou": found.iou,
        "hours": found.hours,
        "pooled": curves["pooled"].thinned(DET_CURVE_POINTS).to_json(),
        "per_keyword": {
            keyword: curve.thinned(DET_CURVE_POINTS).to_json()
            for keyword, curve in zip(keywords, curves["per_keyword"], strict=True)
        },
    }


def choose_operating_points(
    folder: str, keywords, budgets, split: str, other_folders: dict | None = None
) -> tuple:
    """(operating points, their summary for results.json) of the detector whose test
    detections are saved in `folder`: per-keyword thresholds for each false-alarm budget
    (FA/h, all keywords) chosen there, and measured on each of `other_folders` ({name:
    folder of that split's saved detections}); writes `folder/det.json`."""
    test, curves = write_det(folder, keywords, "test")
    points = operating_points.choose(test, tuple(float(b) for b in budgets), split=split)
    others = {
        name: saved_outcomes(other, len(keywords)) for name, other in (other_folders or {}).items()
    }
    return points, operating_point_summary(points, test, curves["pooled"], others)


def operating_point_summary(points, test, pooled, others: dict | None = None) -> dict:
    """results.json's "operating_points": the rule, and per budget (FA/h, all keywords)
    the false alarms it allows on the test hours (in all, and per keyword under the
    equal share), what the thresholds give on the test split (`measure`: false alarms,
    hits, FA/h, miss rate) and on each of `others` ({name: outcomes}), and the test miss
    rate of one shared threshold at the budget (FRR@budget, for comparison)."""
    num_keywords = test.num_keywords
    entries = []
    for point in points:
        budget = point.fa_per_hour
        within = pooled.fa_per_hour <= budget
        shared = float(np.min(pooled.miss_rate[within]))
        entry = {
            "fa_per_hour": budget,
            "allowed_false_alarms": operating_points.allowed_false_alarms(budget, test.hours),
            "allowed_per_keyword": operating_points.allowed_false_alarms(
                budget / num_keywords, test.hours
            ),
            "test": operating_points.measure(test, point.thresholds),
            "shared_threshold_miss_rate": shared if np.isfinite(shared) else None,
        }
        for name, outcomes in (others or {}).items():
            entry[name] = operating_points.measure(outcomes, point.thresholds)
        entries.append(entry)
    return {
        "rule": "equal share: each keyword's threshold is its lowest score cut with FA/h <= "
        "budget / keywords on the test split",
        "iou": test.iou,
        "test_hours": test.hours,
        "budgets": entries,
    }


def score_streaming(bundle_dir: str, batches) -> dict:
    """An AF-KWS bundle run by the streaming detector (`cskws_jax.streaming.StreamDetector`,
    blocks of one output frame) over evaluation `batches`: mAP, AP@0.05, FRR@5, the
    detection latency of its hits (`metrics.detection_latency`: emission minus the
    keyword's true end), its algorithmic latency (s) and the hours scored."""
    net, params, info = kws_bundle.load(bundle_dir)
    decoding = info.decoding
    detector = kws_streaming.StreamDetector(
        net, params, block_outputs=1, radius=decoding.radius, min_score=decoding.min_score
    )
    num_keywords = net.config.num_keywords
    emitted = []

    def detect(batch):
        found, times = detector.detect(
            batch["audio"], batch["audio_mask"], max_detections=decoding.max_detections
        )
        emitted.append(np.asarray(times))
        return found

    result = detection.evaluate(detect, batches, num_keywords=num_keywords, timed=False)
    late = metrics.detection_latency(
        result["detections"], np.concatenate(emitted), result["truth"], num_classes=num_keywords
    )
    scores = result["scores"]
    return {
        **{key: scores[key] for key in ("mAP", "AP@0.05", "FRR@5")},
        "latency": latency.record(
            [np.asarray(late.latency).ravel()], [np.asarray(late.valid).ravel()]
        ),
        "algorithmic_latency_s": detector.latency_s,
        "hours": result["hours"],
    }


def _number(value, width: int = 10) -> str:
    return f"{value:>{width}.3f}" if value is not None else f"{'-':>{width}}"


def table(results: dict, evaluations=()) -> str:
    """REPORTED scores and RTF per model, and for each of `evaluations` (names of results
    entries, e.g. "heldout") its mAP and transfer ratio."""
    columns = (*REPORTED, "RTF")
    shown = [e for e in evaluations if any(e in scores for scores in results.values())]
    extra = [c for e in shown for c in (f"{e} mAP", transfer_key(e))]
    lines = [
        f"{'model':<18}" + "".join(f"{c:>10}" for c in columns) + "".join(f"{c:>13}" for c in extra)
    ]
    for name, scores in results.items():
        row = f"{name:<18}" + "".join(f"{scores[c]:>10.3f}" for c in columns)
        for evaluation in shown:
            row += _number(scores.get(evaluation, {}).get("mAP"), 13)
            row += _number(scores.get(transfer_key(evaluation)), 13)
        lines.append(row)
    return "\n".join(lines)
