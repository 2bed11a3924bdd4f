"""Render a KWS utterance: speech, word intervals (aligned and cross-checked), channel.

Speech comes from one of several synthesisers (`speechkit.tts`: espeak-ng, Piper,
optionally Festival), a speaker drawn per utterance with a speed perturbation (warp).
`KwsRenderConfig.heldout_engine` speaks only the `heldout` split; within an engine,
`split_voices` keeps test speakers out of training. Word intervals come from
pocketsphinx forced alignment of the clean audio, cross-checked against the engine's
own word timings within `tolerance_s`; each interval records its `source`. The channel
is `speechkit.channel.degrade`'s, as `KwsRenderConfig.channel` says. Specification
(which interval is kept, "estimate" sources, voice splits):
docs/corpora.md#keyword-spotting-corpora-cs-kws.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from speechkit import asr, channel, checks, tts

SOURCES = ("alignment", "engine", "estimate")
SPLITS = ("train", "test", "heldout")
# No telephone line by default; "wideband" (50-7000 Hz) or "narrowband" (300-3400 Hz,
# mu-law) lines give the audio back at 16 kHz.
# Half the utterances in a simulated room, half through a drawn microphone response.
KWS_CHANNEL = channel.ChannelConfig(
    snr_db=(5.0, 30.0),
    noise_kinds=("pink", "white"),
    telephone="none",
    gain_db=(-6.0, 3.0),
    reverb_probability=0.5,
    colour_probability=0.5,
)


def voice_variants(split: str) -> tuple[str, ...]:
    """espeak voice variants of a split: every fifth variant (sorted) is for testing only."""
    variants = tts.variants()
    if split == "test":
        return variants[::5]
    if split == "train":
        return tuple(v for i, v in enumerate(variants) if i % 5)
    raise ValueError(f"split: expected 'train' or 'test', got {split!r}")


# The keyword corpus's engine sets: the shared ones (`speechkit.tts.ENGINE_SETS`) and
# those that hold out espeak-ng or Festival instead of Piper. Name -> (engines, held-out).
KWS_ENGINE_SETS = {
    **tts.ENGINE_SETS,
    "no-espeak": (("espeak", "festival", "piper"), "espeak"),
    "no-festival": (("espeak", "festival", "piper"), "festival"),
    "pip-no-espeak": (("espeak", "piper"), "espeak"),
}
# Leave-one-engine-out: per set of engines, the engine set that holds each one out.
LEAVE_ONE_OUT = {
    "pip": {"espeak": "pip-no-espeak", "piper": "pip"},
    "festival": {"espeak": "no-espeak", "festival": "no-festival", "piper": "festival"},
}


def kws_config_name(size: str, engine_set: str, variation: str = "plain") -> str:
    """The synthetic_kws config of a size, engine set of `KWS_ENGINE_SETS` and variation
    (`speechkit.tts.VARIATIONS`): the size, then -<set> unless "pip", then -<variation>
    unless "plain"."""
    checks.require_choice("engine_set", engine_set, tuple(KWS_ENGINE_SETS))
    name = size if engine_set == "pip" else f"{size}-{engine_set}"
    return tts.variation_name(name, variation)


# Festival's three Debian voices: two for training, one for testing.
FESTIVAL_TEST_VOICES = ("ked_diphone",)


def split_voices(engine: str, split: str) -> tuple[str, ...]:
    """The voices of `engine` that speak `split` ("heldout": all of them)."""
    checks.require_choice("split", split, SPLITS)
    if engine == "espeak":
        return tts.variants() if split == "heldout" else voice_variants(split)
    voices = tts.engine_voices(engine)
    if engine == "festival" and split != "heldout":
        chosen = tuple(v for v in voices if (v in FESTIVAL_TEST_VOICES) == (split == "test"))
        return chosen or voices
    return voices


def split_engines(engines: tuple[str, ...], heldout: str | None, split: str) -> tuple[str, ...]:
    """The engines that speak `split`: the held-out one alone for "heldout", the others
    for "train" and "test"."""
    checks.require_choice("split", split, SPLITS)
    if split == "heldout":
        if heldout is None:
            raise ValueError("split 'heldout': no heldout_engine is set")
        return (heldout,)
    return tuple(e for e in engines if e != heldout)


@dataclasses.dataclass(frozen=True)
class KwsRenderConfig:
    """How an utterance's words become audio; every field is an experiment setting."""

    sample_rate: int = 16_000
    channel: channel.ChannelConfig = KWS_CHANNEL  # noise, SNR, gain, telephone line
    rate_wpm: tuple[int, int] = (140, 210)  # espeak speaking rate, drawn per utterance
    pitch: tuple[int, int] = (25, 75)  # espeak pitch 0..99, drawn per utterance
    tempo: tuple[float, float] = (0.85, 1.15)  # piper / festival speaking-rate factor
    warp: tuple[float, float] = (0.9, 1.1)  # speed perturbation of every speaker
    tolerance_s: float = 0.1  # alignment vs the engine's word starts and ends
    engines: tuple[str, ...] = ("espeak", "piper")  # speechkit.tts.ENGINES, one per utterance
    heldout_engine: str | None = "piper"  # speaks only the heldout split (None: no such split)
    # per utterance: formants, pitch, tempo (and Piper's noises) drawn; None: no stage
    speaker_stage: tts.SpeakerStage | None = None

    def __post_init__(self):
        checks.require_subset("KwsRenderConfig.engines", self.engines, tts.ENGINES)
        if self.heldout_engine is not None:
            checks.require_choice(
                "KwsRenderConfig.heldout_engine", self.heldout_engine, self.engines
            )
        if not split_engines(self.engines, self.heldout_engine, "train"):
            raise ValueError(
                f"KwsRenderConfig.engines: {self.engines} leaves no engine for training "
                f"once {self.heldout_engine!r} is held out"
            )
        self.speakers  # noqa: B018 - checks the speaker ranges
        if "babble" in self.channel.noise_kinds:
            raise ValueError(
                "channel.noise_kinds: expected some of pink, white (KWS rendering has no "
                f"babble voices); got {self.channel.noise_kinds}"
            )

    @property
    def speakers(self) -> tts.SpeakerConfig:
        return tts.SpeakerConfig(
            self.rate_wpm, self.pitch, self.tempo, self.warp, self.speaker_stage
        )


@dataclasses.dataclass(frozen=True)
class WordInterval:
    word: str
    start: float  # seconds
    end: float  # seconds
    source: str  # one of SOURCES
    engine_start: float  # the engine's own timing (seconds), for the cross-check
    engine_end: float


@dataclasses.dataclass(frozen=True)
class RenderedUtterance:
    waveform: np.ndarray  # float32 [samples]
    sample_rate: int
    words: tuple[WordInterval, ...]  # every word, in order
    text: str
    voice: tts.AnyVoice
    snr_db: float
    noise: str
    room: str  # speechkit.channel.Degraded.room
    stage_seconds: dict[str, float]

    @property
    def duration(self) -> float:
        return self.waveform.size / self.sample_rate


def _require_engine_words(speech: tts.Synthesis, words: list[str], caller: str) -> None:
    if [w.text.lower() for w in speech.words] != [w.lower() for w in words]:
        raise ValueError(f"{caller}: the engine's words differ from the text {words[:5]}...")


def word_intervals(speech: tts.Synthesis, words: list[str], tolerance_s: float):
    """Intervals of `words` in `speech`: alignment cross-checked with the engine's."""
    _require_engine_words(speech, words, "word_intervals")
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
            source = "engine" if event.exact else "estimate"
        intervals.append(WordInterval(words[i], start, end, source, event.start, event.end))
    return tuple(intervals)


def engine_intervals(speech: tts.Synthesis, words: list[str]) -> tuple[WordInterval, ...]:
    """Intervals of `words` in `speech` from the engine's own timings alone."""
    _require_engine_words(speech, words, "engine_intervals")
    return tuple(
        WordInterval(word, e.start, e.end, "engine" if e.exact else "estimate", e.start, e.end)
        for word, e in zip(words, speech.words, strict=True)
    )


def render_utterance(
    words: list[str],
    rng: np.random.Generator,
    split: str,
    config: KwsRenderConfig = KwsRenderConfig(),
    *,
    align: bool = True,
) -> RenderedUtterance:
    """Speaks `words` with a speaker of `split` (an engine of the split, drawn when there
    are several, then a voice), finds word intervals, puts it through the channel.
    `align=False` skips forced alignment: the intervals are the engine's own timings
    (source "engine" or "estimate"), for speech whose words label nothing."""
    if not words:
        raise ValueError("render_utterance: no words")
    timings = {}
    clock = time.perf_counter()
    engines = split_engines(config.engines, config.heldout_engine, split)
    engine = engines[int(rng.integers(len(engines)))] if len(engines) > 1 else engines[0]
    voice = tts.draw_speaker(rng, engine, split_voices(engine, split), config.speakers)
    text = " ".join(words)
    speech = tts.synthesize(text, voice, config.sample_rate, seed=int(rng.integers(2**31)))
    timings["synthesis"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if align:
        intervals = word_intervals(speech, words, config.tolerance_s)
    else:
        intervals = engine_intervals(speech, words)
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
        degraded.room,
        timings,
    )
