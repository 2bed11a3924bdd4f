"""cskws_jax.datasets.render: voices split, word intervals cross-checked, seeded."""

import numpy as np
import pytest

from cskws_jax.datasets import features, render
from speechkit import channel, tts

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


def test_split_engines_and_voices():
    config = render.KwsRenderConfig()
    assert render.split_engines(config.engines, "piper", "train") == ("espeak",)
    assert render.split_engines(config.engines, "piper", "heldout") == ("piper",)
    assert render.split_voices("piper", "test") == ("joe",)
    with pytest.raises(ValueError, match="no heldout_engine"):
        render.split_engines(config.engines, None, "heldout")


def test_word_intervals_cover_the_text_inside_the_audio(utterance):
    assert [w.word for w in utterance.words] == WORDS
    assert utterance.voice.variant in render.voice_variants("train")
    config = render.KwsRenderConfig()
    assert config.rate_wpm[0] <= utterance.voice.rate <= config.rate_wpm[1]
    assert config.pitch[0] <= utterance.voice.pitch <= config.pitch[1]
    assert config.warp[0] <= utterance.voice.warp <= config.warp[1]
    assert utterance.noise in config.channel.noise_kinds
    assert config.channel.snr_db[0] <= utterance.snr_db <= config.channel.snr_db[1]
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


def test_draw_voice_takes_inclusive_ranges():
    rng = np.random.default_rng(0)
    voices = [tts.draw_voice(rng, ("f1", "m2"), (150, 151), (40, 40)) for _ in range(50)]
    assert {v.variant for v in voices} == {"f1", "m2"}
    assert {v.rate for v in voices} == {150, 151} and {v.pitch for v in voices} == {40}


def test_the_task_owns_its_features():
    preset = features.FEATURES
    assert (preset.num_mels, preset.window_ms, preset.hop_ms, preset.fft) == (64, 25.0, 10.0, 512)
    assert preset.hop_s == 0.01
    assert features.kws_features()["audio"].shape == (None, preset.num_mels)


def test_bad_config():
    with pytest.raises(ValueError, match="channel.noise_kinds: expected some of pink, white"):
        render.KwsRenderConfig(channel=channel.ChannelConfig(noise_kinds=("pink", "babble")))
    with pytest.raises(ValueError, match="rate_wpm: expected"):
        render.KwsRenderConfig(rate_wpm=(210, 140))


def test_no_words():
    with pytest.raises(ValueError, match="no words"):
        render.render_utterance([], np.random.default_rng(0), "train")
