"""speechkit.tts: real espeak-ng synthesis, word timings, determinism, voices."""

import re
import sys

import numpy as np
import pytest

from speechkit import tts

SENTENCE = "Hello, what is the address of the emergency? I can't breathe."


@pytest.fixture(scope="module")
def speech():
    return tts.synthesize(SENTENCE, tts.EspeakVoice(variant="f3"))


def test_every_word_of_the_text_gets_a_timing(speech):
    assert [w.text for w in speech.words] == re.findall(r"[\w']+", SENTENCE)
    assert [SENTENCE[w.char_start : w.char_start + len(w.text)] for w in speech.words] == [
        w.text for w in speech.words
    ]
    starts = [w.start for w in speech.words]
    assert starts == sorted(starts)
    assert all(0 <= w.start < w.end <= speech.duration + 1e-9 for w in speech.words)
    assert speech.sample_rate == 16_000 and speech.waveform.dtype == np.float32
    assert 2.0 < speech.duration < 6.0


def test_exact_words_hold_speech_and_pauses_are_quiet(speech):
    rate, wave = speech.sample_rate, speech.waveform
    loud = np.sqrt(np.mean(wave**2))
    for word in speech.words:
        if word.exact:
            span = wave[int(word.start * rate) : int(word.end * rate)]
            assert np.sqrt(np.mean(span**2)) > 0.3 * loud, word
    # The pause after "emergency?" is silent-ish.
    emergency, i = speech.words[7], speech.words[8]
    gap = wave[int(emergency.end * rate) + 160 : int(i.start * rate) - 160]
    assert gap.size > 0 and np.sqrt(np.mean(gap**2)) < 0.1 * loud


def test_folded_function_words_are_marked_inexact(speech):
    assert not all(w.exact for w in speech.words)
    assert sum(w.exact for w in speech.words) >= len(speech.words) // 2


def test_deterministic_whatever_ran_before(speech):
    tts.synthesize(
        "Something different, to move the synthesiser's state.", tts.EspeakVoice(rate=250)
    )
    again = tts.synthesize(SENTENCE, tts.EspeakVoice(variant="f3"))
    np.testing.assert_array_equal(again.waveform, speech.waveform)
    assert again.words == speech.words
    other_seed = tts.synthesize(SENTENCE, tts.EspeakVoice(variant="f3"), seed=5)
    assert not np.array_equal(other_seed.waveform[: speech.waveform.size], speech.waveform)


def test_voice_settings_change_the_audio():
    base = tts.synthesize("Is the patient breathing?", tts.EspeakVoice())
    fast = tts.synthesize("Is the patient breathing?", tts.EspeakVoice(rate=300))
    male = tts.synthesize("Is the patient breathing?", tts.EspeakVoice(variant="m3", pitch=20))
    assert fast.duration < 0.8 * base.duration
    assert male.waveform.size != base.waveform.size or not np.array_equal(
        male.waveform, base.waveform
    )
    assert "f3" in tts.variants() and len(tts.variants()) > 20


def test_native_rate_output():
    native = tts.synthesize("Yes.", sample_rate=tts.ESPEAK_RATE)
    assert native.sample_rate == 22_050


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda: tts.synthesize("   "), "text: expected a non-empty string"),
        (lambda: tts.EspeakVoice(variant="nobody"), "unknown variant 'nobody'"),
        (
            lambda: tts.EspeakVoice(rate=20),
            r"EspeakVoice.rate: expected an int in \[80, 450\], got 20",
        ),
        (lambda: tts.synthesize("Hi.", tts.EspeakVoice(language="xx-nope")), "no voice 'xx-nope'"),
    ],
)
def test_bad_input(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


def test_docstring_example():
    import doctest

    assert doctest.testmod(tts).failed == 0


@pytest.fixture(scope="module")
def neural():
    return tts.synthesize(SENTENCE, tts.PiperVoice())


def test_piper_words_are_timed_inside_the_audio(neural):
    assert [w.text for w in neural.words] == re.findall(r"[\w']+", SENTENCE)
    starts = [w.start for w in neural.words]
    assert starts == sorted(starts)
    assert all(0 <= w.start < w.end <= neural.duration + 1e-9 for w in neural.words)
    rate, wave = neural.sample_rate, neural.waveform
    loud = np.sqrt(np.mean(wave**2))
    exact = [w for w in neural.words if w.exact]
    # "I can't breathe." is timed by the model's own phoneme durations; in the first
    # sentence the phonemiser joins "of the", so its words are estimates.
    assert [w.text for w in exact] == ["I", "can't", "breathe"]
    for word in exact:
        span = wave[int(word.start * rate) : int(word.end * rate)]
        assert np.sqrt(np.mean(span**2)) > 0.2 * loud, word


def test_piper_is_deterministic_whatever_ran_before(neural):
    tts.synthesize("Something else first.", tts.PiperVoice(length_scale=1.3))
    again = tts.synthesize(SENTENCE, tts.PiperVoice())
    np.testing.assert_array_equal(again.waveform, neural.waveform)


def test_warp_scales_duration_and_timings(neural):
    faster = tts.synthesize(SENTENCE, tts.PiperVoice(warp=1.25))
    assert faster.duration == pytest.approx(neural.duration / 1.25, abs=0.01)
    for slow, fast in zip(neural.words, faster.words, strict=True):
        assert fast.start == pytest.approx(slow.start / 1.25, abs=1e-3)
    assert tts.EspeakVoice(warp=1.1).speaker == "espeak:en-us@1.10"
    assert tts.PiperVoice().speaker == "piper:joe"


def test_draw_speaker_per_engine():
    rng = np.random.default_rng(0)
    config = tts.SpeakerConfig(tempo=(0.8, 1.25), warp=(0.9, 1.1))
    piper = [tts.draw_speaker(rng, "piper", ("joe",), config) for _ in range(20)]
    assert all(0.8 - 1e-9 <= v.length_scale <= 1.25 + 1e-9 for v in piper)
    assert len({v.warp for v in piper}) > 10 and all(0.9 <= v.warp <= 1.1 for v in piper)
    # Without a warp range espeak draws exactly what draw_voice draws.
    plain = tts.SpeakerConfig(rate_wpm=(150, 160), pitch=(40, 50))
    first = tts.draw_speaker(np.random.default_rng(3), "espeak", ("f1", "m2"), plain)
    second = tts.draw_voice(np.random.default_rng(3), ("f1", "m2"), (150, 160), (40, 50))
    assert first == second
    assert {"espeak", "piper"} <= set(tts.available_engines())
    with pytest.raises(ValueError, match="engine: expected one of"):
        tts.draw_speaker(rng, "flite", ("x",), config)
    with pytest.raises(ValueError, match=r"SpeakerConfig.warp\[1\]"):
        tts.SpeakerConfig(warp=(1.0, 2.0))
    with pytest.raises(ValueError, match="PiperVoice.model"):
        tts.PiperVoice(model="amy")


def test_an_engine_missing_from_the_install_names_the_synth_extra(monkeypatch):
    from speechkit.tts import espeak, voices

    monkeypatch.setitem(sys.modules, "espeakng_loader", None)  # not installed
    espeak.variants.cache_clear()
    try:
        assert espeak.variants() == ()
        with pytest.raises(RuntimeError, match=r"synth extra \(pip install 'speech-tracking-jax"):
            voices.require_engine("espeak")
    finally:
        espeak.variants.cache_clear()
