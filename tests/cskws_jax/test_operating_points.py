"""cskws_jax.operating_points: DET curves and per-keyword thresholds for a false-alarm
budget, on small cases worked out by hand, a property test against the rule, and
operating points stored in a bundle."""

from __future__ import annotations

import functools
import json

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics
from cskws_jax import bundle, train
from cskws_jax import operating_points as op
from speechkit.bundle import BundleError


def _padded(events, width: int, with_score: bool) -> dict:
    """One example's events (keyword, start, end[, score]) -> padded [1, width] fields."""
    fields = {
        "start": np.zeros((1, width), np.float32),
        "end": np.zeros((1, width), np.float32),
        "label": np.zeros((1, width), np.int32),
        "valid": np.zeros((1, width), bool),
    }
    if with_score:
        fields["score"] = np.zeros((1, width), np.float32)
    for i, event in enumerate(events):
        fields["label"][0, i], fields["start"][0, i], fields["end"][0, i] = event[:3]
        if with_score:
            fields["score"][0, i] = event[3]
        fields["valid"][0, i] = True
    return fields


def _found(detections, truth, num_keywords=2, hours=2.0):
    """Outcomes of (keyword, start, end, score) detections and (keyword, start, end)
    truths, padded one wider than needed (the padding must be ignored)."""
    return op.outcomes(
        _padded(detections, len(detections) + 1, True),
        _padded(truth, len(truth) + 1, False),
        num_keywords=num_keywords,
        hours=hours,
    )


# Keyword 0: truths at 0-1 s and 10-11 s; detections 0.9 hit, 0.8 and 0.7 false alarms,
# 0.6 hit, 0.5 false alarm. Keyword 1: no truth, false alarms at 0.95 and 0.4. 2 hours.
DETECTIONS = [
    (0, 0, 1, 0.9),
    (0, 3, 4, 0.8),
    (1, 30, 31, 0.95),
    (0, 5, 6, 0.7),
    (0, 10, 11, 0.6),
    (1, 40, 41, 0.4),
    (0, 20, 21, 0.5),
]
TRUTH = [(0, 0, 1), (0, 10, 11)]


def test_outcomes_and_det_curves_by_hand():
    found = _found(DETECTIONS, TRUTH)
    np.testing.assert_allclose(found.score, [0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4], rtol=1e-7)
    assert found.label.tolist() == [1, 0, 0, 0, 0, 0, 1]
    assert found.hit.tolist() == [False, True, False, False, True, False, False]
    assert found.ground_truth.tolist() == [2, 0] and found.hours == 2.0
    curves = op.det_curves(found)
    pooled = curves["pooled"]
    assert pooled.threshold[0] == np.inf
    assert pooled.false_alarms.tolist() == [0, 1, 1, 2, 3, 3, 4, 5]
    assert pooled.hits.tolist() == [0, 0, 1, 1, 1, 2, 2, 2]
    np.testing.assert_allclose(pooled.fa_per_hour, [0, 0.5, 0.5, 1, 1.5, 1.5, 2, 2.5])
    np.testing.assert_allclose(pooled.miss_rate, [1, 1, 0.5, 0.5, 0.5, 0, 0, 0])
    first, second = curves["per_keyword"]
    assert first.false_alarms.tolist() == [0, 0, 1, 2, 2, 3]
    np.testing.assert_allclose(first.miss_rate, [1, 0.5, 0.5, 0.5, 0, 0])
    # No ground truth for keyword 1: its miss rate is undefined, its false alarms count.
    assert second.false_alarms.tolist() == [0, 1, 2] and np.all(np.isnan(second.miss_rate))
    assert second.to_json()["miss_rate"] == [None] * 3
    assert second.to_json()["threshold"][0] is None


ABOVE_095 = float(np.nextafter(np.float32(0.95), np.float32(1)))  # the next float32


@pytest.mark.parametrize(
    "budget, thresholds, false_alarms, hits",
    [
        # share 1 FA/h over 2 h: each keyword may keep 2 false alarms
        (2.0, (0.6, 0.4), 4, 2),
        # share 0.5 FA/h: 1 each; keyword 0 stops before 0.7, keyword 1 after 0.95
        (1.0, (0.8, 0.95), 2, 1),
        # share 0.25 FA/h: none; keyword 0 keeps its first hit, keyword 1 nothing at all
        (0.5, (0.9, ABOVE_095), 0, 1),
    ],
)
def test_thresholds_of_an_equal_share_by_hand(budget, thresholds, false_alarms, hits):
    found = _found(DETECTIONS, TRUTH)
    chosen = op.keyword_thresholds(found, budget)
    assert chosen == tuple(float(np.float32(t)) for t in thresholds)  # observed scores
    result = op.measure(found, chosen)
    assert (result["false_alarms"], result["hits"]) == (false_alarms, hits)
    assert result["fa_per_hour"] == false_alarms / 2 <= budget
    assert result["miss_rate"] == 1 - hits / 2
    (point,) = op.choose(found, [budget], split="toy:test")
    assert point == train.OperatingPoint(budget, chosen, "toy:test", 2.0)


def test_tied_scores_are_kept_or_dropped_together():
    # Keyword 0 at 0.7: a hit and a false alarm, in either flat order; 1 hour.
    for tie in ([(0, 0, 1, 0.7), (0, 5, 6, 0.7)], [(0, 5, 6, 0.7), (0, 0, 1, 0.7)]):
        found = _found([(0, 20, 21, 0.9), *tie], [(0, 0, 1), (0, 20, 21)], 1, hours=1.0)
        curve = op.det_curves(found)["per_keyword"][0]
        assert curve.false_alarms.tolist() == [0, 0, 1] and curve.hits.tolist() == [0, 1, 2]
        # 0.5 FA/h allows no false alarm: the hit at 0.7 goes with its tied false alarm.
        assert op.keyword_thresholds(found, 0.5) == (pytest.approx(0.9),)
        assert op.keyword_thresholds(found, 1.0) == (pytest.approx(0.7),)


def test_no_false_alarms_and_a_keyword_without_detections():
    found = _found([(0, 0, 1, 0.3), (0, 10, 11, 0.8)], [(0, 0, 1), (0, 10, 11), (1, 5, 6)])
    assert found.ground_truth.tolist() == [2, 1]
    # Every detection of keyword 0 fits any budget, down to its lowest score; keyword 1
    # has none: nothing is known of its false alarms, so none of its scores passes.
    assert op.keyword_thresholds(found, 0.01) == (pytest.approx(0.3), op.ABOVE_ALL)
    assert op.ABOVE_ALL > 1 and np.float32(op.ABOVE_ALL) > 1
    result = op.measure(found, op.keyword_thresholds(found, 0.01))
    assert result["false_alarms"] == 0 and result["miss_rate"] == pytest.approx(1 / 3)
    empty = op.det_curves(found)["per_keyword"][1]
    assert empty.false_alarms.tolist() == [0] and empty.miss_rate.tolist() == [1.0]


def test_nothing_detected_at_all():
    found = _found([], [(0, 0, 1)], num_keywords=1, hours=0.5)
    assert found.score.shape == (0,)
    assert op.keyword_thresholds(found, 1.0) == (op.ABOVE_ALL,)
    assert op.measure(found, (0.0,))["miss_rate"] == 1.0


@pytest.mark.parametrize(
    "budget, hours, allowed",
    [(5, 0.5, 2), (1, 0.1, 0), (25, 0.04, 1), (1, 3, 3), (0.5, 3, 1), (2.5, 1.2, 3)],
)
def test_allowed_false_alarms(budget, hours, allowed):
    assert op.allowed_false_alarms(budget, hours) == allowed
    assert allowed / hours <= budget < (allowed + 1) / hours


def test_bad_input_is_named():
    found = _found(DETECTIONS, TRUTH)
    with pytest.raises(ValueError, match="hours: expected > 0"):
        _found(DETECTIONS, TRUTH, hours=-1.0)
    with pytest.raises(ValueError, match="hours: expected > 0"):
        op.allowed_false_alarms(5, 0)
    with pytest.raises(ValueError, match=r"fa_per_hour: expected > 0"):
        op.keyword_thresholds(found, 0)
    with pytest.raises(ValueError, match=r"budgets\[1\]: expected > 0"):
        op.choose(found, (1.0, -5.0))
    with pytest.raises(ValueError, match="budgets: expected distinct"):
        op.choose(found, (5, 5.0))
    with pytest.raises(ValueError, match=r"thresholds: shape \(3,\); expected one per keyword"):
        op.measure(found, (0.5, 0.5, 0.5))
    detections = _padded(DETECTIONS, 8, True)
    truth = _padded(TRUTH, 3, False)
    bad = {**detections, "score": detections["score"][:, :5]}
    with pytest.raises(ValueError, match=r"detections\['score'\]"):
        op.outcomes(bad, truth, num_keywords=2, hours=1.0)
    with pytest.raises(ValueError, match=r"detections\['label'\]: 1 on a valid entry"):
        op.outcomes(detections, truth, num_keywords=1, hours=1.0)
    with pytest.raises(ValueError, match=r"ground_truth\['label'\]: -1"):
        op.outcomes(detections, {**truth, "label": -truth["label"] - 1}, num_keywords=2, hours=1)
    with pytest.raises(ValueError, match="score: expected finite scores in descending"):
        op.det_curve([0.2, 0.5], np.array([True, False]), 1, 1.0)
    with pytest.raises(ValueError, match="hit: shape"):
        op.det_curve([0.5, 0.2], np.array([True]), 1, 1.0)


# ----------------------------------------------------------------------- property


@st.composite
def labelled_audio(draw):
    """Random detections (scores on a coarse grid: many ties) and truths of 3 keywords in
    2 examples, on a 1 s grid so that IoUs are exact; hours in [1/64, 2]."""
    width, gts, keywords = 8, 4, 3

    def fields(count, with_score):
        start = draw(st.lists(st.integers(0, 12), min_size=2 * count, max_size=2 * count))
        length = draw(st.lists(st.integers(1, 3), min_size=2 * count, max_size=2 * count))
        label = draw(st.lists(st.integers(0, keywords - 1), min_size=2 * count, max_size=2 * count))
        valid = draw(st.lists(st.booleans(), min_size=2 * count, max_size=2 * count))
        out = {
            "start": np.array(start, np.float32).reshape(2, count),
            "end": (np.array(start) + np.array(length)).astype(np.float32).reshape(2, count),
            "label": np.array(label, np.int32).reshape(2, count),
            "valid": np.array(valid).reshape(2, count),
        }
        if with_score:
            grid = st.integers(1, 8)
            scores = draw(st.lists(grid, min_size=2 * count, max_size=2 * count))
            out["score"] = (np.array(scores, np.float32) / 8).reshape(2, count)
        return out

    hours = draw(st.integers(1, 128)) / 64  # exact in float32 too, as metrics reads it
    return fields(width, True), fields(gts, False), keywords, hours


BUDGETS = (1.0, 5.0, 25.0, 60.0)
_frr = jax.jit(functools.partial(metrics.detection_scores, num_classes=3, fa_per_hour=BUDGETS))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labelled_audio(), st.sampled_from(BUDGETS))
def test_the_chosen_thresholds_meet_the_budget_and_are_the_lowest(data, budget):
    detections, truth, keywords, hours = data
    found = op.outcomes(detections, truth, num_keywords=keywords, hours=hours)
    thresholds = op.keyword_thresholds(found, budget)
    share = budget / keywords
    for k, threshold in enumerate(thresholds):
        score, hit, _ = found.keyword(k)
        false_alarms = np.sum((score >= threshold) & ~hit)
        assert false_alarms / hours <= share  # meets its share on the data
        lower = score[score < threshold]
        if lower.size:  # the next lower distinct score would break it
            assert np.sum((score >= lower.max()) & ~hit) / hours > share
    assert op.measure(found, thresholds)["fa_per_hour"] <= budget
    # The pooled curve read at the budget is metrics' FRR there (same matching and cuts).
    pooled = op.det_curves(found)["pooled"]
    frr = float(_frr(detections, truth, total_hours=hours)[f"FRR@{budget:g}"])
    if found.ground_truth.sum():
        best = pooled.miss_rate[pooled.fa_per_hour <= budget].min()
        assert best == pytest.approx(frr, abs=1e-6)
    else:
        assert np.isnan(frr) and np.all(np.isnan(pooled.miss_rate))


# ------------------------------------------------------------------------- bundles


@pytest.fixture
def points():
    found = _found(
        [(0, 0, 1, 0.9), (1, 3, 4, 0.8), (2, 5, 6, 0.7)], [(0, 0, 1)], num_keywords=3, hours=1.5
    )
    return op.choose(found, (1, 5, 25), split="toy:test")


def test_a_bundle_keeps_its_operating_points(tiny_afkws, tmp_path, points):
    net, params = tiny_afkws
    decoding = train.PeakDecodingConfig(min_score=0.2, operating_points=points)
    bundle.save(tmp_path / "b", net, params, ("a", "b", "c"), decoding, "toy")
    _, _, info = bundle.load(tmp_path / "b")
    assert info.decoding == decoding and len(info.decoding.operating_points) == 3
    assert info.decoding.operating_point(5).thresholds == points[1].thresholds
    assert info.decoding.operating_points[0].split == "toy:test"
    with pytest.raises(ValueError, match="no operating point for 2 FA/h; stored budgets: 1, 5, 25"):
        info.decoding.operating_point(2)
    # A bundle saved before operating points existed loads with none.
    manifest_path = tmp_path / "b" / "bundle.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["decoding"]["operating_points"]
    manifest_path.write_text(json.dumps(manifest))
    _, _, info = bundle.load(tmp_path / "b")
    assert info.decoding == train.PeakDecodingConfig(min_score=0.2)
    # Other decoding fields stay required.
    del manifest["decoding"]["radius"]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"decoding.radius: missing"):
        bundle.load(tmp_path / "b")


def test_a_wrong_threshold_count_is_refused(tiny_afkws, tmp_path, points):
    net, params = tiny_afkws
    short = train.OperatingPoint(5.0, (0.5, 0.5))
    with pytest.raises(
        BundleError, match=r"operating_points\[0\].thresholds: 2 thresholds, labels"
    ):
        bundle.save(
            tmp_path / "b", net, params, "abc", train.PeakDecodingConfig(operating_points=(short,))
        )
    bundle.save(
        tmp_path / "b", net, params, "abc", train.PeakDecodingConfig(operating_points=points)
    )
    manifest_path = tmp_path / "b" / "bundle.json"
    manifest = json.loads(manifest_path.read_text())
    for point in manifest["decoding"]["operating_points"]:
        point["thresholds"] = point["thresholds"][:2]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(
        BundleError, match=r"bundle.json: decoding.operating_points\[0\].thresholds"
    ):
        bundle.load(tmp_path / "b")
    manifest["decoding"]["operating_points"][1]["thresholds"] = [0.1]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"operating_points\[1\].thresholds: 1 thresholds"):
        bundle.load(tmp_path / "b")


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(fa_per_hour=0.0), ValueError, "OperatingPoint.fa_per_hour: expected > 0"),
        (dict(thresholds=()), TypeError, "OperatingPoint.thresholds: expected a non-empty"),
        (dict(thresholds=(0.5, float("nan"))), ValueError, r"thresholds\[1\]: expected a finite"),
        (dict(hours=-1.0), ValueError, "OperatingPoint.hours: expected >= 0"),
    ],
)
def test_bad_operating_points_are_named(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        train.OperatingPoint(**{"fa_per_hour": 5.0, "thresholds": (0.5,), **kwargs})


def test_bad_operating_point_sets_are_named():
    one = train.OperatingPoint(5.0, (0.5, 0.5))
    with pytest.raises(ValueError, match=r"operating_points\[1\].fa_per_hour: budget 5 FA/h"):
        train.PeakDecodingConfig(operating_points=(one, one))
    other = train.OperatingPoint(1.0, (0.5,))
    with pytest.raises(ValueError, match=r"operating_points\[1\].thresholds: 1 thresholds"):
        train.PeakDecodingConfig(operating_points=(one, other))
    with pytest.raises(TypeError, match="PeakDecodingConfig.operating_points: expected a tuple"):
        train.PeakDecodingConfig(operating_points=[one])
