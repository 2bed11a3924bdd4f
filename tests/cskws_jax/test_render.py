"""cskws_jax.datasets.render: voices split, word intervals cross-checked, seeded."""

import numpy as np
import pytest

from cskws_jax.datasets import render

WORDS = [
    "i",
    "was",
    "about",
    "to",
    "call",
    "people",
    "because",
    "the",
    "water",
    "was",
    "really",
    "cold",
]


@pytest.fixture(scope="module")
def utterance():
    return render.render_utterance(WORDS, np.random.default_rng(5), "train")


def test_train_and_test_voices_are_disjoint():
    train, test = set(render.voice_variants("train")), set(render.voice_variants("test"))
    assert train and test and not train & test
    with pytest.raises(ValueError, match="split: expected 'train' or 'test'"):
        render.voice_variants("dev")


def test_word_intervals_cover_the_text_inside_the_audio(utterance):
    assert [w.word for w in utterance.words] == WORDS
    assert utterance.voice.variant in render.voice_variants("train")
    starts = [w.start for w in utterance.words]
    assert starts == sorted(starts)
    for word in utterance.words:
        assert 0 <= word.start < word.end <= utterance.duration + 0.02, word
        assert word.source in render.SOURCES
    assert sum(w.source == "alignment" for w in utterance.words) >= len(WORDS) // 2
    assert utterance.waveform.dtype == np.float32 and np.abs(utterance.waveform).max() <= 1.0


def test_same_seed_same_utterance(utterance):
    again = render.render_utterance(WORDS, np.random.default_rng(5), "train")
    np.testing.assert_array_equal(again.waveform, utterance.waveform)
    assert again.words == utterance.words


def test_no_words():
    with pytest.raises(ValueError, match="no words"):
        render.render_utterance([], np.random.default_rng(0), "train")
