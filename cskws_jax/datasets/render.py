"""Render a KWS utterance: speech, word intervals (aligned and cross-checked), noise.

Word intervals come from pocketsphinx forced alignment of the clean synthesised audio
to its text, cross-checked against espeak's word events: an aligned word is kept when
its onset and end are within `tolerance_s` of espeak's (or espeak's is only an estimate);
otherwise, and for words the alignment did not reach, espeak's interval is used. Each
interval records its `source`. Voices are split into training and test variants, so
test speakers are never heard in training.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from speechkit import asr, channel, tts

SOURCES = ("alignment", "espeak", "espeak-estimate")
TELEPHONE_LINES = {
    "none": None,
    "wideband": channel.wideband_telephone,
    "narrowband": channel.telephone,
}


def voice_variants(split: str) -> tuple[str, ...]:
    """Voice variants of a split: every fifth variant (sorted) is for testing only."""
    variants = tts.variants()
    if split == "test":
        return variants[::5]
    if split == "train":
        return tuple(v for i, v in enumerate(variants) if i % 5)
    raise ValueError(f"split: expected 'train' or 'test', got {split!r}")


@dataclasses.dataclass(frozen=True)
class KwsRenderConfig:
    sample_rate: int = 16_000
    snr_db: tuple[float, float] = (5.0, 30.0)
    noise_kinds: tuple[str, ...] = ("pink", "white")
    gain_db: tuple[float, float] = (-6.0, 3.0)
    rate_wpm: tuple[int, int] = (140, 210)
    # "none", "wideband" (50-7000 Hz) or "narrowband" (300-3400 Hz, mu-law, back at 16 kHz)
    telephone: str = "none"
    tolerance_s: float = 0.1  # alignment vs espeak word starts and ends

    def __post_init__(self):
        unknown = set(self.noise_kinds) - {"pink", "white"}
        if unknown or not self.noise_kinds:
            raise ValueError(f"noise_kinds: expected some of pink, white; got {self.noise_kinds}")
        if self.telephone not in TELEPHONE_LINES:
            raise ValueError(
                f"telephone: expected one of {sorted(TELEPHONE_LINES)}, got {self.telephone!r}"
            )
        for name in ("snr_db", "gain_db", "rate_wpm"):
            low, high = getattr(self, name)
            if low > high:
                raise ValueError(f"{name}: expected (low, high) with low <= high, got {low, high}")


@dataclasses.dataclass(frozen=True)
class WordInterval:
    word: str
    start: float  # seconds
    end: float  # seconds
    source: str  # one of SOURCES
    espeak_start: float  # espeak's word event (seconds), for the cross-check
    espeak_end: float


@dataclasses.dataclass(frozen=True)
class RenderedUtterance:
    waveform: np.ndarray  # float32 [samples]
    sample_rate: int
    words: tuple[WordInterval, ...]  # every word, in order
    text: str
    voice: tts.Voice
    snr_db: float
    noise: str
    stage_seconds: dict[str, float]

    @property
    def duration(self) -> float:
        return self.waveform.size / self.sample_rate


def word_intervals(speech: tts.Synthesis, words: list[str], tolerance_s: float):
    """Intervals of `words` in `speech`: alignment cross-checked with espeak events."""
    if [w.text.lower() for w in speech.words] != [w.lower() for w in words]:
        raise ValueError(f"word_intervals: espeak's words differ from the text {words[:5]}...")
    aligned = asr.align(speech.waveform, words)
    intervals = []
    for i, event in enumerate(speech.words):
        candidate = aligned[i] if i < len(aligned) and aligned[i].word == words[i] else None
        agrees = candidate is not None and (
            not event.exact
            or max(abs(candidate.start - event.start), abs(candidate.end - event.end))
            <= tolerance_s
        )
        if agrees:
            start, end, source = candidate.start, candidate.end, "alignment"
        else:
            start, end = event.start, event.end
            source = "espeak" if event.exact else "espeak-estimate"
        intervals.append(WordInterval(words[i], start, end, source, event.start, event.end))
    return tuple(intervals)


def render_utterance(
    words: list[str],
    rng: np.random.Generator,
    split: str,
    config: KwsRenderConfig = KwsRenderConfig(),
) -> RenderedUtterance:
    """Speaks `words` with a voice of `split`, finds word intervals, adds noise and gain."""
    if not words:
        raise ValueError("render_utterance: no words")
    timings = {}
    clock = time.perf_counter()
    variants = voice_variants(split)
    voice = tts.Voice(
        variant=variants[int(rng.integers(len(variants)))],
        rate=int(rng.integers(config.rate_wpm[0], config.rate_wpm[1] + 1)),
        pitch=int(rng.integers(25, 76)),
    )
    text = " ".join(words)
    speech = tts.synthesize(text, voice, config.sample_rate, seed=int(rng.integers(2**31)))
    timings["synthesis"] = time.perf_counter() - clock
    clock = time.perf_counter()
    intervals = word_intervals(speech, words, config.tolerance_s)
    timings["alignment"] = time.perf_counter() - clock
    clock = time.perf_counter()
    kind = config.noise_kinds[int(rng.integers(len(config.noise_kinds)))]
    noise = (
        channel.white_noise(rng, speech.waveform.size)
        if kind == "white"
        else channel.pink_noise(rng, speech.waveform.size)
    )
    snr_db = float(rng.uniform(*config.snr_db))
    waveform = channel.add_noise(speech.waveform, noise, snr_db)
    line = TELEPHONE_LINES[config.telephone]
    if line is not None:
        waveform = line(waveform, config.sample_rate)
    waveform = np.clip(channel.gain(waveform, float(rng.uniform(*config.gain_db))), -1.0, 1.0)
    timings["channel"] = time.perf_counter() - clock
    return RenderedUtterance(
        waveform, config.sample_rate, intervals, text, voice, snr_db, kind, timings
    )
