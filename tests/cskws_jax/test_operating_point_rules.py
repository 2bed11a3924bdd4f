"""cskws_jax.operating_points' threshold rules (equal_share, pooled_offsets, fitted_tail):
small cases worked out by hand, synthetic keywords whose false alarms come from known
distributions (few development hours, a large independent draw to measure on), properties
every rule must keep, and edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cskws_jax import operating_points as op
from cskws_jax.config import OperatingPoint

MIN_SCORE = 0.05  # detections below it are never reported (as the peak decoder's floor)


def _sigmoid(logit):
    return 1 / (1 + np.exp(-np.asarray(logit, np.float64)))


def _outcomes(keywords, hours=1.0, num_keywords=None, ground_truth=None) -> op.Outcomes:
    """Outcomes of {keyword: (false-alarm scores, hit scores)}, sorted as `outcomes`
    sorts them (descending score, ties in the order given)."""
    num_keywords = num_keywords or max(keywords) + 1
    score, label, hit = [], [], []
    for k, (false_alarms, hits) in keywords.items():
        for values, is_hit in ((false_alarms, False), (hits, True)):
            score.append(np.asarray(values, np.float32))
            label.append(np.full(len(values), k, np.int32))
            hit.append(np.full(len(values), is_hit))
    score, label, hit = (np.concatenate(x) for x in (score, label, hit))
    order = np.argsort(-score, kind="stable")
    if ground_truth is None:
        ground_truth = np.bincount(label[hit], minlength=num_keywords)
    return op.Outcomes(score[order], label[order], hit[order], np.asarray(ground_truth), hours)


# ------------------------------------------------------------------------ by hand


# Keyword 0: false alarms at logits 2, 0, -2 (offset 0), a hit at logit 3; keyword 1:
# false alarms at logits 3, 1 (offset 2), a hit at logit 4. One hour.
BY_HAND = {0: (_sigmoid([2, 0, -2]), _sigmoid([3])), 1: (_sigmoid([3, 1]), _sigmoid([4]))}


def _f32(value) -> float:
    return float(np.float32(value))


def test_pooled_offsets_by_hand():
    found = _outcomes(BY_HAND)
    np.testing.assert_allclose(op.false_alarm_offsets(found), [0, 2], atol=1e-6)
    # z: 2, 0, -2 and 1, -1. 2 FA/h over 1 hour: the cut at z = 1 keeps two (z 2 and 1).
    low, high = op.pooled_offset_thresholds(found, 2.0)
    assert low == pytest.approx(_sigmoid(1), rel=1e-6)  # between its logits 0 and 2
    assert high == _f32(_sigmoid(3))  # its false alarm at logit 3, kept
    assert op.measure(found, (low, high))["false_alarms"] == 2
    # Equal shares (1 FA/h each) keep the same two, but keyword 0 only down to logit 2.
    assert op.keyword_thresholds(found, 2.0) == (_f32(_sigmoid(2)), high)
    # 1 FA/h: the cut at z = 2 keeps keyword 0's best; keyword 1 sits at logit 2 + 2.
    low, high = op.pooled_offset_thresholds(found, 1.0)
    assert (low, high) == (_f32(_sigmoid(2)), pytest.approx(_sigmoid(4), rel=1e-6))
    # 0.5 FA/h: no false alarm; keyword 0 just above its best, keyword 1 still at 4.
    low, high = op.pooled_offset_thresholds(found, 0.5)
    assert low == float(np.nextafter(np.float32(_sigmoid(2)), np.float32(1)))
    assert high == pytest.approx(_sigmoid(4), rel=1e-6)
    assert op.measure(found, (low, high))["false_alarms"] == 0


def test_fitted_tail_by_hand():
    # Keyword 0: 5 false alarms at logits 4..0; with min_tail 3, its tail is the top 3
    # (anchor logit 2, excesses 2 and 1: scale 1.5). Keyword 1: 2 false alarms (logits 1,
    # 0): too few, so it borrows the pooled scale (2 + 1 + 1) / (2 + 1) = 4/3.
    found = _outcomes({0: (_sigmoid([4, 3, 2, 1, 0]), []), 1: (_sigmoid([1, 0]), [])})
    own, borrowed = op.tail_fits(found, min_tail=3)
    assert (own.count, own.pooled, borrowed.count, borrowed.pooled) == (3, False, 2, True)
    assert own.anchor == pytest.approx(2, abs=1e-6) and own.scale == pytest.approx(1.5)
    assert borrowed.anchor == pytest.approx(0, abs=1e-6)
    assert borrowed.scale == pytest.approx(4 / 3, rel=1e-6)
    # 1 FA/h: a share of 0.5 each, under one false alarm on the data: extrapolated.
    first, second = op.fitted_tail_thresholds(found, 1.0, min_tail=3)
    assert first == pytest.approx(_sigmoid(2 + 1.5 * math.log(3 / 0.5)), rel=1e-6)
    assert second == pytest.approx(_sigmoid(4 / 3 * math.log(2 / 0.5)), rel=1e-6)
    # 0.2 FA/h gives higher thresholds (equal shares: the same, above every false alarm).
    lower = op.fitted_tail_thresholds(found, 0.2, min_tail=3)
    assert lower[0] > first and lower[1] > second
    assert op.keyword_thresholds(found, 0.2) == op.keyword_thresholds(found, 1.0)
    # 6 FA/h: 3 each, as many as keyword 0's tail: its empirical cut (logit 2); keyword 1
    # keeps both of its false alarms.
    assert op.fitted_tail_thresholds(found, 6.0, min_tail=3) == op.keyword_thresholds(found, 6.0)
    assert op.fitted_tail_thresholds(found, 6.0, min_tail=3)[0] == _f32(_sigmoid(2))


# -------------------------------------------------------------------- synthetic


def _population(seed: int, num_keywords: int):
    """Per keyword: raw false alarms per hour (2..40, log-uniform), and the location
    (-4..-1) and scale (0.5..1.5) of their logistic logits."""
    rng = np.random.default_rng(seed)
    rate = np.exp(rng.uniform(np.log(2), np.log(40), num_keywords))
    return rate, rng.uniform(-4, -1, num_keywords), rng.uniform(0.5, 1.5, num_keywords)


def _draw(population, hours: float, seed: int) -> op.Outcomes:
    """`hours` of synthetic detections: Poisson false alarms with the population's
    logistic logits, 5 ground truths per hour and keyword, 90% detected at logits
    N(2.5, 1.5); every score >= MIN_SCORE."""
    rate, location, scale = population
    rng = np.random.default_rng(seed)
    keywords, ground_truth = {}, []
    for k in range(len(rate)):
        false_alarms = _sigmoid(rng.logistic(location[k], scale[k], rng.poisson(rate[k] * hours)))
        truths = rng.poisson(5 * hours)
        hits = _sigmoid(rng.normal(2.5, 1.5, rng.binomial(truths, 0.9)))
        keywords[k] = (false_alarms[false_alarms >= MIN_SCORE], hits[hits >= MIN_SCORE])
        ground_truth.append(truths)
    return _outcomes(keywords, hours, len(rate), ground_truth)


NUM_KEYWORDS, DEV_HOURS, FINAL_HOURS = 60, 2.0, 100.0


@pytest.fixture(scope="module", params=[0, 1, 2])
def dev_and_final(request):
    """A 60-keyword population (seed 0, 1 or 2): 2 development hours, 100 final hours."""
    population = _population(request.param, NUM_KEYWORDS)
    seed = 100 * request.param
    return _draw(population, DEV_HOURS, seed + 1), _draw(population, FINAL_HOURS, seed + 2)


def _rows(table) -> dict:
    return {(row["rule"], row["budget"]): row for row in table}


def test_where_equal_shares_cannot_the_other_rules_hold_within_2x(dev_and_final):
    # 5 FA/h over 60 keywords and 2 hours: a share of 1/12 FA/h, 0.17 false alarms per
    # keyword on the data: equal shares sit above each keyword's best false alarm, and
    # on new data about one per keyword passes per 2 hours. 25 FA/h: 0.83 per keyword.
    dev, final = dev_and_final
    assert op.allowed_false_alarms(25 / NUM_KEYWORDS, DEV_HOURS) == 0
    table = _rows(op.compare_rules(dev, final, (5, 25)))
    equal = [table["equal_share", b]["final_fa_per_hour"] for b in (5.0, 25.0)]
    assert equal[0] == equal[1]  # the same thresholds for both budgets
    assert table["equal_share", 5.0]["ratio"] > 2
    for rule in ("pooled_offsets", "fitted_tail"):
        for budget in (5.0, 25.0):
            assert 0.5 <= table[rule, budget]["ratio"] <= 2, (rule, budget, table[rule, budget])
        assert table[rule, 5.0]["final_fa_per_hour"] < table[rule, 25.0]["final_fa_per_hour"]
        assert table[rule, 5.0]["final_miss_rate"] >= table[rule, 25.0]["final_miss_rate"]


def test_the_comparison_table(dev_and_final):
    dev, final = dev_and_final
    table = op.compare_rules(dev, final, (5, 25))
    assert [(row["rule"], row["budget"]) for row in table] == [
        (rule, budget) for rule in op.RULES for budget in (5.0, 25.0)
    ]
    for row in table:
        assert row["final_hours"] == FINAL_HOURS and 0 <= row["final_miss_rate"] <= 1
        assert row["ratio"] == row["final_fa_per_hour"] / row["budget"]
        if row["rule"] != "fitted_tail":  # by construction
            assert row["dev_fa_per_hour"] <= row["budget"]
    text = op.comparison_markdown(table)
    assert text.count("\n") == len(table) + 1 and "| pooled_offsets | 5 |" in text


def test_with_many_hours_every_rule_holds():
    # 100 hours to choose on and a fresh 100 to measure on: all three within 2x.
    population = _population(0, NUM_KEYWORDS)
    chosen_on, measured_on = _draw(population, 100.0, 7), _draw(population, 100.0, 8)
    for row in op.compare_rules(chosen_on, measured_on, (1, 5, 25)):
        assert 0.5 <= row["ratio"] <= 2, row


def test_operating_points_name_the_data():
    found = _outcomes(BY_HAND, hours=1.5)
    for rule in op.RULES:
        points = op.choose(found, (1, 5), split="toy:dev", rule=rule)
        assert all(isinstance(p, OperatingPoint) for p in points)
        assert [p.fa_per_hour for p in points] == [1.0, 5.0]
        assert all(p.split == "toy:dev" and p.hours == 1.5 for p in points)
        assert all(len(p.thresholds) == 2 for p in points)
    assert op.choose(found, (1, 5)) == op.choose(found, (1, 5), rule="equal_share")


# -------------------------------------------------------------------- properties


@st.composite
def random_outcomes(draw):
    """Up to 3 keywords, scores on a grid (many ties, some 0 and 1), hours in (0, 4]."""
    keywords = draw(st.integers(1, 3))
    grid = st.integers(0, 16).map(lambda i: i / 16)
    content = {
        k: (draw(st.lists(grid, max_size=12)), draw(st.lists(grid, max_size=4)))
        for k in range(keywords)
    }
    hours = draw(st.integers(1, 64)) / 16
    return _outcomes(content, hours, keywords)


BUDGETS = (0.25, 1.0, 5.0, 25.0, 100.0)


@settings(max_examples=60, deadline=None)
@given(random_outcomes())
def test_every_rule_is_monotone_deterministic_and_in_range(found):
    for rule in op.RULES:
        points = op.choose(found, BUDGETS, rule=rule)
        assert points == op.choose(found, BUDGETS, rule=rule)  # deterministic
        thresholds = np.array([p.thresholds for p in points])  # [budget, keyword]
        assert np.all(np.diff(thresholds, axis=0) <= 0), (rule, thresholds)  # never rises
        assert np.all((thresholds >= 0) & (thresholds <= op.ABOVE_ALL))
        assert np.all(thresholds == thresholds.astype(np.float32))  # exact in float32
        if rule != "fitted_tail":
            for point in points:
                measured = op.measure(found, point.thresholds)["fa_per_hour"]
                assert measured <= point.fa_per_hour, (rule, point)


@settings(max_examples=60, deadline=None)
@given(random_outcomes(), st.sampled_from(BUDGETS))
def test_pooled_offsets_is_the_lowest_pooled_cut(found, budget):
    # Moving the pooled cut one false alarm lower (in z) breaks the budget on the data.
    false = ~found.hit
    offsets = op.false_alarm_offsets(found)
    logits = np.log(np.clip(found.score.astype(np.float64), op.LOGIT_CLIP, 1 - op.LOGIT_CLIP))
    logits -= np.log1p(-np.clip(found.score.astype(np.float64), op.LOGIT_CLIP, 1 - op.LOGIT_CLIP))
    z = (logits - offsets[found.label])[false]
    thresholds = np.asarray(op.pooled_offset_thresholds(found, budget))
    kept = found.score[false] >= thresholds[found.label[false]]
    allowed = op.allowed_false_alarms(budget, found.hours)
    assert kept.sum() <= allowed
    if np.any(~kept):  # the highest dropped z, with its ties, would break it
        next_cut = z[~kept].max()
        assert np.sum(z >= next_cut) > allowed
    if np.any(kept):  # every false alarm kept ranks at or above every one dropped
        assert not np.any(~kept) or z[kept].min() > z[~kept].max()


# --------------------------------------------------------------------- edge cases


@pytest.mark.parametrize("rule", op.RULES)
def test_keywords_without_detections_or_false_alarms(rule):
    # Keyword 0: hits only; keyword 1: nothing; keyword 2: false alarms only.
    found = _outcomes(
        {0: ([], [0.9, 0.4]), 1: ([], []), 2: (_sigmoid(np.linspace(-2, 2, 30)), [])},
        hours=2.0,
    )
    for point in op.choose(found, (0.5, 5, 50), rule=rule):
        first, second, third = point.thresholds
        assert first == _f32(0.4) and second == op.ABOVE_ALL  # as equal shares
        assert _sigmoid(-2) - 1e-6 <= third <= op.ABOVE_ALL
    assert op.measure(found, op.choose(found, (5,), rule=rule)[0].thresholds)["hits"] == 2


@pytest.mark.parametrize("rule", op.RULES)
def test_nothing_detected_and_no_ground_truth(rule):
    empty = _outcomes({0: ([], [])}, hours=1.0)
    assert op.choose(empty, (1, 5), rule=rule)[0].thresholds == (op.ABOVE_ALL,)
    false_only = _outcomes({0: ([0.3, 0.2], [])}, hours=1.0, ground_truth=[0])
    (point,) = op.choose(false_only, (1,), rule=rule)
    assert op.measure(false_only, point.thresholds)["miss_rate"] is None


def test_tied_false_alarms():
    # Keyword 0: 12 false alarms all at 0.6 over 1 hour; keyword 1: hits only.
    found = _outcomes({0: ([0.6] * 12, []), 1: ([], [0.7])}, hours=1.0)
    above = float(np.nextafter(np.float32(0.6), np.float32(1)))
    for rule in op.RULES:  # 2 FA/h can keep none of the tie: just above it
        assert op.choose(found, (2,), rule=rule)[0].thresholds == (above, _f32(0.7)), rule
    (fit, _) = op.tail_fits(found)
    assert fit.scale == 0 and fit.count == 10
    for rule in op.RULES:  # 24 FA/h keeps them all
        assert op.choose(found, (24,), rule=rule)[0].thresholds[0] <= _f32(0.6), rule


def test_pooled_offsets_spend_the_budget_where_false_alarms_rank_highest():
    # Keyword 0: 41 false alarms at logits -3..3 (offset 0); keyword 1: two, at logits 3.5
    # and -3 (offset 0.25, z 3.25 and -3.25), the highest z of all. One hour, 1 FA/h:
    # a share of 0.5 allows keyword 1 none, but the pooled cut keeps its best one.
    found = _outcomes({0: (_sigmoid(np.linspace(-3, 3, 41)), []), 1: (_sigmoid([3.5, -3]), [])})
    pooled = op.pooled_offset_thresholds(found, 1.0)
    assert pooled[1] == _f32(_sigmoid(3.5)) and pooled[0] > _f32(_sigmoid(3))
    assert op.measure(found, pooled)["false_alarms"] == 1
    equal = op.keyword_thresholds(found, 1.0)
    assert equal[1] > _f32(_sigmoid(3.5)) and op.measure(found, equal)["false_alarms"] == 0


@pytest.mark.parametrize("rule", op.RULES)
def test_bad_input_is_named(rule):
    found = _outcomes(BY_HAND)
    no_hours = op.Outcomes(found.score, found.label, found.hit, found.ground_truth, 0.0)
    with pytest.raises(ValueError, match="hours: expected > 0"):
        op.choose(no_hours, (1,), rule=rule)
    with pytest.raises(ValueError, match=r"budgets\[0\]: expected > 0"):
        op.choose(found, (0,), rule=rule)
    with pytest.raises(ValueError, match="budgets: expected distinct"):
        op.choose(found, (1, 1.0), rule=rule)


def test_bad_rules_scores_and_tables_are_named():
    found = _outcomes(BY_HAND)
    with pytest.raises(ValueError, match=r"rule: expected one of \('equal_share'"):
        op.choose(found, (1,), rule="pooled")
    logits = op.Outcomes(found.score * 3, found.label, found.hit, found.ground_truth, 1.0)
    for rule in ("pooled_offsets", "fitted_tail"):
        with pytest.raises(ValueError, match=r"score: .*probabilities in \[0, 1\]"):
            op.choose(logits, (1,), rule=rule)
    with pytest.raises(ValueError, match="min_tail: expected an int >= 2"):
        op.fitted_tail_thresholds(found, 1.0, min_tail=1)
    with pytest.raises(ValueError, match="tail_fraction: expected"):
        op.tail_fits(found, tail_fraction=0)
    other = _outcomes({0: ([0.5], [])})
    with pytest.raises(ValueError, match="final_found: 1 keywords; dev_found has 2"):
        op.compare_rules(found, other, (1,))
