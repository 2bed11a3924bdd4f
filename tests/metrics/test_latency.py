"""Latency metrics: jitted == NumPy loop reference on random batches, the worked examples
of docs/metrics.md ("Latency"), agreement with INSTANCE recall and with the detection
matching, and edge cases.

Shapes come from small fixed menus so that `jit` compiles a handful of times.
"""

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

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
GRID = 1 / 8  # dyadic times: IoUs and latencies are exact in float32 and float64

_tracking = jax.jit(
    metrics.tracking_latency,
    static_argnames=("num_classes", "background", "min_run", "max_instances"),
)
_detection = jax.jit(
    metrics.detection_latency, static_argnames=("num_classes", "iou", "ignore_classes")
)
_summary = jax.jit(metrics.latency_summary)
_instance_counts = jax.jit(
    metrics.instance_counts, static_argnames=("num_classes", "background", "min_run")
)
_pooled = jax.jit(metrics.pooled_matches, static_argnames=("num_classes", "iou", "ignore_classes"))


def _assert_same(result, expected, tol=0.0):
    """Field by field equality of two NamedTuples of arrays, up to `tol` (abs and rel)."""
    for name, got, want in zip(expected._fields, result, expected, strict=True):
        np.testing.assert_allclose(
            np.asarray(got), np.asarray(want), rtol=tol, atol=tol, err_msg=name
        )


@st.composite
def labelled_batches(draw):
    """(pred, gold, mask, num_classes): runs of random lengths, noisy predictions (correct
    frames before the qualifying run), random padding and holes, labels out of range."""
    batch = draw(st.sampled_from([1, 3]))
    length = draw(st.sampled_from([1, 9, 40]))
    num_classes = draw(st.sampled_from([2, 4]))
    out_of_range = draw(st.sampled_from([0, 1]))  # gold label num_classes: no class
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def segmented():
        lengths = rng.integers(1, 9, size=length)
        labels = rng.integers(0, num_classes + out_of_range, size=length)
        return np.repeat(labels, lengths)[:length]

    gold = np.stack([segmented() for _ in range(batch)])
    flip = rng.random(gold.shape) < draw(st.sampled_from([0.0, 0.2, 0.5]))
    pred = np.where(flip, rng.integers(0, num_classes, gold.shape), gold)
    if draw(st.booleans()):
        pred = np.stack([segmented() for _ in range(batch)])
    lengths = rng.integers(0, length + 1, size=batch)
    mask = np.arange(length)[None] < lengths[:, None]
    mask &= rng.random(gold.shape) > draw(st.sampled_from([0.0, 0.05]))
    return pred.astype(np.int32), gold.astype(np.int32), mask, num_classes


@SETTINGS
@given(
    labelled_batches(),
    st.sampled_from([1, 4]),
    st.sampled_from([0, 1]),
    st.sampled_from([None, 3]),
)
def test_tracking_latency_matches_reference_and_instance_recall(
    data, min_run, background, max_instances
):
    """jitted == reference (and summaries); per class, found slots number `found` and
    slots `gold` of `instance_counts` (when no instance is dropped); latencies lie in
    [0, instance length - min_run]."""
    pred, gold, mask, num_classes = data
    kwargs = dict(num_classes=num_classes, background=background, min_run=min_run)
    result = _tracking(pred, gold, mask, **kwargs, max_instances=max_instances)
    expected = reference.tracking_latency(pred, gold, mask, **kwargs, max_instances=max_instances)
    _assert_same(result, expected)
    _assert_same(
        _summary(result.latency, result.valid),
        reference.latency_summary(expected.latency, expected.valid),
        tol=1e-6,
    )
    if max_instances is None:
        counts = _instance_counts(pred, gold, mask, **kwargs)
        for c in range(num_classes):
            of_class = np.asarray(result.label) == c
            assert (np.asarray(result.valid) & of_class).sum() == int(counts.found[c])
            assert (np.asarray(result.instance) & of_class).sum() == int(counts.gold[c])
    assert not np.any(np.asarray(result.valid) & ~np.asarray(result.instance))
    for b in range(gold.shape[0]):
        runs = [r for r in reference._instances(gold[b], mask[b], background) if r[0] < num_classes]
        for k, (_, first, last) in enumerate(runs[: result.onset.shape[1]]):
            assert result.onset[b, k] == first
            assert 0 <= result.latency[b, k] <= max(0, last - first + 1 - min_run)


@st.composite
def detection_batches(draw):
    """(detections, emitted, ground_truth, num_classes): times on a 1/8 s grid, detections
    copying ground truths with jitter, tied scores, emission before and after the end."""
    batch = draw(st.sampled_from([1, 3]))
    num_dets = draw(st.sampled_from([0, 1, 7]))
    num_gts = draw(st.sampled_from([0, 4]))
    num_classes = draw(st.sampled_from([1, 3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def segments(count):
        start = rng.integers(0, 80, size=(batch, count)) * GRID
        length = rng.integers(0, 16, size=(batch, count)) * GRID
        return {
            "start": start.astype(np.float32),
            "end": (start + length).astype(np.float32),
            "label": rng.integers(-1, num_classes + 1, size=(batch, count)).astype(np.int32),
            "valid": rng.random((batch, count)) < 0.85,
        }

    ground_truth = segments(num_gts)
    detections = segments(num_dets)
    if num_gts:
        source = rng.integers(0, num_gts, size=(batch, num_dets))
        copy = rng.random((batch, num_dets)) < 0.7
        jitter = rng.integers(-3, 4, size=(batch, num_dets, 2)) * GRID
        for key, j in (("start", 0), ("end", 1)):
            copied = np.take_along_axis(ground_truth[key], source, axis=1) + jitter[..., j]
            detections[key] = np.where(copy, copied, detections[key]).astype(np.float32)
        copied_label = np.take_along_axis(ground_truth["label"], source, axis=1)
        detections["label"] = np.where(copy, copied_label, detections["label"])
        detections["end"] = np.maximum(detections["end"], detections["start"])
    scores = np.array([0.9, 0.5, 0.5, 0.25, 0.0, -0.0], np.float32)
    detections["score"] = rng.choice(scores, size=(batch, num_dets)).astype(np.float32)
    delay = rng.integers(-4, 24, size=(batch, num_dets)) * GRID
    emitted = (detections["end"] + delay).astype(np.float32)
    return detections, emitted, ground_truth, num_classes


@SETTINGS
@given(detection_batches(), st.sampled_from([0.05, 0.5, 1.0]), st.sampled_from([(), (0,)]))
def test_detection_latency_matches_reference_and_pooled_matches(data, iou, ignore):
    """jitted == reference (and summaries); the detections that took a ground truth are
    exactly the hits of `pooled_matches`, each of the ground truth's class."""
    detections, emitted, ground_truth, num_classes = data
    kwargs = dict(num_classes=num_classes, iou=iou, ignore_classes=ignore)
    result = _detection(detections, emitted, ground_truth, **kwargs)
    expected = reference.detection_latency(detections, emitted, ground_truth, **kwargs)
    _assert_same(result, expected)
    _assert_same(
        _summary(result.latency, result.valid),
        reference.latency_summary(expected.latency, expected.valid),
        tol=1e-6,
    )
    pooled = _pooled(detections, ground_truth, **kwargs)
    batch, num_dets = detections["label"].shape
    took = np.zeros(batch * num_dets, bool)
    for b, g in zip(*np.nonzero(np.asarray(result.valid)), strict=True):
        d = int(result.detection[b, g])
        took[b * num_dets + d] = True
        assert detections["label"][b, d] == ground_truth["label"][b, g]
    in_pooled_order = _pooled_order(detections, num_classes, ignore)
    np.testing.assert_array_equal(took[in_pooled_order], np.asarray(pooled["hit"]))


def _pooled_order(detections, num_classes, ignore):
    """Flat detection indices in `pooled_matches` order (score, flat index; the ones not
    evaluated last)."""
    label, valid = detections["label"].reshape(-1), detections["valid"].reshape(-1)
    evaluated = valid & (label >= 0) & (label < num_classes) & ~np.isin(label, ignore)
    score = np.where(detections["score"].reshape(-1) == 0, 0.0, detections["score"].reshape(-1))
    return np.lexsort((np.arange(len(label)), -score, ~evaluated))


@SETTINGS
@given(
    st.sampled_from([(5,), (2, 4)]),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_latency_summary_matches_reference_and_numpy(shape, seed, fraction_valid):
    rng = np.random.default_rng(seed)
    latency = rng.choice([-0.5, 0.0, 0.25, 1.0, 3.0], size=shape).astype(np.float32)  # ties
    valid = rng.random(shape) < fraction_valid
    result = _summary(latency, valid)
    expected = reference.latency_summary(latency, valid)
    _assert_same(result, expected, tol=1e-6)
    if valid.any():
        chosen = latency[valid].astype(np.float64)
        numpy = (chosen.size, chosen.mean(), *np.percentile(chosen, [50, 90]))
        np.testing.assert_allclose(np.asarray(result, np.float64), numpy, atol=1e-6)
    else:
        assert int(result.count) == 0 and np.isnan(np.asarray(result[1:])).all()


# The worked examples of docs/metrics.md, section "Latency".


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^#|\Z)", text, re.M | re.S)
    assert found, f"docs/metrics.md has no section '### {title}'"
    return found.group(1)


def _row(section: str, key: str) -> list:
    """Cells after the key of the one table row whose first cell is `key`: Fractions
    (the text before any '≈') where they parse, else text, None when empty."""

    def cell(text):
        text = text.split("≈")[0].strip()
        try:
            return Fraction(text) if text else None
        except ValueError:
            return text

    lines = [line.strip() for line in section.splitlines() if line.startswith("|")]
    rows = [line.strip("|").split("|") for line in lines]
    matching = [[cell(c) for c in row[1:]] for row in rows if row[0].strip() == key]
    assert len(matching) == 1, f"expected one table row '{key}', found {len(matching)}"
    return matching[0]


def _check_summary(section, result, expected):
    for key in ("count", "median", "p90"):
        (want,) = _row(section, key)
        assert float(getattr(result, key)) == pytest.approx(float(want), abs=1e-6)
        assert float(getattr(expected, key)) == pytest.approx(float(want), abs=1e-12)


EXAMPLE_7_GOLD = [0, 1, 1, 1, 1, 1, 1, 0, 0, 2, 2, 2, 2, 2, 0, 1, 1, 0]
EXAMPLE_7_PRED = [0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1]


def test_example_7_tracking_latency():
    section = _section("Example 7: tracking latency")
    for name, labels in (("gold", EXAMPLE_7_GOLD), ("pred", EXAMPLE_7_PRED)):
        assert f"{name} = [{', '.join(map(str, labels))}]" in section
    pred, gold = np.array([EXAMPLE_7_PRED], np.int32), np.array([EXAMPLE_7_GOLD], np.int32)
    mask = np.ones_like(gold, bool)
    kwargs = dict(num_classes=3, min_run=3)
    result = jax.tree_util.tree_map(np.asarray, _tracking(pred, gold, mask, **kwargs))
    expected = reference.tracking_latency(pred, gold, mask, **kwargs)
    _assert_same(result, expected)
    for slot in range(3):
        label, onset, found, latency = _row(section, str(slot))
        assert (result.label[0, slot], result.onset[0, slot]) == (label, onset)
        assert result.valid[0, slot] == (found == "yes")
        assert result.latency[0, slot] == (latency or 0)
    assert not result.instance[0, 3:].any() and result.latency.shape == (1, len(EXAMPLE_7_GOLD))
    _check_summary(
        section,
        _summary(result.latency, result.valid),
        reference.latency_summary(expected.latency, expected.valid),
    )


def _one_class(rows, fields):
    """rows of values in the order of `fields` -> one example's padded dict, class 0."""
    out = {name: np.array([[float(r[k]) for r in rows]], np.float32) for k, name in fields}
    out["label"] = np.zeros((1, len(rows)), np.int32)
    out["valid"] = np.ones((1, len(rows)), bool)
    return out


def test_example_8_detection_latency():
    section = _section("Example 8: detection latency")
    truth = [_row(section, g) for g in ("g1", "g2", "g3")]
    dets = [_row(section, d) for d in ("d1", "d2", "d3")]
    ground_truth = _one_class(truth, ((0, "start"), (1, "end")))
    detections = _one_class(dets, ((0, "start"), (1, "end"), (2, "score")))
    emitted = np.array([[float(d[3]) for d in dets]], np.float32)
    result = _detection(detections, emitted, ground_truth, num_classes=1)
    expected = reference.detection_latency(detections, emitted, ground_truth, num_classes=1)
    _assert_same(result, expected)
    for g, (_, _, matched_by, latency) in enumerate(truth):
        want = -1 if matched_by is None else int(matched_by[1:]) - 1
        assert int(result.detection[0, g]) == want
        assert float(result.latency[0, g]) == float(latency or 0)
    _check_summary(
        section,
        _summary(result.latency, result.valid),
        reference.latency_summary(expected.latency, expected.valid),
    )
    strict = _detection(detections, emitted, ground_truth, num_classes=1, iou=0.75)
    assert np.asarray(strict.valid).tolist() == [[True, False, False]]  # d3's IoU is 3/5


# Edge cases.


def test_tracking_latency_edge_cases():
    kwargs = dict(num_classes=3, min_run=2)
    empty = _tracking(*(np.zeros((2, 0), t) for t in (np.int32, np.int32, bool)), **kwargs)
    assert all(np.asarray(field).shape == (2, 0) for field in empty)

    gold = np.array([[1, 1, 1, 0, 2, 2, 2, 2]], np.int32)
    masked = _tracking(gold, gold, np.zeros_like(gold, bool), **kwargs)
    assert not np.asarray(masked.instance).any()
    summary = _summary(masked.latency, masked.valid)
    assert int(summary.count) == 0 and np.isnan(np.asarray(summary[1:])).all()

    missed = _tracking(np.zeros_like(gold), gold, np.ones_like(gold, bool), **kwargs)
    assert np.asarray(missed.instance).sum() == 2 and not np.asarray(missed.valid).any()

    # Out-of-range gold labels take no slot; a smaller max_instances keeps the first ones.
    gold = np.array([[7, 7, 1, 1, 0, 2, 2, 0, 1, 1]], np.int32)
    pred = np.array([[7, 7, 0, 1, 0, 2, 2, 0, 1, 1]], np.int32)
    mask = np.ones_like(gold, bool)
    full = _tracking(pred, gold, mask, num_classes=3, min_run=1)
    assert np.asarray(full.onset)[0, :4].tolist() == [2, 5, 8, -1]
    assert np.asarray(full.latency)[0, :3].tolist() == [1, 0, 0]
    first_two = _tracking(pred, gold, mask, num_classes=3, min_run=1, max_instances=2)
    for whole, cut in zip(full, first_two, strict=True):
        np.testing.assert_array_equal(np.asarray(whole)[:, :2], cut)


def test_detection_latency_edge_cases():
    truth = _one_class([(0, 1), (2, 3)], ((0, "start"), (1, "end")))
    none = _one_class([], ((0, "start"), (1, "end"), (2, "score")))
    result = _detection(none, np.zeros((1, 0), np.float32), truth, num_classes=1)
    assert np.asarray(result.detection).tolist() == [[-1, -1]]
    no_truth = _one_class([], ((0, "start"), (1, "end")))
    dets = _one_class([(0, 1, 0.5)], ((0, "start"), (1, "end"), (2, "score")))
    result = _detection(dets, np.ones((1, 1), np.float32), no_truth, num_classes=1)
    assert np.asarray(result.latency).shape == (1, 0)

    # Tied scores: flat order decides which of two equal detections takes the one truth.
    dets = _one_class([(0, 1, 0.5), (0, 1, 0.5)], ((0, "start"), (1, "end"), (2, "score")))
    emitted = np.array([[1.5, 1.25]], np.float32)
    result = _detection(dets, emitted, truth, num_classes=1)
    assert np.asarray(result.detection).tolist() == [[0, -1]]
    assert np.asarray(result.latency).tolist() == [[0.5, 0.0]]
    # Ignored or invalid ground truths are never valid.
    ignored = _detection(dets, emitted, truth, num_classes=1, ignore_classes=(0,))
    assert not np.asarray(ignored.valid).any()
    with pytest.raises(ValueError, match="emitted"):
        metrics.detection_latency(dets, emitted[:, :1], truth, num_classes=1)
    with pytest.raises(TypeError, match="emitted"):
        metrics.detection_latency(dets, emitted.astype(np.int32), truth, num_classes=1)


def test_tracking_latency_and_summary_vmap_over_examples():
    rng = np.random.default_rng(0)
    gold = np.repeat(rng.integers(0, 3, (4, 1, 6)), 3, axis=-1).astype(np.int32)
    pred = np.where(rng.random(gold.shape) < 0.3, 0, gold).astype(np.int32)
    mask = np.ones_like(gold, bool)
    track = jax.jit(
        jax.vmap(lambda p, g, m: metrics.tracking_latency(p, g, m, num_classes=3, min_run=2))
    )
    stacked = track(pred, gold, mask)
    for n in range(4):
        one = reference.tracking_latency(pred[n], gold[n], mask[n], num_classes=3, min_run=2)
        _assert_same(jax.tree_util.tree_map(lambda x, n=n: x[n], stacked), one)
    per_example = jax.vmap(metrics.latency_summary)(stacked.latency, stacked.valid)
    for n in range(4):
        _assert_same(
            jax.tree_util.tree_map(lambda x, n=n: x[n], per_example),
            reference.latency_summary(stacked.latency[n], stacked.valid[n]),
            tol=1e-6,
        )


def _with_reversed_copy(fields):
    """Two examples stacked on a new leading axis: the fields and their columns reversed."""
    return {k: np.stack([v, v[:, ::-1]]) for k, v in fields.items()}


def test_detection_latency_vmaps_over_examples():
    truth = _with_reversed_copy(_one_class([(0, 1), (2, 3)], ((0, "start"), (1, "end"))))
    dets = _with_reversed_copy(
        _one_class(
            [(2, 3, 0.9), (0, 1, 0.5), (0, 1, 0.7)], ((0, "start"), (1, "end"), (2, "score"))
        )
    )
    emitted = np.stack([np.array([[3.5, 1.25, 1.5]], np.float32)] * 2)
    detect = jax.jit(jax.vmap(lambda d, e, g: metrics.detection_latency(d, e, g, num_classes=1)))
    stacked = detect(dets, emitted, truth)
    for n in range(2):
        pick = {k: v[n] for k, v in dets.items()}
        one = reference.detection_latency(
            pick, emitted[n], {k: v[n] for k, v in truth.items()}, num_classes=1
        )
        _assert_same(jax.tree_util.tree_map(lambda x, n=n: x[n], stacked), one)
