"""Hand-computed cases for the sequence-labelling rules of docs/metrics.md."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import metrics
from metrics import reference


def _one(labels):
    return np.asarray([labels], np.int32)


def _all_valid(labels):
    return np.ones((1, len(labels)), bool)


def _instance(gold, pred, num_classes, mask=None, **kwargs):
    mask = _all_valid(gold) if mask is None else np.asarray([mask])
    result = metrics.instance_prf(_one(pred), _one(gold), mask, num_classes=num_classes, **kwargs)
    expected = reference.instance_prf(
        _one(pred), _one(gold), mask, num_classes=num_classes, **kwargs
    )
    np.testing.assert_allclose(result, expected, atol=1e-6)
    return tuple(float(v) for v in result)


@pytest.mark.parametrize(
    "gold, pred, num_classes, mask, expected",
    [
        ([0, 1, 1, 1, 1, 1, 0, 2, 2, 2, 2, 2, 0], None, 3, None, (1, 1, 1)),
        ([1, 1, 1, 0, 0, 0, 0, 0], None, 2, None, (0, 0, 0)),  # run shorter than min_run
        ([1] * 12, None, 2, [i != 4 for i in range(12)], (0.5, 0.5, 0.5)),  # mask cuts a run
        ([1] * 10, [1, 1, 1, 1, 1, 0, 1, 1, 1, 1], 2, None, (0.5, 1, 2 / 3)),
    ],
)
def test_instance_worked_examples(gold, pred, num_classes, mask, expected):
    pred = gold if pred is None else pred
    assert _instance(gold, pred, num_classes, mask) == pytest.approx(expected)


def test_instance_streak_restarts_at_a_label_change():
    # pred == gold for 6 steps, but each instance holds only 3 of them.
    assert _instance([1, 1, 1, 2, 2, 2], [1, 1, 1, 2, 2, 2], 3, min_run=4) == (0, 0, 0)
    assert _instance([1, 1, 1, 2, 2, 2], [1, 1, 1, 2, 2, 2], 3, min_run=3) == (1, 1, 1)


def test_instance_counts_one_long_prediction_over_two_gold_instances():
    # Predicted run of 1s is correct (3 gold 1s inside); gold 2 is not found.
    # Class 1: P=1, R=1. Class 2: predicted 0, gold 1 -> P=0, R=0. Macro: 0.5 each.
    assert _instance([1, 1, 1, 2, 2, 2], [1] * 6, 3, min_run=3) == (0.5, 0.5, 0.5)
    counts = metrics.instance_counts(
        _one([1] * 6), _one([1, 1, 1, 2, 2, 2]), _all_valid([0] * 6), num_classes=3, min_run=3
    )
    assert counts.correct.tolist() == [0, 1, 0]
    assert counts.predicted.tolist() == [0, 1, 0]
    assert counts.found.tolist() == [0, 1, 0]
    assert counts.gold.tolist() == [0, 1, 1]


def test_instance_two_separate_streaks_count_the_instance_once():
    gold = [1] * 12
    pred = [1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1]
    counts = metrics.instance_counts(_one(pred), _one(gold), _all_valid(gold), num_classes=3)
    assert counts.found.tolist() == [0, 1, 0]
    assert counts.gold.tolist() == [0, 1, 0]
    assert counts.predicted.tolist() == [0, 2, 1]
    assert counts.correct.tolist() == [0, 2, 0]


def test_instance_background_never_enters_and_min_run_one():
    assert _instance([0] * 6, [0] * 6, 2) == (0, 0, 0)
    # Class 1: 2 predicted, 1 correct, 1 of 1 found -> (0.5, 1, 2/3). Class 2: (0, 0, 0).
    assert _instance([0, 1, 0, 2], [0, 1, 0, 1], 3, min_run=1) == pytest.approx((0.25, 0.5, 1 / 3))
    # background=2: class 0 is an ordinary class here.
    assert _instance([0, 0, 2], [0, 0, 2], 3, background=2, min_run=2) == (1, 1, 1)


def test_timestep_hand_computed_and_absent_classes():
    gold, pred = [0, 0, 1, 1, 2], [0, 1, 1, 2, 2]
    # class 0: tp1 fp0 fn1; class 1: tp1 fp1 fn1; class 2: tp1 fp1 fn0. Classes 3, 4 absent.
    p, r, f1 = metrics.timestep_prf(_one(pred), _one(gold), _all_valid(gold), num_classes=5)
    assert float(p) == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert float(r) == pytest.approx((0.5 + 0.5 + 1) / 3)
    assert float(f1) == pytest.approx((2 / 3 + 0.5 + 2 / 3) / 3)
    counts = metrics.timestep_counts(_one(pred), _one(gold), _all_valid(gold), num_classes=5)
    assert counts.tp.tolist() == [1, 1, 1, 0, 0]
    assert counts.fp.tolist() == [0, 1, 1, 0, 0]
    assert counts.fn.tolist() == [1, 1, 0, 0, 0]


def test_timestep_average_over_and_mask():
    gold, pred = [0, 0, 1, 1, 2], [0, 1, 1, 2, 2]
    without_background = np.array([False, True, True, False, False])
    p, r, f1 = metrics.timestep_prf(
        _one(pred), _one(gold), _all_valid(gold), num_classes=5, average_over=without_background
    )
    assert (float(p), float(r), float(f1)) == pytest.approx((0.5, 0.75, (0.5 + 2 / 3) / 2))
    # Masked timesteps do not count: only (gold 0, pred 0) and (gold 1, pred 1) remain.
    mask = np.array([[True, False, True, False, False]])
    assert tuple(metrics.timestep_prf(_one(pred), _one(gold), mask, num_classes=3)) == (1, 1, 1)


def test_everything_masked_gives_zeros():
    zeros = np.zeros((2, 4), np.int32)
    mask = np.zeros((2, 4), bool)
    assert tuple(map(float, metrics.timestep_prf(zeros, zeros, mask, num_classes=3))) == (0, 0, 0)
    assert tuple(map(float, metrics.instance_prf(zeros, zeros, mask, num_classes=3))) == (0, 0, 0)


def test_out_of_range_labels_match_no_class():
    gold, pred = [1, 1, 0], [7, 1, 0]
    counts = metrics.timestep_counts(_one(pred), _one(gold), _all_valid(gold), num_classes=2)
    assert counts.tp.tolist() == [1, 1]
    assert counts.fp.tolist() == [0, 0]
    assert counts.fn.tolist() == [0, 1]


def test_counts_merge_by_addition():
    rng = np.random.default_rng(0)
    pred = rng.integers(0, 3, (4, 30))
    gold = rng.integers(0, 3, (4, 30))
    mask = rng.random((4, 30)) > 0.1
    for count in (metrics.timestep_counts, metrics.instance_counts):
        whole = count(pred, gold, mask, num_classes=3)
        merged = count(pred[:1], gold[:1], mask[:1], num_classes=3) + count(
            pred[1:], gold[1:], mask[1:], num_classes=3
        )
        assert type(merged) is type(whole)
        for a, b in zip(whole, merged, strict=True):
            np.testing.assert_array_equal(a, b)


def test_jit_and_vmap_over_model_variants():
    rng = np.random.default_rng(1)
    preds = rng.integers(0, 3, (5, 2, 20))  # 5 model variants
    gold = rng.integers(0, 3, (2, 20))
    mask = np.ones((2, 20), bool)

    @jax.jit
    def evaluate(pred):
        return metrics.timestep_prf(pred, gold, mask, num_classes=3), metrics.instance_prf(
            pred, gold, mask, num_classes=3, min_run=2
        )

    timestep, instance = jax.vmap(evaluate)(jnp.asarray(preds))
    assert timestep.f1.shape == (5,)
    for v in range(5):
        expected = reference.timestep_prf(preds[v], gold, mask, num_classes=3)
        np.testing.assert_allclose([x[v] for x in timestep], expected, atol=1e-6)
        expected = reference.instance_prf(preds[v], gold, mask, num_classes=3, min_run=2)
        np.testing.assert_allclose([x[v] for x in instance], expected, atol=1e-6)


def test_counts_psum_across_a_named_axis():
    rng = np.random.default_rng(2)
    pred = rng.integers(0, 4, (3, 2, 25))  # 3 shards of 2 examples
    gold = rng.integers(0, 4, (3, 2, 25))
    mask = np.ones((3, 2, 25), bool)

    def shard_counts(p, g, m):
        return jax.lax.psum(metrics.instance_counts(p, g, m, num_classes=4, min_run=2), "shard")

    summed = jax.vmap(shard_counts, axis_name="shard")(pred, gold, mask)
    whole = metrics.instance_counts(
        pred.reshape(6, 25), gold.reshape(6, 25), mask.reshape(6, 25), num_classes=4, min_run=2
    )
    for a, b in zip(summed, whole, strict=True):
        np.testing.assert_array_equal(a[0], b)


def _segments(rng, length, num_classes, longest):
    """Runs of random lengths in [1, longest], labels including out-of-range ones."""
    labels = rng.integers(-1, num_classes + 1, size=length)
    return np.repeat(labels, rng.integers(1, longest + 1, size=length))[:length]


def _one_early_window(length, cls, other, window):
    """pred is `cls` over nearly the whole row; gold only on `window` early timesteps."""
    pred = np.zeros(length, np.int64)
    pred[3 : length - 3] = cls
    gold = np.full(length, other, np.int64)
    gold[10 : 10 + window] = cls
    return pred, gold


def _row(counts, row):
    return type(counts)(*(field[row] for field in counts))


@pytest.mark.parametrize(
    "length, num_classes, min_run, background, longest",
    [
        (5000, 3, 5, 0, 1500),  # runs across many 8-timestep words: carries of carries
        (601, 20, 2, 1, 40),  # 16-bit cell codes
        (37, 70, 9, 0, 9),  # 32-bit histogram codes
        (7, 2, 9, 0, 3),  # min_run > T: nothing is found
    ],
)
def test_sequence_counts_match_separate_counts_and_reference(
    length, num_classes, min_run, background, longest
):
    rng = np.random.default_rng(length)
    rows = 5
    gold = np.stack([_segments(rng, length, num_classes, longest) for _ in range(rows)])
    pred = np.where(rng.random(gold.shape) < 0.02, rng.integers(0, num_classes, gold.shape), gold)
    pred[1] = _segments(rng, length, num_classes, longest)
    cls, other = (2, 0) if background == 1 else (1, 2)
    pred[2], gold[2] = _one_early_window(length, cls, other, min_run)
    pred[3], gold[3] = gold[2], pred[2]  # the same from the gold side
    mask = rng.random(gold.shape) > 0.01
    mask[2:4] = True
    mask[4, length // 2 :] = False
    # One example per row, so that every row is checked on its own.
    pred, gold, mask = pred[:, None], gold[:, None], mask[:, None]
    kwargs = dict(num_classes=num_classes, background=background, min_run=min_run)

    def per_row(p, g, m):
        return (
            metrics.sequence_counts(p, g, m, **kwargs),
            metrics.timestep_counts(p, g, m, num_classes=num_classes),
            metrics.instance_counts(p, g, m, **kwargs),
        )

    (timestep, instance), timestep_alone, instance_alone = jax.jit(jax.vmap(per_row))(
        pred, gold, mask
    )
    for a, b in zip((*timestep, *instance), (*timestep_alone, *instance_alone), strict=True):
        np.testing.assert_array_equal(a, b)
    for row in range(rows):
        args = (pred[row], gold[row], mask[row])
        np.testing.assert_allclose(
            metrics.prf_from_counts(_row(timestep, row)),
            reference.timestep_prf(*args, num_classes=num_classes),
            atol=1e-6,
        )
        np.testing.assert_allclose(
            metrics.prf_from_counts(_row(instance, row)),
            reference.instance_prf(*args, **kwargs),
            atol=1e-6,
        )
    # The one window, thousands of timesteps before the run ends, makes the run a hit.
    hit = int(10 + min_run <= length - 3)
    assert int(instance.correct[2, cls]) == hit and int(instance.found[3, cls]) == hit


@pytest.mark.parametrize("shape", [(0, 12), (3, 0)])
def test_empty_inputs_give_zero_counts(shape):
    labels = np.zeros(shape, np.int32)
    mask = np.ones(shape, bool)
    timestep, instance = metrics.sequence_counts(labels, labels, mask, num_classes=3)
    for counts in (
        *timestep,
        *instance,
        *metrics.timestep_counts(labels, labels, mask, num_classes=3),
    ):
        assert counts.tolist() == [0, 0, 0]


@pytest.mark.parametrize("count", ["timestep_counts", "sequence_counts"])
def test_num_classes_beyond_the_limit_is_an_error(count):
    count, limit = getattr(metrics, count), metrics.sequence.MAX_CLASSES
    with pytest.raises(ValueError, match=f"num_classes: expected at most {limit}, got 70000"):
        count(_one([0]), _one([0]), _all_valid([0]), num_classes=70_000)
    count(_one([0]), _one([limit - 1]), _all_valid([0]), num_classes=limit)  # the limit is fine


def test_odd_histogram_is_exact_past_int32_wraparound():
    # The codes are their own scatter updates: bin j sums count_j * (2j + 1), which wraps
    # past 2**31 here (and past 2**32 for the last bin) and must still give exact counts.
    from metrics.sequence import _odd_histogram

    num_bins = 730
    rng = np.random.default_rng(0)
    bins = np.concatenate(
        [np.full(3_000_000, num_bins - 1), np.full(1_600_000, 500), rng.integers(0, num_bins, 999)]
    )
    expected = np.bincount(bins, minlength=num_bins)
    assert expected[num_bins - 1] * (2 * num_bins - 1) > 2**32
    codes = jnp.asarray(2 * bins + 1, jnp.int32)
    got = jax.jit(_odd_histogram, static_argnums=1)(codes, num_bins)
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got), expected)
