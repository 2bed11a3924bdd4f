"""Render a KWS utterance: speech, word intervals (aligned and cross-checked), noise.

Word intervals come from pocketsphinx forced alignment of the clean synthesised audio
to its text, cross-checked against espeak's word events: an aligned word is kept when
its onset and end are within `tolerance_s` of espeak's (or espeak's is only an estimate);
otherwise, and for words the alignment did not reach, espeak's interval is used. Each
interval records its `source`. Voices are split into training and test variants, so
test speakers are never heard in training. Noise, gain and the optional telephone line
are `speechkit.channel.degrade`'s, as `KwsRenderConfig.channel` says.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from speechkit import asr, channel, checks, tts

SOURCES = ("alignment", "espeak", "espeak-estimate")
# No telephone line by default; "wideband" (50-7000 Hz) or "narrowband" (300-3400 Hz,
# mu-law) lines give the audio back at 16 kHz.
KWS_CHANNEL = channel.ChannelConfig(
    snr_db=(5.0, 30.0), noise_kinds=("pink", "white"), telephone="none", gain_db=(-6.0, 3.0)
)


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
    """How an utterance's words become audio; every field is an experiment setting."""

    sample_rate: int = 16_000
    channel: channel.ChannelConfig = KWS_CHANNEL  # noise, SNR, gain, telephone line
    rate_wpm: tuple[int, int] = (140, 210)  # speaking rate, drawn per utterance
    pitch: tuple[int, int] = (25, 75)  # espeak pitch 0..99, drawn per utterance
    tolerance_s: float = 0.1  # alignment vs espeak word starts and ends

    def __post_init__(self):
        if "babble" in self.channel.noise_kinds:
            raise ValueError(
                "channel.noise_kinds: expected some of pink, white (KWS rendering has no "
                f"babble voices); got {self.channel.noise_kinds}"
            )
        for name in ("rate_wpm", "pitch"):
            checks.require_interval(f"KwsRenderConfig.{name}", getattr(self, name))


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
    voice = tts.draw_voice(rng, voice_variants(split), config.rate_wpm, config.pitch)
    text = " ".join(words)
    speech = tts.synthesize(text, voice, config.sample_rate, seed=int(rng.integers(2**31)))
    timings["synthesis"] = time.perf_counter() - clock
    clock = time.perf_counter()
    intervals = word_intervals(speech, words, config.tolerance_s)
    timings["alignment"] = time.perf_counter() - clock
    clock = time.perf_counter()
    # The noise is drawn before the SNR: the order the corpora were first built with.
    degraded = channel.degrade(
        speech.waveform, rng, config.channel, config.sample_rate, noise_before_snr=True
    )
    timings["channel"] = time.perf_counter() - clock
    return RenderedUtterance(
        degraded.waveform,
        config.sample_rate,
        intervals,
        text,
        voice,
        degraded.snr_db,
        degraded.noise,
        timings,
    )
