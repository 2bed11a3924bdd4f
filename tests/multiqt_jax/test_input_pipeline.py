"""multiqt_jax.input_pipeline on the smoke corpus: padding, masks, order, checkpointing."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from multiqt_jax import input_pipeline as pipeline
from speechkit import asr


@pytest.fixture(scope="module")
def source(smoke_build):
    data_dir, _ = smoke_build
    return tfds.data_source("synthetic_calls/questions-smoke", data_dir=str(data_dir))["train"]


@pytest.fixture(scope="module")
def index(source):
    return pipeline.CorpusIndex.read(source)


@pytest.mark.slow
def test_batches_are_padded_and_masked(source, index):
    config = pipeline.PipelineConfig(batch_size=2, shuffle=False, bucket_window=1)
    batches = list(pipeline.batches(source, np.arange(len(source)), config, index=index))
    assert len(batches) == 3  # 5 calls: 2 + 2 + 1
    for step, batch in enumerate(batches):
        rows, frames = batch["labels"].shape
        assert rows == 2 and frames % config.pad_multiple == 0
        assert batch["audio"].shape == (2, frames, 40)
        assert batch["text"].shape == (2, frames // 2, asr.NUM_SYMBOLS)
        for row in range(rows):
            if not batch["example_mask"][row]:
                assert step == 2 and not batch["audio_mask"][row].any()
                continue
            record = source[step * 2 + row]
            length = record["audio"].shape[0]
            assert batch["audio_mask"][row].sum() == length
            assert batch["text_mask"][row].sum() == length // 2
            np.testing.assert_array_equal(batch["labels"][row, :length], record["labels"])
            assert (
                not batch["labels"][row, length:].any() and not batch["audio"][row, length:].any()
            )
            np.testing.assert_allclose(batch["text"][row][batch["text_mask"][row]].sum(axis=1), 1.0)


@pytest.mark.slow
def test_folds_seed_and_checkpointed_iterator(source, index):
    train = index.select(folds=(0, 1, 2, 3))
    assert set(index.folds[train]) <= {0, 1, 2, 3} and len(train) == 4
    config = pipeline.PipelineConfig(batch_size=2, num_epochs=2)
    first = [b["labels"] for b in pipeline.batches(source, train, config, seed=3, index=index)]
    again = [b["labels"] for b in pipeline.batches(source, train, config, seed=3, index=index)]
    assert len(first) == 4
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    iterator = iter(pipeline.batches(source, train, config, seed=3, index=index))
    next(iterator)
    state = iterator.get_state()
    expected = [next(iterator)["labels"] for _ in range(3)]
    resumed = iter(pipeline.batches(source, train, config, seed=3, index=index))
    resumed.set_state(state)
    for want in expected:
        np.testing.assert_array_equal(next(resumed)["labels"], want)
    with pytest.raises(ValueError, match=r"folds: \[7\] not in the corpus"):
        index.select(folds=(7,))


def test_bucketing_cuts_padding():
    lengths = np.random.default_rng(0).integers(100, 6000, size=400)

    def padding(config):
        plan = pipeline.epoch_plan(lengths, config, seed=0, epoch=0)
        return sum(len(b) * lengths[b].max() - lengths[b].sum() for b in plan)

    plain = padding(pipeline.PipelineConfig(batch_size=8, bucket_window=1))
    bucketed = padding(pipeline.PipelineConfig(batch_size=8, bucket_window=8))
    assert bucketed < 0.3 * plain
    plan = pipeline.epoch_plan(lengths, pipeline.PipelineConfig(batch_size=8), seed=0, epoch=0)
    assert sorted(np.concatenate(plan).tolist()) == list(range(400))  # every example once


def test_bad_config():
    with pytest.raises(ValueError, match="batch_size: expected >= 1"):
        pipeline.PipelineConfig(batch_size=0)
    with pytest.raises(ValueError, match="pad_multiple: must be even"):
        pipeline.PipelineConfig(pad_multiple=25)
