"""`synthesize`: text with a voice of any engine -> `Synthesis` (waveform and word
timings at the rate asked for), with the voice's speed perturbation (`warp`) and then
its speaker stage (`shift`, `speakers.apply_shift`)."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
from scipy import signal as scipy_signal

from speechkit import dsp
from speechkit.tts import espeak, festival, server, speakers, timing, voices

DEFAULT_VOICE = voices.EspeakVoice()  # espeak-ng's en-us voice


@dataclasses.dataclass(frozen=True)
class Synthesis:
    """An utterance: its waveform and where each word of the text is in it."""

    waveform: np.ndarray  # float32 [samples] in [-1, 1]
    sample_rate: int  # Hz
    words: tuple[timing.WordTiming, ...]

    @property
    def duration(self) -> float:
        return self.waveform.shape[0] / self.sample_rate


def _espeak(text: str, voice: voices.EspeakVoice, seed: int):
    """espeak-ng's waveform (float32, at ESPEAK_RATE), rate and word timings."""
    audio, events = server.server().synthesize("espeak", text, voice, int(seed))
    waveform, rate = audio.astype(np.float32) / 32768.0, espeak.ESPEAK_RATE
    return waveform, rate, timing.espeak_words(text, waveform, events, rate)


def _piper(text: str, voice: voices.PiperVoice):
    """Piper's waveform, rate and word timings; sentences are synthesised one by one."""
    sentences = timing.sentences(text)
    rate, pieces = server.server().synthesize(
        f"piper:{voice.model}", [s for _, s in sentences], voice
    )
    waveform = np.concatenate([samples for samples, _ in pieces])
    return waveform, rate, timing.piper_words(sentences, pieces, rate)


def _festival(text: str, voice: voices.FestivalVoice):
    """Festival's waveform, rate and word timings (its own; estimates if its words are
    not the text's words, e.g. a number it expanded)."""
    waveform, rate, spoken = festival.synthesize(text, voice.voice, voice.duration_stretch)
    words = timing.festival_words(text, waveform, rate, spoken)
    return np.asarray(waveform, np.float32), rate, words


def warp(waveform: np.ndarray, words, factor: float):
    """Speed perturbation: the waveform resampled by `factor` (> 1: faster and higher),
    played at the same rate, and the word timings scaled to match."""
    if factor == 1.0:
        return waveform, tuple(words)
    ratio = Fraction(factor).limit_denominator(1000)
    warped = scipy_signal.resample_poly(waveform, ratio.denominator, ratio.numerator)
    scale = ratio.denominator / ratio.numerator
    words = tuple(dataclasses.replace(w, start=w.start * scale, end=w.end * scale) for w in words)
    return warped.astype(np.float32), words


def synthesize(
    text: str,
    voice: voices.AnyVoice = DEFAULT_VOICE,
    sample_rate: int = 16_000,
    seed: int = 0,
) -> Synthesis:
    """Speaks `text` with `voice` (of any engine); the waveform at `sample_rate` with
    word timings.

    seed: espeak-ng's random generators (small pitch and timing variation) and those of
    the speaker stage's resynthesis; the same text, voice and seed always give the same
    samples.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text: expected a non-empty string, got {text!r}")
    if voice.engine == "espeak":
        waveform, rate, words = _espeak(text, voice, seed)
    elif voice.engine == "piper":
        waveform, rate, words = _piper(text, voice)
    else:
        waveform, rate, words = _festival(text, voice)
    if waveform.size == 0:
        raise RuntimeError(f"{voice.engine} produced no audio for {text[:40]!r}")
    waveform, words = warp(waveform, words, voice.warp)
    if voice.shift is not None:
        waveform, words = speakers.apply_shift(waveform, rate, words, voice.shift, seed)
    if sample_rate != rate:
        waveform = dsp.resample(waveform, rate, sample_rate)
    return Synthesis(np.clip(waveform, -1.0, 1.0).astype(np.float32), sample_rate, words)
