"""Property tests: jitted metrics == NumPy loop reference (and scikit-learn) on random batches.

Shapes come from small fixed menus so that `jit` compiles a handful of times, while
hypothesis varies the contents (including all-masked rows, empty classes, ties).
"""

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import precision_recall_fscore_support

import metrics
from metrics import reference

pytestmark = pytest.mark.early  # about 90 s of compiling: see tests/conftest.py

PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

_timestep = jax.jit(metrics.timestep_prf, static_argnames="num_classes")
_instance = jax.jit(metrics.instance_prf, static_argnames=("num_classes", "background", "min_run"))
_detection = jax.jit(
    metrics.detection_scores,
    static_argnames=("num_classes", "ignore_classes", "iou_thresholds", "fa_per_hour"),
)
_pooled = jax.jit(metrics.pooled_matches, static_argnames=("num_classes", "iou", "ignore_classes"))
_counts = tuple(
    jax.jit(count, static_argnames="num_classes")
    for count in (metrics.timestep_counts, metrics.instance_counts)
)


@st.composite
def labelled_batches(draw):
    """(pred, gold, mask, num_classes): segment-structured labels, random padding."""
    batch = draw(st.sampled_from([1, 3]))
    length = draw(st.sampled_from([1, 9, 40]))
    num_classes = draw(st.sampled_from([2, 3, 5]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def segmented():  # runs of random lengths, so instances of all sizes occur
        lengths = rng.integers(1, 9, size=length)
        labels = rng.integers(0, num_classes, size=length)
        return np.repeat(labels, lengths)[:length]

    gold = np.stack([segmented() for _ in range(batch)])
    flip = rng.random(gold.shape) < draw(st.sampled_from([0.0, 0.1, 0.5]))
    pred = np.where(flip, rng.integers(0, num_classes, gold.shape), gold)
    if draw(st.booleans()):
        pred = np.stack([segmented() for _ in range(batch)])
    lengths = rng.integers(0, length + 1, size=batch)
    mask = np.arange(length)[None] < lengths[:, None]
    mask &= rng.random(gold.shape) > draw(st.sampled_from([0.0, 0.05]))  # holes cut runs
    return pred.astype(np.int32), gold.astype(np.int32), mask, num_classes


@PROPERTY_SETTINGS
@given(labelled_batches())
def test_timestep_matches_reference_and_sklearn(data):
    pred, gold, mask, num_classes = data
    result = _timestep(pred, gold, mask, num_classes=num_classes)
    expected = reference.timestep_prf(pred, gold, mask, num_classes=num_classes)
    np.testing.assert_allclose(result, expected, atol=1e-6)
    if mask.any():
        sk = precision_recall_fscore_support(
            gold[mask], pred[mask], average="macro", zero_division=0
        )[:3]
        np.testing.assert_allclose(result, sk, atol=1e-6)


@PROPERTY_SETTINGS
@given(labelled_batches(), st.sampled_from([1, 2, 5, 9]), st.sampled_from([0, 1]))
def test_instance_matches_reference(data, min_run, background):
    pred, gold, mask, num_classes = data
    kwargs = dict(num_classes=num_classes, background=background, min_run=min_run)
    result = _instance(pred, gold, mask, **kwargs)
    expected = reference.instance_prf(pred, gold, mask, **kwargs)
    np.testing.assert_allclose(result, expected, atol=1e-6)


@PROPERTY_SETTINGS
@given(labelled_batches(), st.integers(1, 2))
def test_counts_merged_over_batch_splits_equal_one_call(data, split):
    pred, gold, mask, num_classes = data
    split = min(split, pred.shape[0])
    for count in _counts:
        whole = count(pred, gold, mask, num_classes=num_classes)
        parts = [
            count(p, g, m, num_classes=num_classes)
            for p, g, m in (
                (pred[:split], gold[:split], mask[:split]),
                (pred[split:], gold[split:], mask[split:]),
            )
            if p.shape[0]
        ]
        merged = parts[0] if len(parts) == 1 else parts[0] + parts[1]
        for a, b in zip(whole, merged, strict=True):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(
            metrics.prf_from_counts(merged), metrics.prf_from_counts(whole), atol=0
        )


GRID = 1 / 8  # dyadic times: IoUs are exact in float32 and float64 alike


@st.composite
def detection_batches(draw):
    """(detections, ground_truth, num_classes): times on a 1/8 s grid, tied scores."""
    batch = draw(st.sampled_from([1, 3]))
    num_dets = draw(st.sampled_from([0, 1, 7]))
    num_gts = draw(st.sampled_from([0, 1, 5]))
    num_classes = draw(st.sampled_from([1, 3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def segments(count):
        start = rng.integers(0, 80, size=(batch, count)) * GRID
        length = rng.integers(0, 16, size=(batch, count)) * GRID  # zero lengths included
        return {
            "start": start.astype(np.float32),
            "end": (start + length).astype(np.float32),
            "label": rng.integers(-1, num_classes + 1, size=(batch, count)).astype(np.int32),
            "valid": rng.random((batch, count)) < 0.85,
        }

    ground_truth = segments(num_gts)
    detections = segments(num_dets)
    # Some detections copy a ground truth with jitter, so matches and fall-backs happen.
    if num_gts:
        source = rng.integers(0, num_gts, size=(batch, num_dets))
        copy = rng.random((batch, num_dets)) < 0.6
        jitter = rng.integers(-3, 4, size=(batch, num_dets, 2)) * GRID
        for key, j in (("start", 0), ("end", 1)):
            copied = np.take_along_axis(ground_truth[key], source, axis=1) + jitter[..., j]
            detections[key] = np.where(copy, copied, detections[key]).astype(np.float32)
        copied_label = np.take_along_axis(ground_truth["label"], source, axis=1)
        detections["label"] = np.where(copy, copied_label, detections["label"])
        detections["end"] = np.maximum(detections["end"], detections["start"])
    scores = np.array([0.9, 0.5, 0.5, 0.25, 0.0, -0.0], np.float32)  # ties and signed zero
    detections["score"] = rng.choice(scores, size=(batch, num_dets)).astype(np.float32)
    return detections, ground_truth, num_classes


@PROPERTY_SETTINGS
@given(
    detection_batches(),
    st.sampled_from([0.3, 0.7, 1.3]),
    st.sampled_from([(), (0,)]),
    st.sampled_from([None, (0.1, 0.5, 0.75)]),
)
def test_detection_matches_reference(data, total_hours, ignore, thresholds):
    detections, ground_truth, num_classes = data
    kwargs = dict(
        num_classes=num_classes,
        total_hours=total_hours,
        ignore_classes=ignore,
        iou_thresholds=thresholds,
        fa_per_hour=(0.0, 5.0, 25.0),
    )
    result = _detection(detections, ground_truth, **kwargs)
    expected = reference.detection_scores(detections, ground_truth, **kwargs)
    assert set(result) == set(expected)
    for key in expected:
        np.testing.assert_allclose(result[key], expected[key], atol=1e-6, err_msg=key)


@PROPERTY_SETTINGS
@given(detection_batches(), st.sampled_from([0.05, 0.5, 1.0]), st.sampled_from([(), (0,)]))
def test_pooled_matches_match_reference(data, iou, ignore):
    """Evaluated detections first, in the reference's order (score, then flat index),
    with the same outcomes; the others after them, never hits."""
    detections, ground_truth, num_classes = data
    kwargs = dict(num_classes=num_classes, iou=iou, ignore_classes=ignore)
    result = jax.tree_util.tree_map(np.asarray, _pooled(detections, ground_truth, **kwargs))
    score, hit, num_gt = reference.pooled_matches(detections, ground_truth, **kwargs)
    n = len(score)
    assert result["evaluated"][:n].all() and not result["evaluated"][n:].any()
    np.testing.assert_array_equal(result["score"][:n], score)
    np.testing.assert_array_equal(result["hit"][:n], hit)
    assert not result["hit"][n:].any() and int(result["num_ground_truth"]) == num_gt
    flat_score = np.asarray(detections["score"], np.float32).reshape(-1)
    assert sorted(result["index"].tolist()) == list(range(flat_score.size))  # a permutation
    np.testing.assert_array_equal(flat_score[result["index"]], result["score"])


@pytest.mark.parametrize("seed", [0, 1])
def test_detection_matches_reference_at_a_realistic_size(seed):
    rng = np.random.default_rng(seed)
    batch, num_dets, num_gts, num_classes = 8, 40, 12, 6
    start = rng.integers(0, 2000, (batch, num_gts)) / 128
    ground_truth = {
        "start": start.astype(np.float32),
        "end": (start + rng.integers(10, 90, start.shape) / 128).astype(np.float32),
        "label": rng.integers(0, num_classes, start.shape).astype(np.int32),
        "valid": rng.random(start.shape) < 0.9,
    }
    source = rng.integers(0, num_gts, (batch, num_dets))
    jitter = rng.integers(-12, 13, (batch, num_dets, 2)) / 128
    det_start = np.take_along_axis(ground_truth["start"], source, 1) + jitter[..., 0]
    det_end = np.maximum(
        np.take_along_axis(ground_truth["end"], source, 1) + jitter[..., 1], det_start
    )
    detections = {
        "start": det_start.astype(np.float32),
        "end": det_end.astype(np.float32),
        "score": rng.random((batch, num_dets)).astype(np.float32),
        "label": np.where(
            rng.random((batch, num_dets)) < 0.8,
            np.take_along_axis(ground_truth["label"], source, 1),
            rng.integers(0, num_classes, (batch, num_dets)),
        ).astype(np.int32),
        "valid": np.ones((batch, num_dets), bool),
    }
    kwargs = dict(num_classes=num_classes, total_hours=0.05)
    result = _detection(detections, ground_truth, **kwargs)
    expected = reference.detection_scores(detections, ground_truth, **kwargs)
    for key in expected:
        np.testing.assert_allclose(result[key], expected[key], atol=1e-6, err_msg=key)
