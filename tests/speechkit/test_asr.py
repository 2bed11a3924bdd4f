"""speechkit.asr: real pocketsphinx recognition and alignment, and char_frames."""

import dataclasses

import numpy as np
import pytest

from speechkit import asr, dsp, tts

SENTENCE = "Hello, what is the address of the emergency? I can't breathe."


@pytest.fixture(scope="module")
def speech():
    return tts.synthesize(SENTENCE, tts.EspeakVoice(variant="m3"))


@pytest.fixture(scope="module")
def recognition(speech):
    return asr.recognise(speech.waveform)


def test_recognition_is_timed_streamed_and_real(speech, recognition):
    words = recognition.words
    assert words, "no words recognised"
    assert all(0 <= w.start < w.end <= speech.duration + 0.02 for w in words)
    assert [w.start for w in words] == sorted(w.start for w in words)
    assert all(w.emitted >= w.end for w in words)
    times = [p.time for p in recognition.partials]
    assert times == sorted(times) and times[-1] == pytest.approx(speech.duration)
    # A word counts as emitted once every later partial hypothesis starts with it: the
    # partials and the final words come from the same search, so this holds for all.
    final = [w.word for w in words]
    for i, word in enumerate(words):
        later = [p for p in recognition.partials if p.time >= word.emitted]
        assert all(p.text.split()[: i + 1] == final[: i + 1] for p in later), word
    # Real recognition of synthetic speech: some words right, some wrong.
    truth = asr.normalise_words(SENTENCE)
    assert 2 <= len(set(recognition.text.split()) & set(truth)) < len(truth)


PAUSED_SENTENCES = (
    "Where is the emergency?",
    "My father fell down the stairs and he is not moving.",
    "Is he breathing?",
    "I think so, but he does not answer me.",
)


@pytest.fixture(scope="module")
def paused_call():
    """Four sentences, two voices, 0.7 s pauses, light noise: a call in miniature."""
    rng = np.random.default_rng(0)
    pause = np.zeros(int(0.7 * 16_000), np.float32)
    pieces = [pause]
    for i, text in enumerate(PAUSED_SENTENCES):
        pieces += [
            tts.synthesize(text, tts.EspeakVoice(variant=("f2", "m3")[i % 2])).waveform,
            pause,
        ]
    clean = np.concatenate(pieces)
    return dsp.add_noise(clean, dsp.pink_noise(rng, clean.size), 25.0)


def test_words_are_emitted_during_the_call_not_at_its_end(paused_call):
    config = asr.RecogniserConfig()
    recognition = asr.recognise(paused_call, config)
    words, duration = recognition.words, paused_call.size / 16_000
    assert len(words) >= 10
    # Pauses end utterances, and an utterance is closed soon after its speech ends.
    assert len(recognition.utterances) >= len(PAUSED_SENTENCES)
    for utterance in recognition.utterances:
        assert utterance.decided - utterance.end <= config.endpoint_window_s + 0.1
    # Every word is out by the time its utterance closed: the lag is bounded by the
    # utterance and the pause detection, not by the call.
    for word in words:
        (utterance,) = [u for u in recognition.utterances if u.start <= word.start < u.decided]
        assert word.end <= word.emitted <= utterance.decided, word
        assert word.emitted - word.end <= 2.0, word
    assert all(w.emitted < duration - 0.2 for w in words)  # none waits for the end
    # A causal stream holds each word's letters right after its emission.
    frames = asr.char_frames(words, int(duration / asr.TEXT_FRAME_S), causal=True)
    for word in words:
        first = int(np.ceil(word.emitted / asr.TEXT_FRAME_S))
        assert frames[first, asr.BLANK] < 1.0, word
    report = asr.emission_report([(words, frames.shape[0])])
    assert report["lag_p90_s"] <= 1.5
    assert report["emitted_after_call_end"] == 0.0
    assert report["nonblank_text_frames_causal"] > 0.3


def test_emission_report_by_hand():
    words = [
        asr.TimedWord("ab", 0.0, 0.1, emitted=0.3),  # lag 0.2
        asr.TimedWord("cd", 0.2, 0.4, emitted=1.9),  # lag 1.5
        asr.TimedWord("ef", 0.5, 0.6, emitted=3.0),  # lag 2.4, after the end (2 s)
    ]
    report = asr.emission_report([(words, 100)])
    assert report["words"] == 3
    assert report["lag_median_s"] == pytest.approx(1.5)
    assert report["within_1s"] == pytest.approx(1 / 3)
    assert report["within_2s"] == pytest.approx(2 / 3)
    assert report["emitted_after_call_end"] == pytest.approx(1 / 3)
    # offline: frames 0-4, 10-19, 25-29 hold letters; causal: 15-19 and 95-99 (the third
    # word falls after the end).
    assert report["nonblank_text_frames_offline"] == pytest.approx(20 / 100)
    assert report["nonblank_text_frames_causal"] == pytest.approx(10 / 100)
    with pytest.raises(ValueError, match="no recognised words"):
        asr.emission_report([([], 10)])


def test_recognition_does_not_depend_on_what_ran_before(speech, recognition):
    asr.recognise(tts.synthesize("Is the patient breathing?").waveform)
    assert asr.recognise(speech.waveform) == recognition


def test_alignment_agrees_with_espeak_onsets(speech):
    aligned = asr.align(speech.waveform, SENTENCE)
    truth = asr.normalise_words(SENTENCE)
    assert len(aligned) >= 4
    assert [w.word for w in aligned] == truth[: len(aligned)]
    onsets = {i: w.start for i, w in enumerate(speech.words) if w.exact}
    compared = [(aligned[i].start, onsets[i]) for i in range(len(aligned)) if i in onsets]
    assert len(compared) >= 3
    assert max(abs(a - b) for a, b in compared) < 0.06


def test_alignment_errors():
    wave = np.zeros(1600, np.float32)
    with pytest.raises(ValueError, match=r"not in the pronunciation dictionary: \['zqxv'\]"):
        asr.align(wave, "hello zqxv")
    with pytest.raises(ValueError, match="no words to align"):
        asr.align(wave, "?!")
    with pytest.raises(ValueError, match="waveform: contains NaN"):
        asr.recognise(np.array([0.0, np.nan], np.float32))
    with pytest.raises(FileNotFoundError, match="lm file /no/such.lm not found"):
        asr.recognise(wave, asr.RecogniserConfig(language_model="/no/such.lm"))


def _letters(frames):
    symbols = np.argmax(frames, axis=1)
    names = "_" + asr.ALPHABET + "?"
    return "".join(names[s] for s in symbols)


def test_char_frames_spread_letters_over_the_span():
    words = [asr.TimedWord("hi", 0.04, 0.12), asr.TimedWord("ok", 0.16, 0.20)]
    frames = asr.char_frames(words, 12)
    assert frames.shape == (12, asr.NUM_SYMBOLS) and frames.dtype == np.float32
    np.testing.assert_allclose(frames.sum(axis=1), 1.0)
    assert _letters(frames) == "__hhii__ok__"


def test_char_frames_share_frames_when_letters_outnumber_them():
    frames = asr.char_frames([asr.TimedWord("hello", 0.0, 0.04)], 3)  # 5 letters, 2 frames
    symbol = {c: asr.ALPHABET.index(c) + 1 for c in "helo"}
    np.testing.assert_allclose(frames[0, [symbol[c] for c in "hel"]], [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(frames[1, [symbol[c] for c in "lo"]], [0.5, 0.5])
    assert frames[2, asr.BLANK] == 1.0


def test_char_frames_causal_places_words_at_emission():
    word = asr.TimedWord("ok", 0.0, 0.04, emitted=0.10)
    assert _letters(asr.char_frames([word], 8)) == "ok______"
    assert _letters(asr.char_frames([word], 8, causal=True)) == "_____ok_"
    with pytest.raises(ValueError, match="needs emission times"):
        asr.char_frames([dataclasses.replace(word, emitted=None)], 8, causal=True)


def test_char_frames_causal_words_emitted_together_follow_each_other():
    words = [
        asr.TimedWord("ab", 0.00, 0.04, emitted=0.10),
        asr.TimedWord("cd", 0.04, 0.08, emitted=0.10),  # emitted with "ab"
        asr.TimedWord("e", 0.08, 0.10, emitted=0.12),  # its frame is still taken
        asr.TimedWord("f", 0.20, 0.22, emitted=0.30),
    ]
    assert _letters(asr.char_frames(words, 18)) == "abcde_____f_______"
    assert _letters(asr.char_frames(words, 18, causal=True)) == "_____abcde_____f__"
    # Order of the input does not matter; emission order does.
    assert _letters(asr.char_frames(words[::-1], 18, causal=True)) == "_____abcde_____f__"


def test_char_frames_unknown_letters_and_clipping():
    frames = asr.char_frames([asr.TimedWord("a1", 0.0, 0.04), asr.TimedWord("zz", 0.1, 0.5)], 6)
    assert frames[1, asr.UNKNOWN] == 1.0
    assert _letters(frames)[5] == "z"  # the span past the last frame is cut, not wrapped


def test_char_frames_from_recognition_line_up_with_audio_frames(speech, recognition):
    num_text_frames = int(speech.duration / asr.TEXT_FRAME_S)
    frames = asr.char_frames(recognition.words, num_text_frames)
    audio_frames = int(speech.duration / 0.01)
    assert abs(2 * frames.shape[0] - audio_frames) <= 1
    for word in recognition.words:
        inside = frames[int(word.start / 0.02) + 1 : int(word.end / 0.02) - 1]
        assert np.all(inside[:, asr.BLANK] == 0.0), word
