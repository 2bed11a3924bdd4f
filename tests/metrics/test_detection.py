"""Hand-computed cases for the detection rules of docs/metrics.md."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import metrics
from metrics import reference


def _segments(rows, with_score, batch_of=None):
    """rows: list of (start, end[, score][, label][, example]) -> padded dict [B, N]."""
    rows = [tuple(r) for r in rows]
    width = 3 if with_score else 2
    examples = [r[width + 1] if len(r) > width + 1 else 0 for r in rows]
    batch = batch_of or (max(examples, default=0) + 1)
    per_example = [[r for r, e in zip(rows, examples, strict=True) if e == b] for b in range(batch)]
    size = max((len(p) for p in per_example), default=0)
    fields = {k: np.zeros((batch, size), np.float32) for k in ("start", "end", "score")}
    fields["label"] = np.zeros((batch, size), np.int32)
    fields["valid"] = np.zeros((batch, size), bool)
    for b, items in enumerate(per_example):
        for i, r in enumerate(items):
            fields["start"][b, i], fields["end"][b, i] = r[0], r[1]
            if with_score:
                fields["score"][b, i] = r[2]
            fields["label"][b, i] = r[width] if len(r) > width else 0
            fields["valid"][b, i] = True
    if not with_score:
        del fields["score"]
    return fields


def _scores(gt_rows, det_rows, **kwargs):
    kwargs.setdefault("num_classes", 1)
    kwargs.setdefault("total_hours", 1.0)
    ground_truth = _segments(gt_rows, with_score=False)
    batch = ground_truth["label"].shape[0]
    detections = _segments(det_rows, with_score=True, batch_of=batch)
    result = jax.jit(lambda d, g: metrics.detection_scores(d, g, **kwargs))(
        detections, ground_truth
    )
    expected = reference.detection_scores(detections, ground_truth, **kwargs)
    assert result.keys() == expected.keys()
    for key in result:
        np.testing.assert_allclose(result[key], expected[key], atol=1e-6, err_msg=key)
    return {k: np.asarray(v) for k, v in result.items()}


def test_iou_1d_rules():
    assert float(metrics.iou_1d(0.0, 2.0, 1.0, 3.0)) == pytest.approx(1 / 3)
    assert float(metrics.iou_1d(0.0, 1.0, 2.0, 3.0)) == 0.0
    assert float(metrics.iou_1d(1.0, 1.0, 1.0, 1.0)) == 0.0  # zero length: 0, not NaN
    assert float(metrics.iou_1d(1.0, 1.0, 0.0, 2.0)) == 0.0
    grid = metrics.iou_1d(
        jnp.array([[0.0], [1.0]]),
        jnp.array([[2.0], [2.0]]),
        jnp.zeros(3),
        jnp.array([1.0, 2.0, 4.0]),
    )
    np.testing.assert_allclose(grid, [[0.5, 1.0, 0.5], [0.0, 0.5, 0.25]])


def test_worked_example_frr_at_budgets():
    gt = [(0, 1), (2, 3), (4, 5)]
    dets = [(0, 1, 0.9), (6, 7, 0.8), (2, 3, 0.7), (8, 9, 0.6), (4, 5, 0.5)]
    s = _scores(gt, dets, fa_per_hour=(0, 1, 2))
    assert s["FRR@0"] == pytest.approx(2 / 3)
    assert s["FRR@1"] == pytest.approx(1 / 3)
    assert s["FRR@2"] == pytest.approx(0)
    # AP: precision 1, 1/2, 2/3, 1/2, 3/5 at TPs 1, 3, 5 -> envelope 1, 2/3, 3/5.
    assert s["AP@0.05"] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)


def test_tied_scores_are_kept_or_cut_together():
    s = _scores([(0, 1), (2, 3)], [(0, 1, 0.9), (2, 3, 0.5), (6, 7, 0.5)], fa_per_hour=(0,))
    assert s["FRR@0"] == pytest.approx(0.5)


def test_tied_scores_keep_flattened_order_for_ap():
    # The false positive comes first in [B, D] order, so it ranks first: AP = 1/2, not 1.
    s = _scores([(0, 1)], [(5, 6, 0.5), (0, 1, 0.5)])
    assert s["AP@0.05"] == pytest.approx(0.5)
    s = _scores([(0, 1)], [(0, 1, 0.5), (5, 6, 0.5)])
    assert s["AP@0.05"] == pytest.approx(1.0)


def test_negative_zero_ties_with_zero():
    s = _scores([(0, 1)], [(5, 6, 0.0), (0, 1, -0.0)])
    assert s["AP@0.05"] == pytest.approx(0.5)


def test_falls_back_to_second_best_ground_truth():
    # det 1 takes A (IoU 1); det 2 prefers A (IoU .905) but falls back to B (IoU 1.1/2.9).
    gt = [(0, 2), (1, 3)]
    dets = [(0, 2, 0.9), (0.1, 2.1, 0.8)]
    s = _scores(gt, dets, iou_thresholds=(0.3, 0.5))
    np.testing.assert_allclose(s["AP"][:, 0], [1.0, 0.5], atol=1e-6)


def test_equal_iou_picks_lowest_ground_truth_index():
    # det 1 has IoU .6 with both; it takes index 0, so det 2 (IoU 1 with index 0) misses.
    gt = [(0, 2), (1, 3)]
    dets = [(0.5, 2.5, 0.9), (0, 2, 0.8)]
    s = _scores(gt, dets, iou_thresholds=(0.5,))
    assert s["AP"][0, 0] == pytest.approx(0.5)


def test_zero_length_segments_never_match():
    s = _scores([(1, 1)], [(1, 1, 0.9)])
    assert s["mAP"] == 0.0


def test_class_with_ground_truth_but_no_detections_counts_as_zero():
    s = _scores([(0, 1, 0), (2, 3, 1)], [(0, 1, 0.9, 0)], num_classes=2)
    np.testing.assert_allclose(s["AP"][:, 0], 1.0)
    np.testing.assert_allclose(s["AP"][:, 1], 0.0)
    assert s["mAP"] == pytest.approx(0.5)


def test_class_without_ground_truth_is_left_out():
    s = _scores([(0, 1, 0)], [(0, 1, 0.9, 0), (4, 5, 0.8, 1)], num_classes=2)
    assert np.all(np.isnan(s["AP"][:, 1]))
    assert s["mAP"] == pytest.approx(1.0)
    # ...but its detections are false alarms for FRR: 1 FA at 0.8 after the TP at 0.9.
    s = _scores([(0, 1, 0)], [(0, 1, 0.9, 0), (4, 5, 0.8, 1)], num_classes=2, fa_per_hour=(0,))
    assert s["FRR@0"] == 0.0


def test_ignored_class_is_dropped_from_both_sides():
    gt = [(0, 1, 0), (2, 3, 1)]
    dets = [(2, 3, 0.95, 1), (0, 1, 0.9, 0), (5, 6, 0.99, 1)]
    s = _scores(gt, dets, num_classes=2, ignore_classes=(1,), fa_per_hour=(0,))
    assert np.all(np.isnan(s["AP"][:, 1]))
    assert s["mAP"] == 1.0 and s["FRR@0"] == 0.0


def test_detection_only_matches_ground_truth_of_its_own_example():
    # Example 0 has the ground truth; the detection in example 1 overlaps it in time only.
    s = _scores([(0, 1, 0, 0), (5, 6, 0, 1)], [(0, 1, 0.9, 0, 1)])
    assert s["AP@0.05"] == 0.0


def test_no_ground_truth_gives_nan():
    s = _scores([], [(0, 1, 0.9)])
    assert all(math.isnan(float(s[k])) for k in ("mAP", "AP@0.05", "AP@0.75", "FRR@5", "FRR@25"))


def test_no_detections_gives_zero_ap_and_full_rejection():
    s = _scores([(0, 1)], [])
    assert s["mAP"] == 0.0 and s["FRR@5"] == 1.0


def test_total_hours_must_be_positive():
    gt, dets = _segments([(0, 1)], False), _segments([(0, 1, 0.5)], True)
    with pytest.raises(ValueError, match="total_hours"):
        metrics.detection_scores(dets, gt, num_classes=1, total_hours=0.0)
    traced = jax.jit(lambda h: metrics.detection_scores(dets, gt, num_classes=1, total_hours=h))
    assert math.isnan(float(traced(0.0)["FRR@5"]))
    assert float(traced(1.0)["FRR@5"]) == 0.0


def test_vmap_over_model_variants_and_traced_hours():
    gt = _segments([(0, 1), (2, 3), (4, 5)], False)
    variants = [
        _segments([(0, 1, 0.9), (6, 7, 0.8), (2, 3, 0.7)], True),
        _segments([(0.25, 1, 0.9), (2, 3, 0.8), (9, 9.5, 0.7)], True),  # IoU .75: a tie,
    ]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *variants)
    evaluate = jax.jit(
        jax.vmap(lambda d, h: metrics.detection_scores(d, gt, num_classes=1, total_hours=h))
    )
    result = evaluate(stacked, jnp.array([1.0, 0.5]))
    for v, hours in enumerate((1.0, 0.5)):
        expected = reference.detection_scores(variants[v], gt, num_classes=1, total_hours=hours)
        for key in expected:
            np.testing.assert_allclose(result[key][v], expected[key], atol=1e-6, err_msg=key)
