"""The evaluators: scores equal the metrics on the whole set however it is batched; the
detection curves are the pooled prefixes of the matching; bad input is named."""

import jax
import numpy as np
import pytest

import metrics
from experiments.scoring.evaluators import detection, tracking


def _label_batches(rng, count=3, classes=4):
    batches = []
    for _ in range(count):
        gold = np.repeat(rng.integers(0, classes, size=(2, 8)), 5, axis=1)
        pred = np.where(rng.random(gold.shape) < 0.8, gold, rng.integers(0, classes, gold.shape))
        mask = np.arange(40) < rng.integers(20, 41, size=(2, 1))
        batches.append((pred.astype(np.int32), gold.astype(np.int32), mask))
    return batches


def test_tracking_scores_the_whole_set_not_a_mean_of_batches():
    batches = _label_batches(np.random.default_rng(0))
    scores = tracking.evaluate(lambda batch: batch, batches, num_classes=4)
    pred, gold, mask = (np.concatenate(parts) for parts in zip(*batches, strict=True))
    whole = metrics.timestep_prf(pred, gold, mask, num_classes=4)
    instance = metrics.instance_prf(pred, gold, mask, num_classes=4)
    assert scores["timestep"]["f1"] == pytest.approx(float(whole.f1), abs=1e-6)
    assert scores["instance"]["recall"] == pytest.approx(float(instance.recall), abs=1e-6)
    assert len(scores["timestep_f1_per_class"]) == 4
    with pytest.raises(ValueError, match="no batches"):
        tracking.evaluate(lambda batch: batch, [], num_classes=4)


def test_tracking_per_call_counts_add_up_and_bootstrap_around_the_score():
    batches = _label_batches(np.random.default_rng(1), count=4)
    dicts = [  # the last batch's second row is a filler row
        {"pred": p, "gold": g, "mask": m, "example_mask": np.array([True, i < 3])}
        for i, (p, g, m) in enumerate(batches)
    ]
    scored = tracking.evaluate_smoothed(
        lambda b: (b["pred"], b["gold"], b["mask"] & b["example_mask"][:, None]),
        dicts,
        num_classes=4,
        smoothers={},
        per_call=True,
    )["raw"]
    each = scored["per_call"]
    assert each["timestep"].tp.shape == (7, 4) and each["instance"].gold.shape == (7, 4)
    pred, gold, mask = (np.concatenate(parts)[:7] for parts in zip(*batches, strict=True))
    pooled = metrics.timestep_counts(pred, gold, mask, num_classes=4)
    np.testing.assert_array_equal(each["timestep"].tp.sum(0), pooled.tp)
    np.testing.assert_array_equal(each["timestep"].fn.sum(0), pooled.fn)
    bounds = tracking.bootstrap_intervals(each, resamples=300, seed=0)
    assert bounds == tracking.bootstrap_intervals(each, resamples=300, seed=0)
    for name in ("timestep", "instance"):
        low, high = bounds[f"{name}_f1"]
        assert low < high and low <= scored[name]["f1"] <= high
    same = jax.tree_util.tree_map(lambda c: np.repeat(c[:1], 5, axis=0), each)  # 5 equal calls
    one = metrics.prf_from_counts(jax.tree_util.tree_map(lambda c: c[0], each["timestep"])).f1
    assert tracking.bootstrap_intervals(same, resamples=50, seed=0)["timestep_f1"] == (
        pytest.approx([float(one)] * 2)
    )
    with pytest.raises(ValueError, match="no calls"):
        tracking.bootstrap_intervals(
            jax.tree_util.tree_map(lambda c: c[:0], each), resamples=5, seed=0
        )


def test_tracking_counts_early_frames_on_the_given_clock_only_when_asked():
    batches = _label_batches(np.random.default_rng(2))
    batches = [(np.roll(g, -6, axis=1), g, m) for _, g, m in batches]  # 6 frames ahead
    smooth = {"smoothed": lambda pred, mask: np.where(mask, pred, 0).astype(np.int32)}
    scored = tracking.evaluate_smoothed(
        lambda batch: batch, batches, num_classes=4, smoothers=smooth, hop_s=0.04
    )
    pred, gold, mask = (np.concatenate(parts) for parts in zip(*batches, strict=True))
    whole = metrics.early_frames(pred, gold, mask, num_classes=4, hop_s=0.04, margin_s=0.5)
    for stream in ("raw", "smoothed"):
        early = scored[stream]["early_frames"]
        assert (early["margin_s"], early["hop_s"]) == (0.5, 0.04)
        assert early["early"] == np.asarray(whole.counts.early).tolist()
        assert early["predicted"] == np.asarray(whole.counts.predicted).tolist()
        assert early["per_class"][0] is None  # the background: not a question
        assert early["per_class"][1:] == [float(v) for v in np.asarray(whole.share)[1:]]
        assert early["overall"] == float(whole.overall) and 0 < early["overall"] < 1
    # 6 frames ahead at 40 ms (0.24 s) is within 0.5 s; at 10 ms with no margin it is not
    strict = tracking.evaluate_smoothed(
        lambda batch: batch, batches, num_classes=4, smoothers={}, hop_s=0.01, early_margin_s=0
    )["raw"]["early_frames"]
    assert strict["overall"] > early["overall"]
    assert "early_frames" not in tracking.evaluate(lambda batch: batch, batches, num_classes=4)


def _kws_batch(rng, rows=2, keywords=3):
    start = np.sort(rng.integers(0, 40, size=(rows, 4)) / 8, axis=1).astype(np.float32)
    return {
        "start": start,
        "end": start + 0.5,
        "label": rng.integers(0, keywords, size=(rows, 4)).astype(np.int32),
        "valid": rng.random((rows, 4)) < 0.8,
        "duration": np.full(rows, 6.0, np.float32),
        "example_mask": np.ones(rows, bool),
    }


def _noisy_detector(rng):
    def detect(batch):
        jitter = rng.integers(-2, 3, size=batch["start"].shape) / 8
        return {
            "start": (batch["start"] + jitter).astype(np.float32),
            "end": (batch["end"] + jitter).astype(np.float32),
            "score": rng.random(batch["start"].shape).astype(np.float32),
            "label": batch["label"],
            "valid": batch["valid"] | (rng.random(batch["valid"].shape) < 0.3),
        }

    return detect


def test_detection_scores_and_curves_match_the_metrics():
    rng = np.random.default_rng(4)
    batches = [_kws_batch(rng, rows=4, keywords=20) for _ in range(3)]
    result = detection.evaluate(_noisy_detector(rng), batches, num_keywords=20)
    hours = 12 * 6.0 / 3600
    assert result["hours"] == pytest.approx(hours) and result["seconds"] >= 0
    # The evaluator scores under jit; op by op, the metric gives the same bits (here a
    # mean over classes summed in the compiler's order was one ulp off).
    expected = metrics.detection_scores(
        result["detections"], result["truth"], num_classes=20, total_hours=result["hours"]
    )
    for key in ("mAP", "AP@0.05", "AP@0.75", "FRR@5", "FRR@25"):
        assert result["scores"][key] == float(expected[key]), key
    np.testing.assert_array_equal(result["scores"]["AP"], expected["AP"])  # NaN: no truth
    pooled = metrics.pooled_matches(
        result["detections"], result["truth"], num_classes=20, iou=detection.DET_IOU
    )
    hits = np.asarray(pooled["hit"])[np.asarray(pooled["evaluated"])]
    det = result["curves"]["det"]
    assert det["fa_per_hour"][-1] == pytest.approx((~hits).sum() / hours)
    assert det["miss_rate"][-1] == pytest.approx(1 - hits.sum() / int(pooled["num_ground_truth"]))
    assert np.all(np.diff(det["fa_per_hour"]) >= 0) and np.all(np.diff(det["miss_rate"]) <= 0)
    pr = result["curves"]["pr"]
    assert len(pr["recall"]) == len(pr["precision"]) == hits.size
    assert min(pr["precision"]) >= 0 and max(pr["recall"]) <= 1


def test_detection_refuses_the_unknown_class_in_ground_truth():
    rng = np.random.default_rng(2)
    batch = _kws_batch(rng)
    batch["label"][0, 0], batch["valid"][0, 0] = 3, True  # the unknown class of 3 keywords
    with pytest.raises(ValueError, match="unknown_class=False"):
        detection.evaluate(_noisy_detector(rng), [batch], num_keywords=3, timed=False)
    with pytest.raises(ValueError, match="no batches"):
        detection.evaluate(_noisy_detector(rng), [], num_keywords=3)


_TRUTH_FIELDS = ("start", "end", "label", "valid")


def _scored(rng, batches=8, rows=4):
    """detection.evaluate's result on random utterances of 3 keywords."""
    found = [_kws_batch(rng, rows=rows) for _ in range(batches)]
    return detection.evaluate(_noisy_detector(rng), found, num_keywords=3, timed=False)


def test_bootstrap_of_identical_utterances_has_zero_width_at_the_score():
    rng = np.random.default_rng(3)
    one = _kws_batch(rng, rows=1)
    copies = 8
    detections = {k: np.repeat(v, copies, axis=0) for k, v in _noisy_detector(rng)(one).items()}
    truth = {k: np.repeat(one[k], copies, axis=0) for k in _TRUTH_FIELDS}
    durations = np.repeat(one["duration"], copies)
    point = jax.jit(metrics.detection_scores, static_argnames="num_classes")(
        detections, truth, num_classes=3, total_hours=durations.sum() / 3600
    )
    intervals = detection.bootstrap_intervals(detections, truth, durations, 3, resamples=20, seed=0)
    assert set(intervals) == {"mAP", "AP@0.05", "FRR@5", "FRR@25"}
    assert 0 < float(point["mAP"]) < 1  # a score the resamples could have moved
    for key, (low, high) in intervals.items():
        assert low == high == pytest.approx(float(point[key]), abs=1e-6), key


def test_bootstrap_intervals_hold_the_score_and_follow_the_seed():
    rng = np.random.default_rng(4)
    result = _scored(rng)
    rows = len(result["durations"])
    assert result["durations"].shape == (rows,) == result["truth"]["valid"].shape[:1]
    assert result["durations"].sum() / 3600 == pytest.approx(result["hours"])
    arrays = (result["detections"], result["truth"], result["durations"], 3)
    intervals = detection.bootstrap_intervals(*arrays, resamples=50, seed=0)
    for key, (low, high) in intervals.items():
        assert low <= result["scores"][key] <= high, key
    assert intervals["mAP"][0] < intervals["mAP"][1]
    assert detection.bootstrap_intervals(*arrays, resamples=50, seed=0) == intervals
    assert detection.bootstrap_intervals(*arrays, resamples=50, seed=1) != intervals
    # A filler row (duration 0: padding of the last batch, nothing valid) is dropped
    # before resampling, so it changes nothing.
    padded = [
        {k: np.concatenate([v, np.zeros_like(v[:1])]) for k, v in part.items()}
        for part in (result["detections"], result["truth"])
    ]
    durations = np.append(result["durations"], 0.0)
    assert detection.bootstrap_intervals(*padded, durations, 3, resamples=50, seed=0) == intervals


def test_bootstrap_refuses_bad_arguments_by_name():
    rng = np.random.default_rng(5)
    batch = _kws_batch(rng, rows=4)
    truth = {k: batch[k] for k in _TRUTH_FIELDS}
    arrays = (_noisy_detector(rng)(batch), truth, batch["duration"], 3)
    with pytest.raises(ValueError, match="resamples"):
        detection.bootstrap_intervals(*arrays, resamples=0)
    with pytest.raises(TypeError, match="resamples"):
        detection.bootstrap_intervals(*arrays, resamples=2.5)
    with pytest.raises(ValueError, match="level"):
        detection.bootstrap_intervals(*arrays, resamples=5, level=95)
    with pytest.raises(ValueError, match="durations"):
        detection.bootstrap_intervals(*arrays[:2], batch["duration"][:-1], 3, resamples=5)
    with pytest.raises(ValueError, match="durations"):
        detection.bootstrap_intervals(*arrays[:2], np.zeros_like(batch["duration"]), 3)
