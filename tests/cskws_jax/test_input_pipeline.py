"""cskws_jax.input_pipeline: training crops (repeat / random crop), evaluation batches."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from cskws_jax import input_pipeline as pipeline
from cskws_jax.datasets.features import MAX_KEYWORDS, Word, interval_fields

KEYWORDS = ["alpha", "bravo"]
K = len(KEYWORDS)


def _record(frames, words, utterance_id="u"):
    """A record like the builders': words is [(text, start s, end s)]."""
    audio = np.arange(frames * 64, dtype=np.float32).reshape(frames, 64)
    fields = interval_fields([Word(*w) for w in words], KEYWORDS, utterance_id)
    return {
        "audio": audio,
        **fields,
        "duration": np.float32(frames / 100),
        "utterance_id": utterance_id.encode(),
    }


SHORT = _record(150, [("alpha", 0.1, 0.5), ("the", 0.6, 0.8), ("bravo", 1.0, 1.4)], "short")
LONG = _record(
    900,
    [("bravo", 0.5, 1.0), ("and", 2.0, 2.2), ("alpha", 3.9, 4.5), ("alpha", 7.0, 7.6)],
    "long",
)


def test_a_short_utterance_is_repeated_with_its_words():
    config = pipeline.PipelineConfig(crop_s=4.0, shift_repeats=False)
    crop = pipeline.crop(SHORT, config, K, np.random.default_rng(0))
    assert crop["audio"].shape == (400, 64)
    np.testing.assert_array_equal(crop["audio"][150:300], SHORT["audio"])
    np.testing.assert_array_equal(crop["audio"][300:], SHORT["audio"][:100])
    # Copies at 0, 1.5 and 3.0 s; the third copy's "bravo" (4.0-4.4 s) is outside.
    np.testing.assert_allclose(crop["start"], [0.1, 0.6, 1.0, 1.6, 2.1, 2.5, 3.1, 3.6])
    assert crop["label"].tolist() == [0, K, 1, 0, K, 1, 0, K]
    assert crop["duration"] == pytest.approx(4.0)


def test_a_repeated_utterance_starts_at_a_random_frame():
    config = pipeline.PipelineConfig(crop_s=4.0)
    firsts = set()
    for seed in range(10):
        crop = pipeline.crop(SHORT, config, K, np.random.default_rng(seed))
        first = int(crop["audio"][0, 0]) // 64  # SHORT's audio counts up frame by frame
        firsts.add(first)
        np.testing.assert_array_equal(crop["audio"][: 150 - first], SHORT["audio"][first:])
        np.testing.assert_array_equal(crop["audio"][150 - first : 300 - first], SHORT["audio"])
        # Every kept word is a copy of one of SHORT's, moved by a whole number of copies.
        for s, e in zip(crop["start"], crop["end"], strict=True):
            original = (s + first / 100) % 1.5
            assert np.isclose(original, [0.1, 0.6, 1.0], atol=1e-4).any() or e == 4.0 or s == 0
    assert len(firsts) > 5


def test_a_long_utterance_is_cropped_and_cut_words_follow_min_visible():
    config = pipeline.PipelineConfig(crop_s=4.0, min_visible=0.5)
    for seed in range(20):
        crop = pipeline.crop(LONG, config, K, np.random.default_rng(seed))
        first = int(np.flatnonzero(LONG["audio"][:, 0] == crop["audio"][0, 0])[0])
        np.testing.assert_array_equal(crop["audio"], LONG["audio"][first : first + 400])
        offset = first / 100
        assert np.all((crop["start"] >= 0) & (crop["end"] <= 4.0 + 1e-6))
        assert np.all(crop["start"] < crop["end"])
        # "alpha" at 3.9-4.5 s is kept exactly when half of it is inside the crop.
        inside = np.clip([3.9 - offset, 4.5 - offset], 0, 4.0)
        expected = (inside[1] - inside[0]) >= 0.3 - 1e-9
        found = np.any(np.isclose(crop["end"], inside[1], atol=1e-5) & (crop["label"] == 0))
        assert found == expected, (seed, offset)


def test_unknown_class_can_be_left_out():
    config = pipeline.PipelineConfig(crop_s=4.0, unknown_class=False)
    crop = pipeline.crop(SHORT, config, K, np.random.default_rng(0))
    assert set(crop["label"].tolist()) == {0, 1}


def test_training_batches_are_seeded_masked_and_resumable():
    source = [SHORT, LONG, SHORT, LONG, LONG]
    config = pipeline.PipelineConfig(batch_size=2, crop_s=3.0, num_epochs=2)
    dataset = pipeline.training_batches(source, config, num_keywords=K, seed=3)
    batches = list(dataset)
    assert len(batches) == 6  # 3 per epoch, the last one partial
    again = list(pipeline.training_batches(source, config, num_keywords=K, seed=3))
    for a, b in zip(batches, again, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    other = list(pipeline.training_batches(source, config, num_keywords=K, seed=4))
    assert any(
        not np.array_equal(a["audio"], b["audio"]) for a, b in zip(batches, other, strict=True)
    )
    for batch in batches:
        assert batch["audio"].shape == (2, 300, 64) and batch["start"].shape == (2, 64)
        rows = batch["example_mask"]
        assert batch["audio_mask"][rows].all() and not batch["audio_mask"][~rows].any()
        assert not batch["valid"][~rows].any() and (batch["record"][~rows] == -1).all()
        assert np.all(batch["end"][batch["valid"]] <= 3.0 + 1e-6)
    assert sum(int(b["example_mask"].sum()) for b in batches) == 10
    # A Grain iterator's state restores mid-stream.
    iterator = iter(dataset)
    next(iterator)
    state = iterator.get_state()
    expected = next(iterator)
    resumed = iter(dataset)
    resumed.set_state(state)
    np.testing.assert_array_equal(next(resumed)["audio"], expected["audio"])


def test_evaluation_batches_hold_whole_utterances_in_length_order():
    source = [LONG, SHORT, LONG]
    config = pipeline.PipelineConfig(batch_size=2, pad_multiple=100)
    batches = list(pipeline.evaluation_batches(source, config, num_keywords=K))
    assert [b["record"].tolist() for b in batches] == [[1, 0], [2, -1]]
    picked = list(pipeline.evaluation_batches(source, config, num_keywords=K, indices=[2, 1]))
    assert [b["record"].tolist() for b in picked] == [[1, 2]]
    first = batches[0]
    assert first["audio"].shape == (2, 900, 64)
    assert first["audio_mask"].sum(axis=1).tolist() == [150, 900]
    np.testing.assert_allclose(first["duration"], [1.5, 9.0])
    np.testing.assert_allclose(first["start"][1, :4], [0.5, 2.0, 3.9, 7.0])
    assert first["label"][1, :4].tolist() == [1, K, 0, 0] and first["valid"][1].sum() == 4


def test_bad_records_are_named():
    config = pipeline.PipelineConfig(crop_s=1.0, max_events=2)
    empty = {**SHORT, "audio": np.zeros((0, 64), np.float32), "utterance_id": b"empty-one"}
    with pytest.raises(ValueError, match="'empty-one': empty audio"):
        pipeline.crop(empty, config, K, np.random.default_rng(0))
    with pytest.raises(ValueError, match="'long': keyword labels .* outside"):
        pipeline.whole(LONG, config, num_keywords=1)
    with pytest.raises(ValueError, match=r"record 0 \('long'\): 4 events .*max_events = 2"):
        list(pipeline.evaluation_batches([LONG], config, num_keywords=K))
    with pytest.raises(ValueError, match="no records selected"):
        pipeline.training_batches([LONG], config, num_keywords=K, indices=[])
    with pytest.raises(ValueError, match=r"indices \[3\] outside a source of 1 records"):
        pipeline.evaluation_batches([LONG], config, num_keywords=K, indices=[0, 3])
    with pytest.raises(ValueError, match="more than the record's MAX_KEYWORDS"):
        interval_fields([Word("alpha", i, i + 0.5) for i in range(MAX_KEYWORDS + 1)], KEYWORDS, "x")
    reversed_word = {**SHORT, "keyword_end": SHORT["keyword_start"] - 0.1}
    with pytest.raises(ValueError, match=r"'short': word interval \[0.100, 0.000\] s \(label 0\)"):
        pipeline.whole(reversed_word, config, K)
    late = _record(150, [("alpha", 1.2, 1.7)], "late")
    with pytest.raises(
        ValueError, match=r"'late': word interval .* not inside the audio \(1.500 s\)"
    ):
        pipeline.crop(late, config, K, np.random.default_rng(0))
    with pytest.raises(ValueError, match="crop_s"):
        pipeline.PipelineConfig(crop_s=0.001)


@pytest.mark.slow
def test_smoke_corpus_batches(smoke_build):
    data_dir, _ = smoke_build
    source = tfds.data_source("synthetic_kws/smoke", data_dir=str(data_dir))
    config = pipeline.PipelineConfig(batch_size=4, crop_s=3.0)
    for batch in pipeline.training_batches(source["train"], config, num_keywords=20, seed=0):
        valid = batch["valid"]
        assert np.all((batch["start"][valid] >= 0) & (batch["end"][valid] <= 3.0 + 1e-6))
        assert np.all(batch["label"][valid] <= 20)
    total = 0.0
    for batch in pipeline.evaluation_batches(source["test"], config, num_keywords=20):
        total += float(batch["duration"].sum())
    expected = sum(float(source["test"][i]["duration"]) for i in range(len(source["test"])))
    assert total == pytest.approx(expected, rel=1e-6)
