"""speechkit.asr: real pocketsphinx recognition and alignment, and char_frames."""

import dataclasses

import numpy as np
import pytest

from speechkit import asr, tts

SENTENCE = "Hello, what is the address of the emergency? I can't breathe."


@pytest.fixture(scope="module")
def speech():
    return tts.synthesize(SENTENCE, tts.Voice(variant="m3"))


@pytest.fixture(scope="module")
def recognition(speech):
    return asr.recognize(speech.waveform)


def test_recognition_is_timed_streamed_and_real(speech, recognition):
    words = recognition.words
    assert words, "no words recognised"
    assert all(0 <= w.start < w.end <= speech.duration + 0.02 for w in words)
    assert [w.start for w in words] == sorted(w.start for w in words)
    assert all(w.emitted >= w.end for w in words)
    times = [p.time for p in recognition.partials]
    assert times == sorted(times) and times[-1] == pytest.approx(speech.duration)
    # A word counts as emitted once every later partial hypothesis starts with it (the
    # final pass at the end of the utterance may still revise the last partials).
    final, end = [w.word for w in words], recognition.partials[-1].time
    for i, word in enumerate(words):
        if word.emitted >= end:  # settled only by the final pass
            continue
        later = [p for p in recognition.partials if p.time >= word.emitted]
        assert all(p.text.split()[: i + 1] == final[: i + 1] for p in later), word
    # Real recognition of synthetic speech: some words right, some wrong.
    truth = asr.normalise(SENTENCE)
    assert 2 <= len(set(recognition.text.split()) & set(truth)) < len(truth)


def test_recognition_does_not_depend_on_what_ran_before(speech, recognition):
    asr.recognize(tts.synthesize("Is the patient breathing?").waveform)
    assert asr.recognize(speech.waveform) == recognition


def test_alignment_agrees_with_espeak_onsets(speech):
    aligned = asr.align(speech.waveform, SENTENCE)
    truth = asr.normalise(SENTENCE)
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
        asr.recognize(np.array([0.0, np.nan], np.float32))
    with pytest.raises(FileNotFoundError, match="lm file /no/such.lm not found"):
        asr.recognize(wave, asr.RecognizerConfig(language_model="/no/such.lm"))


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
