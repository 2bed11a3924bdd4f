"""The voices of every engine, drawing speakers, and which engines are installed here.

A voice is a frozen dataclass of one engine (`EspeakVoice`, `PiperVoice`,
`FestivalVoice`); its `speaker` is the name the corpora record ("engine:voice@warp").
Every voice has a `warp`, a speed perturbation (see the package's docstring), so one
engine voice gives many speakers. `draw_speaker` draws a speaker of an engine from a
`SpeakerConfig`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from speechkit import checks
from speechkit.tts import espeak, festival, piper
from speechkit.tts.speakers import SpeakerShift, SpeakerStage, draw_shift, speaker_suffix

ENGINES = ("espeak", "piper", "festival")
# The engine sets the embedded corpora come in: name -> (engines, the held-out engine
# that speaks only their heldout split, None for none). "pip": the pip-installable
# engines alone (the default); "festival": Debian's Festival voices join espeak-ng for
# training; "all": all three train (`make voices` installs Festival).
ENGINE_SETS = {
    "pip": (("espeak", "piper"), "piper"),
    "festival": (("espeak", "festival", "piper"), "piper"),
    # every engine trains: the shipped models' and the recogniser's set (no heldout split)
    "all": (("espeak", "festival", "piper"), None),
}
WARP_RANGE = (0.7, 1.4)  # speed perturbation factors a voice accepts


class _Speaker:
    """What every engine's voice has: `engine`, `name`, `warp`, `shift` -> `speaker`."""

    engine: str
    name: str
    warp: float
    shift: SpeakerShift | None

    @property
    def speaker(self) -> str:
        """The speaker as the corpora record it: "engine:voice", "@warp" unless 1, then
        the speaker stage's shift where there is one (`speakers.speaker_suffix`)."""
        warp = "" if self.warp == 1.0 else f"@{self.warp:.2f}"
        return f"{self.engine}:{self.name}{warp}{speaker_suffix(self.shift)}"


@dataclasses.dataclass(frozen=True)
class EspeakVoice(_Speaker):
    """An espeak-ng voice: language, optional variant (`espeak.variants`), prosody."""

    language: str = "en-us"
    variant: str | None = None  # e.g. "f3", "m2", "Andy"; None = the language's default
    rate: int = 170  # words per minute, 80..450
    pitch: int = 50  # 0..99
    pitch_range: int = 50  # 0..99, 0 = monotone
    word_gap: int = 0  # extra pause between words, in 10 ms units
    warp: float = 1.0  # speed perturbation factor (see the package's docstring)
    shift: SpeakerShift | None = None  # the speaker stage (speechkit.tts.speakers)

    engine = "espeak"

    def __post_init__(self):
        _check_warp("EspeakVoice", self.warp)
        for name, low, high in (("rate", 80, 450), ("pitch", 0, 99), ("pitch_range", 0, 99)):
            checks.require_int(
                f"EspeakVoice.{name}", getattr(self, name), at_least=low, at_most=high
            )
        checks.require_int("EspeakVoice.word_gap", self.word_gap, at_least=0)
        # Not checks.require_choice: its error would list all ~110 shipped variants.
        if self.variant is not None and self.variant not in espeak.variants():
            raise ValueError(
                f"EspeakVoice.variant: unknown variant {self.variant!r}; "
                "see speechkit.tts.variants()"
            )

    @property
    def name(self) -> str:
        """espeak-ng's name of the voice ("en-us+f3")."""
        return self.language if self.variant is None else f"{self.language}+{self.variant}"


def _check_warp(owner: str, warp: float) -> None:
    checks.require_number(f"{owner}.warp", warp, at_least=WARP_RANGE[0], at_most=WARP_RANGE[1])


@dataclasses.dataclass(frozen=True)
class PiperVoice(_Speaker):
    """A Piper voice: the model (`piper.PIPER_MODELS`), its tempo and a warp."""

    model: str = "joe"
    length_scale: float = 1.0  # phoneme durations x this (> 1: slower)
    warp: float = 1.0
    shift: SpeakerShift | None = None
    noise_scale: float | None = None  # generator noise; None: the model's own (0.667)
    noise_w: float | None = None  # phoneme-width noise; None: the model's own (0.8)

    engine = "piper"

    def __post_init__(self):
        checks.require_choice("PiperVoice.model", self.model, piper.PIPER_MODELS)
        checks.require_number("PiperVoice.length_scale", self.length_scale, above=0.3, at_most=3.0)
        _check_warp("PiperVoice", self.warp)
        for name in ("noise_scale", "noise_w"):
            if getattr(self, name) is not None:
                checks.require_number(
                    f"PiperVoice.{name}", getattr(self, name), at_least=0.0, at_most=2.0
                )

    @property
    def name(self) -> str:
        """The model, then its noise settings where they are not the model's own."""
        if self.noise_scale is None and self.noise_w is None:
            return self.model
        noise = "" if self.noise_scale is None else f"n{self.noise_scale:.3f}"
        width = "" if self.noise_w is None else f"w{self.noise_w:.3f}"
        return f"{self.model}~{noise}{width}"


@dataclasses.dataclass(frozen=True)
class FestivalVoice(_Speaker):
    """A Festival voice (`festival.VOICES`), its tempo and a warp."""

    voice: str = "kal_diphone"
    duration_stretch: float = 1.0  # > 1: slower
    warp: float = 1.0
    shift: SpeakerShift | None = None

    engine = "festival"

    def __post_init__(self):
        checks.require_choice("FestivalVoice.voice", self.voice, festival.VOICES)
        checks.require_number(
            "FestivalVoice.duration_stretch", self.duration_stretch, above=0.3, at_most=3.0
        )
        _check_warp("FestivalVoice", self.warp)

    @property
    def name(self) -> str:
        return self.voice


AnyVoice = EspeakVoice | PiperVoice | FestivalVoice


def draw_voice(
    rng: np.random.Generator,
    variants: Sequence[str],
    rate_wpm: tuple[int, int],
    pitch: tuple[int, int],
) -> EspeakVoice:
    """An espeak voice drawn from `rng`: one of `variants`, then a rate (words per minute)
    and a pitch, each uniform over its inclusive (low, high) range; three draws, in that
    order."""
    return EspeakVoice(
        variant=variants[int(rng.integers(len(variants)))],
        rate=int(rng.integers(rate_wpm[0], rate_wpm[1] + 1)),
        pitch=int(rng.integers(pitch[0], pitch[1] + 1)),
    )


@dataclasses.dataclass(frozen=True)
class SpeakerConfig:
    """The ranges `draw_speaker` draws a speaker's settings from (uniform, inclusive)."""

    rate_wpm: tuple[int, int] = (150, 200)  # espeak: words per minute
    pitch: tuple[int, int] = (30, 70)  # espeak: 0..99
    tempo: tuple[float, float] = (0.85, 1.15)  # piper / festival: speaking-rate factor
    warp: tuple[float, float] = (1.0, 1.0)  # speed perturbation, every engine
    stage: SpeakerStage | None = None  # the speaker stage; None: none

    def __post_init__(self):
        if self.stage is not None and not isinstance(self.stage, SpeakerStage):
            raise TypeError(f"SpeakerConfig.stage: expected a SpeakerStage, got {self.stage!r}")
        for name in ("rate_wpm", "pitch", "tempo", "warp"):
            checks.require_interval(f"SpeakerConfig.{name}", getattr(self, name))
        checks.require_number("SpeakerConfig.tempo[0]", self.tempo[0], above=0.4)
        for k, bound in enumerate(self.warp):
            checks.require_number(
                f"SpeakerConfig.warp[{k}]", bound, at_least=WARP_RANGE[0], at_most=WARP_RANGE[1]
            )


def draw_speaker(
    rng: np.random.Generator, engine: str, voices: Sequence[str], config: SpeakerConfig
) -> AnyVoice:
    """A speaker of `engine` drawn from `rng`: one of `voices` (espeak variants, piper
    models or festival voices), its engine's tempo, then a warp, then with a speaker
    stage (`config.stage`) Piper's two noises (Piper only) and the shift. The warp is
    drawn only when its range is not a single value (so espeak draws stay those of
    `draw_voice`); with no stage nothing more is drawn (so draws stay those before it)."""
    checks.require_choice("engine", engine, ENGINES)
    if not voices:
        raise ValueError(f"draw_speaker: no voices given for engine {engine!r}")
    if engine == "espeak":
        voice = draw_voice(rng, voices, config.rate_wpm, config.pitch)
    else:
        name = voices[int(rng.integers(len(voices)))]
        stretch = round(1.0 / float(rng.uniform(*config.tempo)), 3)
        voice = (
            PiperVoice(model=name, length_scale=stretch)
            if engine == "piper"
            else FestivalVoice(voice=name, duration_stretch=stretch)
        )
    if config.warp[0] != config.warp[1]:
        voice = dataclasses.replace(voice, warp=round(float(rng.uniform(*config.warp)), 3))
    if config.stage is None:
        return voice
    if engine == "piper":
        noise = round(float(rng.uniform(*config.stage.piper_noise_scale)), 3)
        width = round(float(rng.uniform(*config.stage.piper_noise_w)), 3)
        voice = dataclasses.replace(voice, noise_scale=noise, noise_w=width)
    return dataclasses.replace(voice, shift=draw_shift(rng, config.stage))


def engine_voices(engine: str) -> tuple[str, ...]:
    """The voices of `engine` installed here (espeak variants, piper models, festival
    voices); empty when the engine is not installed."""
    checks.require_choice("engine", engine, ENGINES)
    if engine == "espeak":
        return espeak.variants()
    if engine == "piper":
        return piper.installed_models()
    return festival.voices() if festival.available() else ()


# How far the embedded corpora vary their speech: "plain" (the engines' voices with a
# speed perturbation), "speakers" (plus the speaker stage, `SpeakerStage`), "varied"
# (plus text that varies: the calls' scripts, the keyword utterances' keyword places).
VARIATIONS = ("plain", "speakers", "varied")


def corpus_config_name(base: str, engine_set: str, variation: str = "plain") -> str:
    """A corpus config's name for an engine set and a variation (`VARIATIONS`): `base`,
    then -<set> unless "pip", then -<variation> unless "plain"."""
    checks.require_choice("engine_set", engine_set, tuple(ENGINE_SETS))
    return variation_name(base if engine_set == "pip" else f"{base}-{engine_set}", variation)


def variation_name(name: str, variation: str) -> str:
    """`name`, then -<variation> unless "plain"."""
    checks.require_choice("variation", variation, VARIATIONS)
    return name if variation == "plain" else f"{name}-{variation}"


def variation_stage(variation: str) -> SpeakerStage | None:
    """The speaker stage of a variation: None for "plain", else the default stage."""
    checks.require_choice("variation", variation, VARIATIONS)
    return None if variation == "plain" else SpeakerStage()


def available_engines() -> tuple[str, ...]:
    """The engines of `ENGINES` with at least one voice installed here."""
    return tuple(engine for engine in ENGINES if engine_voices(engine))


def require_engine(engine: str) -> None:
    """A RuntimeError saying what to install when `engine` has no voice here."""
    if engine_voices(engine):
        return
    if engine == "festival":
        festival.require()
    raise RuntimeError(
        f"speech engine {engine!r} is not installed: it comes with the synth extra "
        "(pip install 'speech-tracking-jax[synth]'; make test and make demo install it)"
    )
