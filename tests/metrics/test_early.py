"""Early question frames: jitted == NumPy loop reference on random batches, the worked
example of docs/metrics.md ("Example 9"), hand-checked edge cases, pooling, vmap and
argument checks.

Shapes and static arguments come from small fixed menus so that `jit` compiles a
handful of times.
"""

import functools
import pathlib
import re
from fractions import Fraction

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics
from metrics import reference
from metrics.early import margin_frames

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
STATIC = ("num_classes", "hop_s", "margin_s", "background")

_early = jax.jit(metrics.early_frames, static_argnames=STATIC)
_counts = jax.jit(metrics.early_frame_counts, static_argnames=STATIC)


def _assert_same(result, expected):
    """Counts equal; shares the correctly rounded float32 of the exact quotient."""
    result = jax.tree_util.tree_map(np.asarray, result)
    np.testing.assert_array_equal(result.counts.early, expected.counts.early)
    np.testing.assert_array_equal(result.counts.predicted, expected.counts.predicted)
    np.testing.assert_array_equal(result.share, np.asarray(expected.share).astype(np.float32))
    assert result.overall == np.float32(expected.overall)
    assert result.share.dtype == result.overall.dtype == np.float32


@st.composite
def labelled_batches(draw):
    """(pred, gold, mask, num_classes): runs of random lengths (onsets at frame 0
    included), predictions that lead, lag or invent classes, all-background predictions,
    padding, holes, all-masked rows and out-of-range labels."""
    batch = draw(st.sampled_from([1, 3]))
    length = draw(st.sampled_from([1, 9, 40]))
    num_classes = draw(st.sampled_from([2, 3, 5]))
    out_of_range = draw(st.sampled_from([0, 1]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def segmented():
        lengths = rng.integers(1, 9, size=length)
        labels = rng.integers(0, num_classes + out_of_range, size=length)
        return np.repeat(labels, lengths)[:length]

    gold = np.stack([segmented() for _ in range(batch)])
    shift = draw(st.sampled_from([0, 3, 12]))  # predictions ahead of the speech
    pred = np.roll(gold, -shift, axis=1)
    flip = rng.random(gold.shape) < draw(st.sampled_from([0.0, 0.2]))
    pred = np.where(flip, rng.integers(0, num_classes + out_of_range, gold.shape), pred)
    how = draw(st.sampled_from(["as is", "independent", "background only"]))
    if how == "independent":
        pred = np.stack([segmented() for _ in range(batch)])
    elif how == "background only":
        pred = np.zeros_like(gold)
    lengths = rng.integers(0, length + 1, size=batch)  # 0: an all-masked row
    mask = np.arange(length)[None] < lengths[:, None]
    mask &= rng.random(gold.shape) > draw(st.sampled_from([0.0, 0.1]))
    return pred.astype(np.int32), gold.astype(np.int32), mask, num_classes


@SETTINGS
@given(
    labelled_batches(),
    st.sampled_from([0.01, 0.1]),
    st.sampled_from([0.0, 0.05, 0.5, 100.0]),  # 100 s: longer than any call here
    st.sampled_from([0, 1]),
)
def test_early_frames_match_reference(data, hop_s, margin_s, background):
    pred, gold, mask, num_classes = data
    background = min(background, num_classes - 1)
    kwargs = dict(num_classes=num_classes, hop_s=hop_s, margin_s=margin_s, background=background)
    result = _early(pred, gold, mask, **kwargs)
    _assert_same(result, reference.early_frames(pred, gold, mask, **kwargs))
    counts = np.asarray(result.counts.early), np.asarray(result.counts.predicted)
    assert counts[0][background] == counts[1][background] == 0
    assert (counts[0] <= counts[1]).all()


@SETTINGS
@given(labelled_batches(), st.integers(1, 2))
def test_counts_pooled_over_batch_splits_and_rows_equal_one_call(data, split):
    pred, gold, mask, num_classes = data
    kwargs = dict(num_classes=num_classes, hop_s=0.1)
    whole = _early(pred, gold, mask, **kwargs)
    split = min(split, len(pred))
    parts = [
        _counts(p, g, m, **kwargs)
        for p, g, m in (
            (pred[:split], gold[:split], mask[:split]),
            (pred[split:], gold[split:], mask[split:]),
        )
        if len(p)
    ]
    pooled = metrics.early_frames_from_counts(functools.reduce(lambda a, b: a + b, parts))
    rows = jax.vmap(
        lambda p, g, m: metrics.early_frame_counts(p[None], g[None], m[None], **kwargs)
    )(pred, gold, mask)
    summed = metrics.EarlyFrameCounts(*(np.asarray(c).sum(0) for c in rows))
    for counts in (pooled.counts, summed):
        np.testing.assert_array_equal(counts.early, whole.counts.early)
        np.testing.assert_array_equal(counts.predicted, whole.counts.predicted)
    np.testing.assert_array_equal(pooled.share, whole.share)
    assert pooled.overall == whole.overall


# The worked example of docs/metrics.md.


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^#|\Z)", text, re.M | re.S)
    assert found, f"docs/metrics.md has no section '### {title}'"
    return found.group(1)


def _row(section: str, key: str) -> list:
    """The cells after `key` of the one table row starting with it, as Fractions."""
    rows = [line.strip().strip("|").split("|") for line in section.splitlines()]
    matching = [[Fraction(c.strip()) for c in r[1:]] for r in rows if r[0].strip() == key]
    assert len(matching) == 1, f"expected one table row '{key}', found {len(matching)}"
    return matching[0]


EXAMPLE_9 = {
    "gold": [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 2, 2, 2, 0, 1, 1, 0, 0]],
    "pred": [[1, 1, 1, 1, 0, 1, 1, 1, 2, 0], [2, 2, 2, 2, 2, 1, 1, 1, 1, 1]],
}
EXAMPLE_9_MASK = [[True] * 10, [t not in (2, 8, 9) for t in range(10)]]


def test_example_9_early_question_frames():
    section = _section("Example 9: early question frames")
    for name, rows in EXAMPLE_9.items():
        for row in rows:
            assert f"{name:<6} = [{', '.join(map(str, row))}]" in section
    assert "mask   = False at t = 2, 8, 9" in section
    pred, gold = (np.array(EXAMPLE_9[k], np.int32) for k in ("pred", "gold"))
    mask = np.array(EXAMPLE_9_MASK)
    for margin_s, columns in ((0.2, slice(0, 3)), (0.0, slice(3, 5))):
        kwargs = dict(num_classes=3, hop_s=0.1, margin_s=margin_s)
        result = _early(pred, gold, mask, **kwargs)
        expected = reference.early_frames(pred, gold, mask, **kwargs)
        _assert_same(result, expected)
        for c in (1, 2):
            cells = _row(section, str(c))
            if margin_s:
                early, predicted, share = cells[columns]
                assert int(result.counts.predicted[c]) == predicted
            else:
                early, share = cells[columns]
            assert int(result.counts.early[c]) == early
            assert result.share[c] == np.float32(float(share))
            assert expected.share[c] == pytest.approx(float(share), abs=1e-15)
        (overall,) = _row(section, "overall")[columns][-1:]
        assert result.overall == np.float32(float(overall))
    assert float(result.share[0]) == 0 and int(result.counts.predicted[0]) == 0


# Hand-checked cases: one call, classes 0 (background), 1, 2; hop 0.1 s.


def _one(*rows, dtype=np.int32):
    return np.array([rows[0]], dtype) if len(rows) == 1 else np.array(rows, dtype)


@pytest.mark.parametrize(
    ("pred", "gold", "mask", "margin_s", "early", "predicted"),
    [
        # no predictions at all: shares 0, counts 0
        ([0] * 6, [0, 0, 1, 1, 2, 2], [True] * 6, 0.5, [0, 0, 0], [0, 0, 0]),
        # class 2 never spoken: all of its frames early, whatever the margin
        ([2, 2, 0, 1, 1, 2], [0, 0, 0, 1, 1, 0], [True] * 6, 100.0, [0, 0, 3], [0, 2, 3]),
        # onset at frame 0: nothing leads it
        ([1, 1, 1, 1], [1, 0, 0, 0], [True] * 4, 0.0, [0, 0, 0], [0, 4, 0]),
        # margin 0: every frame before the onset is early, the onset frame is not
        ([1, 1, 1, 1], [0, 0, 1, 1], [True] * 4, 0.0, [0, 2, 0], [0, 4, 0]),
        # exactly the margin ahead (2 frames = 0.2 s) is not early; 3 frames is
        ([1, 1, 1, 1, 1], [0, 0, 0, 1, 1], [True] * 5, 0.2, [0, 1, 0], [0, 5, 0]),
        # margin longer than the call: no frame of a spoken class is early
        ([1, 1, 1, 1, 1], [0, 0, 0, 0, 1], [True] * 5, 100.0, [0, 0, 0], [0, 5, 0]),
        # all masked: nothing is counted
        ([1, 2, 1, 2], [0, 0, 0, 0], [False] * 4, 0.0, [0, 0, 0], [0, 0, 0]),
        # a masked gold frame is no onset: class 1 first spoken (validly) at t = 4
        (
            [1, 1, 1, 1, 1],
            [0, 1, 0, 0, 1],
            [True, False, True, True, True],
            0.0,
            [0, 3, 0],
            [0, 4, 0],
        ),
        # out-of-range labels belong to no class
        ([7, 7, 1, 1], [0, 7, 1, 1], [True] * 4, 0.0, [0, 0, 0], [0, 2, 0]),
    ],
)
def test_hand_checked_cases(pred, gold, mask, margin_s, early, predicted):
    pred, gold, mask = _one(pred), _one(gold), _one(mask, dtype=bool)
    kwargs = dict(num_classes=3, hop_s=0.1, margin_s=margin_s)
    result = _early(pred, gold, mask, **kwargs)
    assert np.asarray(result.counts.early).tolist() == early
    assert np.asarray(result.counts.predicted).tolist() == predicted
    shares = [Fraction(e, p) if p else 0 for e, p in zip(early, predicted, strict=True)]
    np.testing.assert_array_equal(result.share, np.array(shares, np.float64).astype(np.float32))
    total = sum(predicted)
    assert result.overall == np.float32(sum(early) / total if total else 0)
    _assert_same(result, reference.early_frames(pred, gold, mask, **kwargs))


def test_empty_axes_give_zero_counts():
    for shape in ((2, 0), (0, 5)):
        zeros = np.zeros(shape, np.int32)
        result = metrics.early_frames(zeros, zeros, zeros.astype(bool), num_classes=3, hop_s=0.01)
        assert np.asarray(result.counts.predicted).tolist() == [0, 0, 0]
        assert float(result.overall) == 0 and np.asarray(result.share).tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    ("margin_s", "hop_s", "frames"),
    [
        (0.5, 0.01, 50),
        (0.07, 0.01, 7),
        (0.5, 0.04, 12),
        (0.48, 0.04, 12),
        (0.0, 0.04, 0),
        (0.3, 0.01, 30),
        (0.015, 0.01, 1),
    ],
)
def test_margin_in_whole_frames(margin_s, hop_s, frames):
    assert margin_frames(margin_s, hop_s) == frames


def test_a_lead_of_exactly_the_margin_is_not_early_at_any_float_rounding():
    # 0.07 / 0.01 is 7.000000000000001 in float64; 0.29 / 0.01 is 28.999999999999996.
    for margin_s, frames in ((0.07, 7), (0.29, 29)):
        gold = np.zeros((1, frames + 2), np.int32)
        gold[0, -1] = 1
        pred = np.ones_like(gold)
        kwargs = dict(num_classes=2, hop_s=0.01, margin_s=margin_s)
        result = _early(pred, gold, np.ones_like(gold, bool), **kwargs)
        assert int(result.counts.early[1]) == 1  # t = 0 leads by frames + 1; t = 1 by frames
        _assert_same(result, reference.early_frames(pred, gold, np.ones_like(gold, bool), **kwargs))


PRED = np.zeros((2, 6), np.int32)
MASK = np.ones((2, 6), bool)


def test_bad_arguments_raise_by_name():
    with pytest.raises(ValueError, match=r"gold: shape \(2, 5\) does not match pred shape"):
        metrics.early_frames(PRED, PRED[:, :5], MASK, num_classes=2, hop_s=0.01)
    with pytest.raises(TypeError, match="mask: expected bool"):
        metrics.early_frames(PRED, PRED, PRED, num_classes=2, hop_s=0.01)
    with pytest.raises(ValueError, match="hop_s: expected finite seconds > 0, got 0.0"):
        metrics.early_frames(PRED, PRED, MASK, num_classes=2, hop_s=0.0)
    with pytest.raises(ValueError, match="margin_s: expected finite seconds >= 0, got -0.1"):
        metrics.early_frames(PRED, PRED, MASK, num_classes=2, hop_s=0.01, margin_s=-0.1)
    with pytest.raises(ValueError, match="margin_s: expected finite seconds >= 0, got inf"):
        metrics.early_frames(PRED, PRED, MASK, num_classes=2, hop_s=0.01, margin_s=float("inf"))
    with pytest.raises(ValueError, match=r"background: expected a class id in \[0, 2\), got 2"):
        metrics.early_frames(PRED, PRED, MASK, num_classes=2, hop_s=0.01, background=2)
    with pytest.raises(TypeError, match="margin_s: expected static seconds"):
        jax.jit(
            lambda m: metrics.early_frames(PRED, PRED, MASK, num_classes=2, hop_s=0.01, margin_s=m)
        )(0.5)
    with pytest.raises(TypeError, match="counts: expected EarlyFrameCounts"):
        metrics.early_frames_from_counts((np.zeros(2), np.zeros(2)))


def test_checked_variant_reports_out_of_range_labels():
    pred = np.array([[0, 1, 5]], np.int32)
    gold = np.array([[0, 1, 1]], np.int32)
    mask = np.ones((1, 3), bool)
    with pytest.raises(ValueError, match=r"pred: label values must lie in \[0, 2\)"):
        metrics.checked(metrics.early_frames)(pred, gold, mask, num_classes=2, hop_s=0.01)
    mask[0, 2] = False  # the offender is padding: fine
    result = metrics.checked(metrics.early_frames)(pred, gold, mask, num_classes=2, hop_s=0.01)
    assert np.asarray(result.counts.predicted).tolist() == [0, 1]
