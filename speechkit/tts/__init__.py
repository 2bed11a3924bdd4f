"""Speech synthesis with several engines, each with word timings.

Engines (`ENGINES`; `available_engines()` says which are installed here): "espeak"
(espeak-ng, `EspeakVoice`), "piper" (Piper, a neural synthesiser, `PiperVoice`) and
"festival" (optional, from Debian packages, `FestivalVoice`). Every voice has a `warp`
(speed perturbation), and `draw_speaker` draws a speaker of an engine from a
`SpeakerConfig`. The same text, voice and seed give the same samples. The engines, their
timings, the speakers and determinism: docs/speechkit.md, "tts".

    >>> from speechkit import tts
    >>> speech = tts.synthesize("Where are you calling from?", tts.EspeakVoice(variant="f3"))
    >>> [w.text for w in speech.words], speech.sample_rate
    (['Where', 'are', 'you', 'calling', 'from'], 16000)
"""

from speechkit.tts.espeak import ESPEAK_RATE, variants
from speechkit.tts.speakers import (
    SpeakerShift,
    SpeakerStage,
    apply_shift,
    parse_shift,
    speaker_distribution,
)
from speechkit.tts.synthesis import Synthesis, synthesize, warp
from speechkit.tts.timing import WordTiming
from speechkit.tts.voices import (
    ENGINE_SETS,
    ENGINES,
    VARIATIONS,
    WARP_RANGE,
    AnyVoice,
    EspeakVoice,
    FestivalVoice,
    PiperVoice,
    SpeakerConfig,
    available_engines,
    corpus_config_name,
    draw_speaker,
    draw_voice,
    engine_voices,
    require_engine,
    variation_name,
    variation_stage,
)

__all__ = [
    "ENGINES",
    "ENGINE_SETS",
    "VARIATIONS",
    "ESPEAK_RATE",
    "WARP_RANGE",
    "AnyVoice",
    "EspeakVoice",
    "FestivalVoice",
    "PiperVoice",
    "SpeakerConfig",
    "SpeakerShift",
    "SpeakerStage",
    "Synthesis",
    "WordTiming",
    "apply_shift",
    "available_engines",
    "corpus_config_name",
    "draw_speaker",
    "draw_voice",
    "engine_voices",
    "parse_shift",
    "require_engine",
    "speaker_distribution",
    "synthesize",
    "variants",
    "variation_name",
    "variation_stage",
    "warp",
]
