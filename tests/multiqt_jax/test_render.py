"""multiqt_jax.datasets.render: a short call, end to end (real synthesis and ASR)."""

import dataclasses

import numpy as np
import pytest

from multiqt_jax import labels
from multiqt_jax.datasets import dialogue, features, render
from speechkit import channel, tts

TURNS = (
    dialogue.Turn("dispatcher", "Is the patient breathing?", question="breathing"),
    dialogue.Turn("caller", "She is having a seizure.", symptom="seizure"),
)


@pytest.fixture(scope="module")
def call():
    return render.render_call(TURNS, np.random.default_rng(0))


def test_shapes_labels_and_alignment(call):
    frames = call.features.shape[0]
    assert call.features.shape == (frames, features.FEATURES.num_mels)
    assert call.features.dtype == np.float32
    assert frames == int(call.duration / render.LABEL_HOP_S)
    for task in labels.TASKS:
        assert call.labels[task].shape == (frames,)
    questions, symptoms = call.labels["questions"], call.labels["symptoms"]
    breathing = labels.QUESTION_CLASSES.index("breathing")
    seizure = labels.SYMPTOM_CLASSES.index("seizure")
    assert set(np.unique(questions)) == {0, breathing}
    assert set(np.unique(symptoms)) == {0, seizure}
    # The question comes first and the symptom second; both inside the audio, no overlap.
    q_frames, s_frames = np.flatnonzero(questions), np.flatnonzero(symptoms)
    assert q_frames[0] > 0 and q_frames[-1] < s_frames[0] and s_frames[-1] < frames - 1
    # Labelled spans are loud (speech), the lead-in is quiet.
    energy = call.features.mean(axis=1)
    assert energy[q_frames].mean() > energy[:20].mean() + 1.0


def test_piper_call_labels_its_turns():
    piper = render.render_call(TURNS, np.random.default_rng(0), engine="piper")
    assert piper.engine == "piper" and all(s.startswith("piper:joe") for s in piper.speakers)
    questions = np.flatnonzero(piper.labels["questions"])
    symptoms = np.flatnonzero(piper.labels["symptoms"])
    assert questions.size and symptoms.size and questions[-1] < symptoms[0]
    energy = piper.features.mean(axis=1)
    assert energy[questions].mean() > energy[:20].mean() + 1.0


def test_recognition_and_report(call):
    assert call.engine == "espeak" and len(call.speakers) == 2
    assert call.asr_words and all(w.end <= call.duration + 0.02 for w in call.asr_words)
    assert call.noise in ("pink", "white", "babble") and 15 <= call.snr_db <= 30
    assert set(call.stage_seconds) == {"synthesis", "channel", "recognition", "features"}


def test_same_seed_same_call(call):
    again = render.render_call(TURNS, np.random.default_rng(0))
    np.testing.assert_array_equal(again.features, call.features)
    assert again.asr_words == call.asr_words


def test_the_task_owns_its_features():
    preset = features.FEATURES
    assert (preset.num_mels, preset.window_ms, preset.hop_ms) == (40, 20.0, 10.0)
    assert preset.hop_s == render.LABEL_HOP_S == 0.01
    assert render.RenderConfig().features == preset
    assert features.call_features()["audio"].shape == (None, preset.num_mels)


def test_default_channel():
    config = render.RenderConfig().channel
    assert config.telephone == "wideband" and "babble" in config.noise_kinds
    assert config.gain_db is None  # calls get no gain draw


def test_bad_config():
    with pytest.raises(ValueError, match="noise_kinds"):
        render.RenderConfig(channel=channel.ChannelConfig(noise_kinds=("thunder",)))
    with pytest.raises(ValueError, match=r"pause_s: expected \(low, high\)"):
        render.RenderConfig(pause_s=(0.8, 0.2))
    with pytest.raises(ValueError, match="pitch: expected"):
        render.RenderConfig(pitch=(70, 30))
    with pytest.raises(ValueError, match="leaves no engine for training"):
        render.RenderConfig(engines=("piper",), heldout_engine="piper")
    with pytest.raises(ValueError, match="engine: expected one of"):
        render.render_call(TURNS, np.random.default_rng(0), engine="flite")
    with pytest.raises(ValueError, match="no turns"):
        render.render_call((), np.random.default_rng(0))


def test_spoken_words_are_the_turns_words_inside_their_labels(call):
    said = [w.word for w in call.spoken_words]
    assert said == ["is", "the", "patient", "breathing", "she", "is", "having", "a", "seizure"]
    starts = np.array([w.start for w in call.spoken_words])
    ends = np.array([w.end for w in call.spoken_words])
    assert np.all(ends > starts) and np.all(starts[1:] >= ends[:-1] - 1e-6)
    assert all(w.emitted == w.end for w in call.spoken_words)
    # The question's words lie inside its labelled span (10 ms frames), the symptom's too.
    for first, last, task in ((0, 4, "questions"), (4, 9, "symptoms")):
        frames = np.flatnonzero(call.labels[task]) * render.LABEL_HOP_S
        assert frames[0] - 0.011 <= starts[first] and ends[last - 1] <= frames[-1] + 0.011


def test_spoken_words_split_and_normalise_timings():
    timings = [
        tts.WordTiming("Twenty-one,", 0.0, 0.4, 0, True),
        tts.WordTiming("Okay.", 0.5, 0.7, 12, True),
        tts.WordTiming("--", 0.7, 0.8, 18, True),
    ]
    words = render.spoken_words(timings, offset_s=1.0)
    assert [w.word for w in words] == ["twenty", "one", "okay"]
    np.testing.assert_allclose(
        [(w.start, w.end, w.emitted) for w in words],
        [(1.0, 1.2, 1.2), (1.2, 1.4, 1.4), (1.5, 1.7, 1.7)],
    )


def test_a_recogniser_variant_hears_the_same_audio_again(call):
    """Rendering again from the same generator state gives the same audio: the
    unchanged recogniser finds exactly the corpus's words, a narrow-band line others."""
    same = render.recognise_variant(
        TURNS, np.random.default_rng(0), render.RenderConfig(), "espeak", render.RecogniserVariant()
    )
    assert same.words == call.asr_words
    assert set(same.stage_seconds) == {"synthesis", "channel", "recognition"}
    narrow = render.recognise_variant(
        TURNS,
        np.random.default_rng(0),
        render.RenderConfig(),
        "espeak",
        render.RECOGNISER_VARIANTS["narrowband"],
    )
    assert narrow.words and all(w.emitted >= w.end for w in narrow.words)


def test_recogniser_variants_change_only_their_fields():
    corpus = render.RenderConfig().recogniser
    general = render.RECOGNISER_VARIANTS["general_lm"].recogniser(
        dataclasses.replace(corpus, language_model="calls.arpa")
    )
    assert general.language_model is None and general.beam == corpus.beam
    small = render.RECOGNISER_VARIANTS["small_beam"].recogniser(corpus)
    assert (small.beam, small.word_beam, small.phone_beam) == (1e-20, 1e-12, 1e-20)
    assert small.language_weight == corpus.language_weight
    with pytest.raises(ValueError, match="RecogniserVariant.line"):
        render.RecogniserVariant(line="radio")
    with pytest.raises(ValueError, match="RecogniserVariant.language_model"):
        render.RecogniserVariant(language_model="none")
