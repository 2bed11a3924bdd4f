"""speechkit.batching: epoch plans, length bucketing, collation with masks, Grain state."""

import numpy as np
import pytest

from speechkit import batching

LENGTHS = np.random.default_rng(0).integers(100, 6000, size=403)


def _config(**overrides):
    return batching.BatchingConfig(**{"batch_size": 8, **overrides})


def _epoch(config, seed=0, epoch=0, lengths=LENGTHS):
    return batching.epoch_plan(len(lengths), config, seed=seed, epoch=epoch, lengths=lengths)


@pytest.mark.parametrize("bucket_window", [1, 3, None])
@pytest.mark.parametrize("shuffle", [True, False])
def test_an_epoch_covers_every_example_once(bucket_window, shuffle):
    config = _config(bucket_window=bucket_window, shuffle=shuffle, shuffle_batches=shuffle)
    steps = _epoch(config)
    assert sorted(np.concatenate(steps).tolist()) == list(range(len(LENGTHS)))
    assert [len(s) for s in steps].count(8) == len(LENGTHS) // 8
    assert all(s.dtype == np.int64 for s in steps)


def test_without_shuffling_the_plan_is_in_order():
    steps = batching.epoch_plan(10, _config(batch_size=4, shuffle=False), seed=3, epoch=1)
    assert [s.tolist() for s in steps] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_drop_remainder_drops_only_a_partial_last_batch():
    kept = batching.epoch_plan(10, _config(batch_size=4, drop_remainder=True), seed=0, epoch=0)
    assert [len(s) for s in kept] == [4, 4]
    full = batching.epoch_plan(8, _config(batch_size=4, drop_remainder=True), seed=0, epoch=0)
    assert [len(s) for s in full] == [4, 4]


def test_same_seed_same_plan_and_each_seed_and_epoch_its_own():
    config = _config(bucket_window=4, shuffle_batches=True)

    def flat(**kw):
        return np.concatenate(_epoch(config, **kw)).tolist()

    assert flat(seed=5, epoch=1) == flat(seed=5, epoch=1)
    assert flat(seed=5, epoch=1) != flat(seed=6, epoch=1)
    assert flat(seed=5, epoch=1) != flat(seed=5, epoch=2)


def test_bucketing_sorts_within_windows_and_cuts_padding():
    config = _config(bucket_window=4)  # windows of about 32 examples
    order = np.concatenate(_epoch(config))
    windows = np.array_split(order, int(np.ceil(len(order) / 32)))
    assert all(len(w) <= 32 for w in windows)
    for window in windows:
        assert np.all(np.diff(LENGTHS[window]) >= 0)
    shuffled = np.random.default_rng([0, 0]).permutation(len(LENGTHS))
    assert [sorted(w.tolist()) for w in windows] == [
        sorted(w.tolist()) for w in np.array_split(shuffled, len(windows))
    ]

    def padding(config):
        steps = _epoch(config)
        return sum(len(s) * LENGTHS[s].max() - LENGTHS[s].sum() for s in steps)

    assert padding(_config(bucket_window=8)) < 0.3 * padding(_config(bucket_window=1))


def test_a_whole_epoch_window_sorts_everything_and_ties_keep_their_order():
    lengths = np.array([3.0, 1.0, 2.0, 1.0, 3.0])
    config = _config(batch_size=2, shuffle=False, bucket_window=None)
    steps = batching.epoch_plan(5, config, seed=0, epoch=0, lengths=lengths)
    assert [s.tolist() for s in steps] == [[1, 3], [2, 0], [4]]
    ties = np.random.default_rng(1).integers(0, 3, size=200)  # long enough for quicksort
    steps = batching.epoch_plan(200, config, seed=0, epoch=0, lengths=ties)
    order = np.concatenate(steps)
    assert order.tolist() == sorted(range(200), key=lambda i: (ties[i], i))


def test_shuffle_batches_only_reorders_whole_batches():
    sorted_ = _epoch(_config(bucket_window=4))
    shuffled = _epoch(_config(bucket_window=4, shuffle_batches=True))
    assert [s.tolist() for s in shuffled] != [s.tolist() for s in sorted_]
    assert sorted(s.tolist() for s in shuffled) == sorted(s.tolist() for s in sorted_)


def test_plan_maps_positions_to_indices_epoch_after_epoch():
    indices = np.array([40, 10, 30, 20, 50])
    lengths = np.array([4, 1, 3, 2, 5])
    config = _config(batch_size=2, num_epochs=3, bucket_window=None, shuffle=False)
    steps = batching.plan(indices, config, seed=0, lengths=lengths)
    assert [s.tolist() for s in steps] == [[10, 20], [30, 40], [50]] * 3
    shuffled = batching.plan(indices, _config(batch_size=2, num_epochs=2), seed=1)
    per_epoch = [np.concatenate(shuffled[:3]), np.concatenate(shuffled[3:])]
    for epoch, order in enumerate(per_epoch):
        positions = batching.epoch_plan(5, _config(batch_size=2), seed=1, epoch=epoch)
        assert order.tolist() == indices[np.concatenate(positions)].tolist()


def test_empty_and_bad_selections_are_refused():
    with pytest.raises(ValueError, match="no records selected"):
        batching.select(5, [])
    with pytest.raises(ValueError, match=r"indices \[5, -1\] outside a source of 5 records"):
        batching.select(5, [0, 5, -1])
    assert batching.select(3).tolist() == [0, 1, 2]
    assert batching.select(3, [2, 0]).dtype == np.int64
    with pytest.raises(ValueError, match="no examples selected"):
        batching.plan([], _config())
    with pytest.raises(ValueError, match="3 examples make no batch of 8 with drop_remainder"):
        batching.plan([0, 1, 2], _config(drop_remainder=True))
    with pytest.raises(ValueError, match="needs `lengths`"):
        batching.plan([0, 1, 2], _config(bucket_window=2))
    with pytest.raises(ValueError, match="2 lengths for 3 examples"):
        batching.plan([0, 1, 2], _config(bucket_window=2), lengths=[1, 2])


def test_bad_configs_name_the_field():
    with pytest.raises(ValueError, match=r"BatchingConfig.batch_size: expected an int >= 1, got 0"):
        batching.BatchingConfig(batch_size=0)
    with pytest.raises(ValueError, match=r"BatchingConfig.bucket_window: expected an int >= 1"):
        batching.BatchingConfig(batch_size=2, bucket_window=0)
    with pytest.raises(ValueError, match="needs a length"):
        batching.Field(np.float32, mask="m")


FIELDS = {
    "audio": batching.Field(np.float32, 6, mask="audio_mask"),
    "label": batching.Field(np.int32, 4, mask="valid", fill=-1),
    "duration": batching.Field(np.float32),
}


def _example(frames, events):
    return {
        "audio": np.arange(frames * 2, dtype=np.float64).reshape(frames, 2) + 1,
        "label": np.arange(events) + 1,
        "duration": frames / 100,
        "name": "ignored",
    }


def test_collate_pads_masks_and_marks_filler_rows():
    batch = batching.collate([_example(5, 2), _example(3, 0)], FIELDS, rows=3)
    assert set(batch) == {"audio", "audio_mask", "label", "valid", "duration", "example_mask"}
    assert batch["audio"].shape == (3, 6, 2) and batch["audio"].dtype == np.float32
    np.testing.assert_array_equal(batch["audio"][0, :5], _example(5, 2)["audio"])
    assert not batch["audio"][0, 5:].any() and not batch["audio"][2].any()
    assert batch["audio_mask"].sum(axis=1).tolist() == [5, 3, 0]
    assert batch["audio_mask"][0].tolist() == [True] * 5 + [False]
    assert batch["label"].tolist() == [[1, 2, -1, -1], [-1] * 4, [-1] * 4]
    assert batch["label"].dtype == np.int32 and batch["valid"].sum(axis=1).tolist() == [2, 0, 0]
    np.testing.assert_allclose(batch["duration"], [0.05, 0.03, 0.0])
    assert batch["example_mask"].tolist() == [True, True, False]


def test_collate_refuses_overlong_values_and_too_many_examples():
    with pytest.raises(ValueError, match="'audio' of example 1 has 7 steps, more than .* 6"):
        batching.collate([_example(2, 0), _example(7, 0)], FIELDS, rows=2)
    with pytest.raises(ValueError, match="3 examples for 2 rows"):
        batching.collate([_example(2, 0)] * 3, FIELDS, rows=2)


def test_round_up():
    assert [batching.round_up(n, 100) for n in (0, 1, 100, 101)] == [100, 100, 100, 200]


def test_map_dataset_loads_each_step_and_restores_its_iterator_state():
    steps = batching.plan(np.arange(20), _config(batch_size=3, num_epochs=2), seed=4)

    def load(step, records):
        return {"step": np.int64(step), "records": records}

    dataset = batching.map_dataset(steps, load)
    assert len(dataset) == len(steps) == 14
    assert [int(b["step"]) for b in dataset] == list(range(14))
    assert all(np.array_equal(b["records"], s) for b, s in zip(dataset, steps, strict=True))
    iterator = iter(dataset)
    for _ in range(5):
        next(iterator)
    state = iterator.get_state()
    rest = [next(iterator)["records"].tolist() for _ in range(9)]
    resumed = iter(batching.map_dataset(steps, load))
    resumed.set_state(state)
    assert [next(resumed)["records"].tolist() for _ in range(9)] == rest
    with pytest.raises(StopIteration):
        next(resumed)


def test_nested_subsets_grow_with_the_fraction_and_keep_item_order():
    items = np.arange(10, 50)
    assert batching.nested_subset(items, 1.0, 0) is items
    small, large = (batching.nested_subset(items, f, [3, 1]) for f in (0.1, 0.5))
    assert small.size == 4 and large.size == 20 and set(small) <= set(large)
    assert np.all(np.diff(large) > 0) and set(large) <= set(items)
    assert not np.array_equal(large, batching.nested_subset(items, 0.5, [3, 2]))
