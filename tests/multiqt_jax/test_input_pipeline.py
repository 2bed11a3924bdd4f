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
    batches = list(pipeline.batches(source, config, index=index))  # indices: all records
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

    def dataset(seed=3):
        return pipeline.batches(source, config, seed=seed, indices=train, index=index)

    first = [b["labels"] for b in dataset()]
    again = [b["labels"] for b in dataset()]
    assert len(first) == 4
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    iterator = iter(dataset())
    next(iterator)
    state = iterator.get_state()
    expected = [next(iterator)["labels"] for _ in range(3)]
    resumed = iter(dataset())
    resumed.set_state(state)
    for want in expected:
        np.testing.assert_array_equal(next(resumed)["labels"], want)
    with pytest.raises(ValueError, match=r"folds: \[7\] not in the corpus"):
        index.select(folds=(7,))


def test_the_plan_buckets_and_shuffles_batches_whenever_examples_are():
    shuffled = pipeline.PipelineConfig(batch_size=4, num_epochs=3, bucket_window=8)
    assert shuffled.batching_config.shuffle_batches and shuffled.batching_config.bucket_window == 8
    plain = pipeline.PipelineConfig(shuffle=False, bucket_window=1).batching_config
    assert not plain.shuffle and not plain.shuffle_batches and plain.bucket_window == 1
    assert shuffled.batching_config.num_epochs == 3


def test_collate_pads_to_a_multiple_with_text_at_half_rate():
    examples = [
        {
            "audio": np.ones((n, 40), np.float32),
            "text": np.full((n // 2, asr.NUM_SYMBOLS), 0.5),
            "labels": np.arange(n),
        }
        for n in (130, 61)
    ]
    batch = pipeline.collate(examples, pipeline.PipelineConfig(batch_size=3, pad_multiple=100))
    assert batch["audio"].shape == (3, 200, 40) and batch["text"].shape == (3, 100, 29)
    assert batch["text"].dtype == np.float32 and batch["labels"].dtype == np.int32
    assert batch["audio_mask"].sum(axis=1).tolist() == [130, 61, 0]
    assert batch["text_mask"].sum(axis=1).tolist() == [65, 30, 0]
    assert batch["example_mask"].tolist() == [True, True, False]
    np.testing.assert_array_equal(batch["labels"][1, :61], np.arange(61))
    assert not batch["labels"][1, 61:].any()


def test_bad_config():
    with pytest.raises(ValueError, match="PipelineConfig.batch_size: expected an int >= 1"):
        pipeline.PipelineConfig(batch_size=0)
    with pytest.raises(ValueError, match="pad_multiple: must be even"):
        pipeline.PipelineConfig(pad_multiple=25)
