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

ENGINES = ("espeak", "piper", "festival")
# The engine sets the embedded corpora come in: name -> (engines, the held-out engine
# that speaks only their heldout split). "pip": the pip-installable engines alone (the
# default); "festival": Debian's Festival voices join espeak-ng for training.
ENGINE_SETS = {
    "pip": (("espeak", "piper"), "piper"),
    "festival": (("espeak", "festival", "piper"), "piper"),
}
WARP_RANGE = (0.7, 1.4)  # speed perturbation factors a voice accepts


class _Speaker:
    """What every engine's voice has: `engine`, `name`, `warp` -> `speaker`."""

    engine: str
    name: str
    warp: float

    @property
    def speaker(self) -> str:
        """The speaker as the corpora record it: "engine:voice", "@warp" unless 1."""
        return f"{self.engine}:{self.name}" + ("" if self.warp == 1.0 else f"@{self.warp:.2f}")


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

    engine = "piper"

    def __post_init__(self):
        checks.require_choice("PiperVoice.model", self.model, piper.PIPER_MODELS)
        checks.require_number("PiperVoice.length_scale", self.length_scale, above=0.3, at_most=3.0)
        _check_warp("PiperVoice", self.warp)

    @property
    def name(self) -> str:
        return self.model


@dataclasses.dataclass(frozen=True)
class FestivalVoice(_Speaker):
    """A Festival voice (`festival.VOICES`), its tempo and a warp."""

    voice: str = "kal_diphone"
    duration_stretch: float = 1.0  # > 1: slower
    warp: float = 1.0

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

    def __post_init__(self):
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
    models or festival voices), its engine's tempo, then a warp. The warp is drawn only
    when its range is not a single value (so espeak draws stay those of `draw_voice`)."""
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
    return voice


def engine_voices(engine: str) -> tuple[str, ...]:
    """The voices of `engine` installed here (espeak variants, piper models, festival
    voices); empty when the engine is not installed."""
    checks.require_choice("engine", engine, ENGINES)
    if engine == "espeak":
        return espeak.variants()
    if engine == "piper":
        return piper.installed_models()
    return festival.voices() if festival.available() else ()


def corpus_config_name(base: str, engine_set: str) -> str:
    """A corpus config's name for an engine set: `base` for "pip", else base-<set>."""
    checks.require_choice("engine_set", engine_set, tuple(ENGINE_SETS))
    return base if engine_set == "pip" else f"{base}-{engine_set}"


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
