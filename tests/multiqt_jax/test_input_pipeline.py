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


def _record(call_id="call-7"):
    """A record with recognised and spoken words, 200 audio frames (2 s)."""
    said = [("where", 0.2, 0.5), ("is", 0.5, 0.6), ("the", 0.6, 0.7), ("address", 0.7, 1.2)]
    return {
        "call_id": call_id,
        "audio": np.zeros((200, 40), np.float32),
        "labels": np.zeros(200, np.int32),
        "asr_word": ["where", "is", "address"],
        "asr_start": np.array([0.2, 0.5, 0.7], np.float32),
        "asr_end": np.array([0.5, 0.6, 1.2], np.float32),
        "asr_emitted": np.array([1.5, 1.5, 1.5], np.float32),
        "spoken_word": [w for w, _, _ in said],
        "spoken_start": np.array([s for _, s, _ in said], np.float32),
        "spoken_end": np.array([e for _, _, e in said], np.float32),
    }


def _first_letter_frame(text: np.ndarray) -> int:
    return int(np.flatnonzero(text[:, asr.BLANK] < 1)[0])


def test_text_lag_delays_every_word_by_its_frames():
    record = _record()
    plain = pipeline.to_example(record, causal_text=True)["text"]
    late = pipeline.to_example(record, True, pipeline.TextAlterations(lag_s=0.2))["text"]
    assert _first_letter_frame(plain) == 75  # emitted at 1.5 s, 20 ms frames
    assert _first_letter_frame(late) == 85
    np.testing.assert_array_equal(late[85:], plain[75:-10])


def test_spoken_words_are_emitted_at_their_ends():
    text = pipeline.to_example(record := _record(), True, pipeline.TextAlterations("spoken"))[
        "text"
    ]
    assert _first_letter_frame(text) == 25  # "where" ends at 0.5 s
    words = pipeline.text_words(record, pipeline.TextAlterations("spoken"))
    assert [w.word for w in words] == ["where", "is", "the", "address"]
    with pytest.raises(ValueError, match="record 'x' has no spoken_word field"):
        pipeline.text_words({"call_id": "x"}, pipeline.TextAlterations("spoken"))


def test_substitutions_replace_words_by_others_of_the_call_per_call_id():
    record = _record()
    every = pipeline.TextAlterations("spoken", substitution_rate=1.0)
    spoken = pipeline.text_words(record, pipeline.TextAlterations("spoken"))
    changed = pipeline.text_words(record, every)
    assert all(a.word != b.word for a, b in zip(spoken, changed, strict=True))
    assert {w.word for w in changed} <= {w.word for w in spoken}
    assert [(w.start, w.end) for w in changed] == [(w.start, w.end) for w in spoken]
    assert changed == pipeline.text_words(record, every)  # the same call, the same errors
    half = pipeline.TextAlterations("spoken", substitution_rate=0.5)
    draws = {tuple(w.word for w in pipeline.text_words(_record(f"c{i}"), half)) for i in range(8)}
    assert len(draws) > 1  # other calls, other errors
    assert pipeline.substituted(spoken[:1], 1.0, "c") == spoken[:1]  # no other word to use


def test_bad_text_alterations_are_named():
    with pytest.raises(ValueError, match="TextAlterations.source: expected one of"):
        pipeline.TextAlterations(source="oracle")
    with pytest.raises(ValueError, match="TextAlterations.substitution_rate"):
        pipeline.TextAlterations(substitution_rate=1.5)
    with pytest.raises(ValueError, match="PipelineConfig.text: 1.0 s of emission lag needs"):
        pipeline.PipelineConfig(causal_text=False, text=pipeline.TextAlterations(lag_s=1.0))
    given = {**_record(), "text_posteriors": np.full((100, asr.NUM_SYMBOLS), 0.1, np.float32)}
    with pytest.raises(ValueError, match="cannot alter given text_posteriors"):
        pipeline.to_example(given, True, pipeline.TextAlterations(lag_s=0.5))
