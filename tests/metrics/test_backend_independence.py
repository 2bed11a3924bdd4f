"""`detection_scores` decides the same on every backend, whatever its float32 division.

XLA:GPU lowers float32 division to PTX `div.full` (up to 2 ulp off), and a backend may
ignore `is_stable` on sorts. The data here put IoUs exactly at the thresholds (ratios
such as 7/20 on a 1/64 s grid, which float32 represents exactly), IoU ties between
different (inter, union) pairs, FA/h exactly at a budget with a non-dyadic
`total_hours`, and tied scores. Each case is compared with the float64 reference as it
is, and again with the float32 division (or the tie order of sorts) replaced, when XLA
lowers the program, by what another backend may do, so a CPU run catches what a GPU run
would show. The shares of `metrics.early_frames` get the same treatment: under every
emulated division they are the correctly rounded quotients of their integer counts.
"""

import contextlib
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import metrics
from metrics import reference

STEP = 1 / 64  # seconds: every time and difference below is exact in float32
_in_replacement = [False]  # the replacement's own primitives lower with the original rule


def _lowering_modules():
    try:
        from jax._src.interpreters import mlir
        from jax._src.lax import lax as lax_internal

        mlir._platform_specific_lowerings, mlir._lowerings  # noqa: B018
    except (ImportError, AttributeError):
        pytest.skip("this JAX version has no lowering tables to swap a rule in")
    return mlir, lax_internal


@contextlib.contextmanager
def _lowered_with(primitive, make_rule):
    """Lowers `primitive` with `make_rule(original_rule)` on the default backend."""
    mlir, _ = _lowering_modules()
    from jax._src import xla_bridge

    # lowering rules are registered per concrete platform: "cuda" or "rocm", never "gpu"
    platform = xla_bridge.canonicalize_platform(jax.default_backend())
    table = mlir._platform_specific_lowerings[platform]
    saved = table.get(primitive)
    original = (saved or mlir._lowerings[primitive]).rule
    mlir.register_lowering(primitive, make_rule(original), platform=platform)
    jax.clear_caches()
    try:
        yield
    finally:
        if saved is None:
            del table[primitive]
        else:
            table[primitive] = saved
        jax.clear_caches()


def _replacing(original, replacement, multiple_results):
    """A lowering rule that lowers `replacement` (a JAX function) where it applies."""

    def rule(ctx, *args, **params):
        if _in_replacement[0] or not replacement.applies(ctx, **params):
            return original(ctx, *args, **params)
        _in_replacement[0] = True
        try:
            mlir, _ = _lowering_modules()
            lowered = mlir.lower_fun(
                lambda *a: replacement(*a, **params), multiple_results=multiple_results
            )
            return lowered(ctx, *args)
        finally:
            _in_replacement[0] = False

    return rule


def _nudged(q, ulps):
    """q moved by `ulps` units in the last place (away from zero when ulps > 0)."""
    moved = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(q, jnp.int32) + ulps, q.dtype)
    return jnp.where(jnp.isfinite(q) & (q != 0), moved, q)


class _Division:
    """A float32 division as another backend may compute it: "reciprocal" is x times the
    rounded 1/y (div.full multiplies by an approximate 1/y); "-2" .. "+2" are that many
    ulps off the correctly rounded quotient (div.full allows 2)."""

    def __init__(self, name):
        self.name = name

    def applies(self, ctx, **params):
        return ctx.avals_out[0].dtype == jnp.float32

    def __call__(self, x, y):
        _, lax_internal = _lowering_modules()
        divide = lax_internal.div_p.bind
        if self.name == "reciprocal":
            return x * divide(jnp.ones_like(y), y)
        return _nudged(divide(x, y), int(self.name))


class _ReversedTies:
    """Every sort puts equal keys in descending index order (an unstable sort may)."""

    def applies(self, ctx, **params):
        return True

    def __call__(self, *operands, dimension, is_stable, num_keys):
        _, lax_internal = _lowering_modules()
        shape = operands[0].shape
        reverse = shape[dimension] - 1 - jax.lax.broadcasted_iota(jnp.int32, shape, dimension)
        keys, rest = operands[:num_keys], operands[num_keys:]
        out = lax_internal.sort_p.bind(
            *keys, reverse, *rest, dimension=dimension, is_stable=False, num_keys=num_keys + 1
        )
        return [*out[:num_keys], *out[num_keys + 1 :]]


def emulated_division(name):
    """Context: XLA lowers every float32 division the `name` way (see `_Division`)."""
    _, lax_internal = _lowering_modules()
    division = _Division(name)
    return _lowered_with(lax_internal.div_p, lambda original: _replacing(original, division, False))


def reversed_ties():
    """Context: XLA lowers every sort with equal keys in descending index order."""
    _, lax_internal = _lowering_modules()
    return _lowered_with(
        lax_internal.sort_p, lambda original: _replacing(original, _ReversedTies(), True)
    )


DIVISIONS = ["reciprocal", "-1", "-2", "+1", "+2"]


# --- data --------------------------------------------------------------------------


def _at_threshold_rows(rng, example):
    """(gt rows, det rows) in grid steps: for each k in 1..19 one detection with IoU
    exactly k/20 against its own ground truth, union 20 n steps for a random n."""
    gts, dets = [], []
    for k in range(1, 20):
        n = int(rng.integers(1, 13))
        gt_length = int(rng.integers(k * n, 20 * n + 1))
        start = 600 * k + int(rng.integers(0, 200))
        det_start = start + gt_length - k * n  # overlaps the last k n steps of the gt
        det_end = start + 20 * n  # union: 20 n steps
        label = int(rng.integers(0, 2))
        gts.append((start, start + gt_length, label, example))
        dets.append((det_start, det_end, float(rng.choice([0.9, 0.5, 0.25])), label, example))
    return gts, dets


def _tied_iou_rows(example):
    """A detection with IoU exactly 1/5 against ground truth 0 (inter 1, union 5 steps)
    and 1 (inter 3, union 15): it must take 0, the lower index. A second one is a copy
    of ground truth 1, so at thresholds 0.1 to 0.2 it is a hit only if 0 was taken."""
    base = 20_000
    gts = [(base - 2, base + 1, 0, example), (base, base + 15, 0, example)]
    dets = [(base, base + 3, 0.8, 0, example), (base, base + 15, 0.7, 0, example)]
    return gts, dets


def _false_alarm_rows(rng, example, count):
    starts = 30_000 + 200 * np.arange(count)
    return [
        (int(s), int(s) + 64, float(rng.choice([0.9, 0.5, 0.25])), int(rng.integers(0, 2)), example)
        for s in starts
    ]


def _padded(rows, with_score):
    """rows (start, end, [score,] label, example) in grid steps -> padded dict [B, N]."""
    batch = max(r[-1] for r in rows) + 1
    per_example = [[r for r in rows if r[-1] == b] for b in range(batch)]
    width = max(len(p) for p in per_example)
    fields = {k: np.zeros((batch, width), np.float32) for k in ("start", "end", "score")}
    fields["label"] = np.zeros((batch, width), np.int32)
    fields["valid"] = np.zeros((batch, width), bool)
    for b, items in enumerate(per_example):
        for i, row in enumerate(items):
            fields["start"][b, i], fields["end"][b, i] = row[0] * STEP, row[1] * STEP
            fields["label"][b, i], fields["valid"][b, i] = row[-2], True
            if with_score:
                fields["score"][b, i] = row[2]
    if not with_score:
        del fields["score"]
    return fields


def threshold_batch(seed=0, batch=3):
    """(detections, ground_truth): IoUs at every default threshold, an IoU tie, tied
    scores within and across examples, false alarms."""
    rng = np.random.default_rng(seed)
    gts, dets = _tied_iou_rows(0)
    for example in range(batch):
        more_gts, more_dets = _at_threshold_rows(rng, example)
        gts += more_gts
        dets += more_dets + _false_alarm_rows(rng, example, 4)
    return _padded(dets, with_score=True), _padded(gts, with_score=False)


def frr_budget_case():
    """FA/h exactly 2.5, 5 and 7.5 after 1, 2, 3 false alarms in 0.4 h (not dyadic)."""
    gt = [(0, 64, 0, 0), (128, 192, 0, 0), (256, 320, 0, 0)]
    dets = [
        (0, 64, 0.9, 0, 0),
        (400, 464, 0.8, 0, 0),
        (500, 564, 0.7, 0, 0),
        (128, 192, 0.6, 0, 0),
        (600, 664, 0.5, 0, 0),
        (256, 320, 0.4, 0, 0),
    ]
    return _padded(dets, with_score=True), _padded(gt, with_score=False)


def _assert_matches_reference(detections, ground_truth, **kwargs):
    result = jax.jit(lambda d, g: metrics.detection_scores(d, g, **kwargs))(
        detections, ground_truth
    )
    expected = reference.detection_scores(detections, ground_truth, **kwargs)
    for key in expected:
        np.testing.assert_allclose(result[key], expected[key], atol=1e-6, err_msg=key)


# --- the data are what they claim ---------------------------------------------------


def test_threshold_batch_puts_ious_exactly_at_every_threshold():
    detections, ground_truth = threshold_batch()
    exact = set()
    for b in range(detections["start"].shape[0]):
        for i in np.flatnonzero(detections["valid"][b]):
            for j in np.flatnonzero(ground_truth["valid"][b]):
                s1, e1 = (Fraction(float(detections[k][b, i])) for k in ("start", "end"))
                s2, e2 = (Fraction(float(ground_truth[k][b, j])) for k in ("start", "end"))
                inter = max(Fraction(0), min(e1, e2) - max(s1, s2))
                if inter:
                    exact.add(inter / (max(e1, e2) - min(s1, s2)))
    assert {Fraction(k, 20) for k in range(1, 20)} <= exact


def test_default_thresholds_are_the_rounded_ratios():
    # float32(k/20 as a float64) is float32's rounding of the ratio k/20 itself, so a
    # correctly rounded IoU of exactly k/20 equals the float32 threshold.
    for k, threshold in enumerate(metrics.DEFAULT_IOU_THRESHOLDS, start=1):
        assert np.float32(threshold) == np.float32(k) / np.float32(20)


@pytest.mark.parametrize("division", ["reciprocal", "-1"])
def test_emulated_division_moves_quotients_at_thresholds(division):
    # Without this, the emulated tests below would prove nothing.
    units = np.array([[k * n, 20 * n] for k in range(1, 20) for n in range(1, 13)], np.float32)
    inter, union = units[:, 0] * np.float32(STEP), units[:, 1] * np.float32(STEP)
    thresholds = np.float32(units[:, 0] / units[:, 1])
    with emulated_division(division):
        quotient = np.asarray(jax.jit(jnp.divide)(inter, union))
    assert np.any(quotient < thresholds)


def test_emulated_reciprocal_division_splits_the_iou_tie():
    # IoU 1/5 as 1/5 and as 3/15 steps: equal when rounded correctly, not as x * (1/y).
    inter = np.array([1, 3], np.float32) * np.float32(STEP)
    union = np.array([5, 15], np.float32) * np.float32(STEP)
    with emulated_division("reciprocal"):
        quotient = np.asarray(jax.jit(jnp.divide)(inter, union))
    assert quotient[1] > quotient[0]
    np.testing.assert_array_equal(metrics.iou_1d(0.0, inter, 0.0, union), np.float32(0.2))


# --- correctly rounded IoU ----------------------------------------------------------


def _random_intervals(rng, size):
    """Float32 intervals on a 1/64 s grid and arbitrary float32 ones, mixed."""
    on_grid = rng.integers(0, 4000, (4, size)) * STEP
    anywhere = rng.random((4, size)) * 10.0 ** rng.integers(-3, 4, (4, size))
    values = np.where(rng.random((4, size)) < 0.5, on_grid, anywhere).astype(np.float32)
    return np.minimum(values[0], values[1]), np.maximum(values[0], values[1]), *values[2:]


def _float32_iou(start_a, end_a, start_b, end_b):
    lo, hi = np.minimum(start_b, end_b), np.maximum(start_b, end_b)
    inter = np.minimum(end_a, hi) - np.maximum(start_a, lo)
    union = np.maximum(end_a, hi) - np.minimum(start_a, lo)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(inter > 0, inter / union, np.float32(0)), (lo, hi)


@pytest.mark.parametrize("division", [None, *DIVISIONS])
def test_iou_1d_is_the_correctly_rounded_quotient(division):
    start_a, end_a, b0, b1 = _random_intervals(np.random.default_rng(1), 200_000)
    expected, (start_b, end_b) = _float32_iou(start_a, end_a, b0, b1)
    with contextlib.nullcontext() if division is None else emulated_division(division):
        got = np.asarray(jax.jit(metrics.iou_1d)(start_a, end_a, start_b, end_b))
    np.testing.assert_array_equal(got.view(np.int32), expected.astype(np.float32).view(np.int32))


# --- decisions against the reference ------------------------------------------------


@pytest.mark.parametrize("division", [None, *DIVISIONS])
def test_ious_at_thresholds_match_reference(division):
    detections, ground_truth = threshold_batch()
    with contextlib.nullcontext() if division is None else emulated_division(division):
        _assert_matches_reference(detections, ground_truth, num_classes=2, total_hours=0.4)


@pytest.mark.parametrize("division", [None, *DIVISIONS])
def test_false_alarms_exactly_at_budget_match_reference(division):
    detections, ground_truth = frr_budget_case()
    kwargs = dict(num_classes=1, total_hours=0.4, fa_per_hour=(2.5, 5.0, 7.5))
    with contextlib.nullcontext() if division is None else emulated_division(division):
        _assert_matches_reference(detections, ground_truth, **kwargs)
    expected = reference.detection_scores(detections, ground_truth, **kwargs)
    frr = [expected[f"FRR@{budget:g}"] for budget in (2.5, 5, 7.5)]
    assert frr == pytest.approx([2 / 3, 1 / 3, 0])  # FA/h is 2.5, 5, 7.5 exactly at the cuts


def tied_score_case():
    """Each hit ties in score with a false alarm listed before it (-0.0 with 0.0): in
    flat order the false alarms rank first and AP is 1/2."""
    gt = [(0, 64, 0, 0), (128, 192, 0, 0)]
    dets = [(320, 384, 0.5, 0, 0), (0, 64, 0.5, 0, 0), (448, 512, 0.0, 0, 0), (128, 192, 0.0, 0, 0)]
    detections = _padded(dets, with_score=True)
    detections["score"][0, 3] = -0.0
    return detections, _padded(gt, with_score=False)


@pytest.mark.parametrize("ties", [False, True])
def test_tied_scores_match_reference_whatever_a_sort_does_with_ties(ties):
    with reversed_ties() if ties else contextlib.nullcontext():
        detections, ground_truth = tied_score_case()
        _assert_matches_reference(detections, ground_truth, num_classes=1, total_hours=1.0)
        detections, ground_truth = threshold_batch(seed=1)
        _assert_matches_reference(detections, ground_truth, num_classes=2, total_hours=0.4)
    expected = reference.detection_scores(*tied_score_case(), num_classes=1, total_hours=1.0)
    assert expected["AP@0.05"] == 0.5


# --- early question frames ----------------------------------------------------------


def _early_frame_grid():
    """`EarlyFrameCounts` [N, 2] of every early <= predicted <= 100 (class 1; class 0 the
    background, all zero): the shares are every such ratio, most of them not dyadic."""
    early, predicted = np.array([(e, p) for p in range(1, 101) for e in range(p + 1)], np.int32).T
    zero = np.zeros_like(early)
    return metrics.EarlyFrameCounts(np.stack([zero, early], 1), np.stack([zero, predicted], 1))


@pytest.mark.parametrize("division", [None, *DIVISIONS])
def test_early_frame_shares_are_the_correctly_rounded_quotients(division):
    counts = _early_frame_grid()
    with contextlib.nullcontext() if division is None else emulated_division(division):
        result = jax.jit(metrics.early_frames_from_counts)(counts)
    early, predicted = (np.asarray(c, np.float64) for c in counts)
    expected = np.where(predicted > 0, early / np.maximum(predicted, 1), 0).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(result.share).view(np.int32), expected.view(np.int32))
    overall = (early.sum(1) / predicted.sum(1)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(result.overall).view(np.int32), overall.view(np.int32))


@pytest.mark.parametrize("division", [None, "reciprocal", "+2"])
def test_early_frames_of_calls_match_reference_whatever_the_division(division):
    rng = np.random.default_rng(0)
    gold = np.repeat(rng.integers(0, 5, (4, 30)), 7, axis=1).astype(np.int32)  # [4, 210]
    pred = np.roll(gold, -9, axis=1)
    mask = np.arange(210)[None] < rng.integers(100, 211, (4, 1))
    kwargs = dict(num_classes=5, hop_s=0.04, margin_s=0.2)
    with contextlib.nullcontext() if division is None else emulated_division(division):
        result = jax.jit(lambda p, g, m: metrics.early_frames(p, g, m, **kwargs))(pred, gold, mask)
    expected = reference.early_frames(pred, gold, mask, **kwargs)
    np.testing.assert_array_equal(result.counts.early, expected.counts.early)
    np.testing.assert_array_equal(result.counts.predicted, expected.counts.predicted)
    np.testing.assert_array_equal(result.share, expected.share.astype(np.float32))
    assert result.overall == np.float32(expected.overall)
