"""The sentences of the character recogniser's training corpus (`recogniser_speech`),
disjoint from every sentence a `synthetic_calls` call can hold.

An utterance is 1-3 sentences of one source: "dialogue" (call-like sentences from only
the "lm" half of `dialogue.QUESTIONS` and `dialogue.SYMPTOMS`, with this module's own
`ANSWER_TEMPLATES` and `STATEMENTS`) or "general" (English sampled from pocketsphinx's
trigram model, `speechkit.lm.sample_words`). `is_call_sentence` recognises every sentence
a call can hold, default or varied (`dialogue.ScriptConfig`, `dialogue.VARIED_PHRASES`),
compared as the recogniser spells them (`transcript`); a drawn sentence it recognises is
drawn again, so disjointness holds by construction. Everything comes from the
`np.random.Generator` passed in. `dialogue` is `multiqt_jax.datasets.dialogue`.
Specification: docs/corpora.md#the-recognisers-corpus-recogniser_speech.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np

from multiqt_jax.datasets import dialogue
from speechkit import asr, checks, lm

SOURCES = ("dialogue", "general")
# This module's own answers: none is a template of the calls (dialogue._answer). Some
# sentences hold apostrophes, the one symbol of asr.ALPHABET general text never has.
ANSWER_TEMPLATES = {
    "address": (
        "We live at {number} {street}.",
        "Send them to {number} {street}.",
        "The house is on {street}, number {number}.",
        "It's the blue door on {street}.",
    ),
    "phone_number": (
        "Call me back on {digits}.",
        "You can reach me on {digits}.",
        "The number here is {digits}.",
    ),
    "age": (
        "My father is {age}.",
        "My mother is {age} years old.",
        "The patient is {age}.",
        "He turned {age} last month.",
    ),
    "state": (
        "He is still {state}.",
        "She was {state} a minute ago.",
        "I can't tell if he's {state}.",
        "I think she is {state} now.",
    ),
}
STATES = ("awake", "breathing", "moving", "talking", "conscious")
STATEMENTS = (
    "The front door is open.",
    "I'm with him right now.",
    "We're in the kitchen.",
    "My neighbour is here too.",
    "He was fine this morning.",
    "She takes pills for her heart.",
    "I can see the ambulance.",
    "The lights are on outside.",
    "Nobody else is at home.",
    "I moved him onto his side.",
    "She had the same thing last year.",
    "I will wait by the gate.",
)
# The dialogue sentence kinds and their chances.
DIALOGUE_KINDS = ("question", "symptom", "answer", "statement")
DIALOGUE_WEIGHTS = (0.3, 0.3, 0.25, 0.15)


@dataclasses.dataclass(frozen=True)
class RecogniserTextConfig:
    """How the recogniser corpus's utterance texts are drawn."""

    sentences: tuple[int, int] = (1, 3)  # per utterance (min, max), one source
    dialogue_share: float = 0.5  # chance that an utterance is dialogue-like
    vocabulary_size: int = 3000  # general text: the trigram model's most probable words
    general_words: tuple[int, int] = (3, 14)  # words per general sentence (min, max)
    max_draws: int = 50  # draws of one sentence before a collision is an error

    def __post_init__(self):
        checks.require_interval("RecogniserTextConfig.sentences", self.sentences)
        checks.require_int("RecogniserTextConfig.sentences[0]", self.sentences[0], at_least=1)
        checks.require_number(
            "RecogniserTextConfig.dialogue_share", self.dialogue_share, at_least=0, at_most=1
        )
        checks.require_int(
            "RecogniserTextConfig.vocabulary_size", self.vocabulary_size, at_least=10
        )
        checks.require_interval("RecogniserTextConfig.general_words", self.general_words)
        checks.require_int(
            "RecogniserTextConfig.general_words[0]", self.general_words[0], at_least=1
        )
        checks.require_int("RecogniserTextConfig.max_draws", self.max_draws, at_least=1)


@dataclasses.dataclass(frozen=True)
class UtteranceText:
    """One utterance's text: `sentences` as spoken (punctuated), of one `source`."""

    sentences: tuple[str, ...]
    source: str  # one of SOURCES

    @property
    def spoken(self) -> str:
        """The text the synthesiser reads."""
        return " ".join(self.sentences)

    @property
    def transcript(self) -> str:
        """The text as the recogniser must spell it (`transcript`)."""
        return transcript(self.spoken)


def transcript(text: str) -> str:
    """`asr.normalise_words`d words joined by single spaces: only `asr.ALPHABET` and " "."""
    return " ".join(asr.normalise_words(text))


def _alternatives(words) -> str:
    """A regex group matching any of `words` as transcripts."""
    return "(?:" + "|".join(re.escape(transcript(w)) for w in words) + ")"


@functools.cache
def _call_patterns() -> tuple[frozenset[str], tuple[re.Pattern, ...]]:
    """(every fixed call sentence, the calls' answer templates as regexes), as transcripts.
    The templates mirror `dialogue._answer`; tests check every call sentence matches."""
    fixed = [
        *(
            p
            for table in (dialogue.QUESTIONS, dialogue.SYMPTOMS, dialogue.VARIED_PHRASES)
            for phrases in table.values()
            for p in dialogue._half(phrases, "calls")
        ),
        *dialogue.DISTRACTOR_QUESTIONS,
        *dialogue.DISPATCHER_STATEMENTS,
        *dialogue.CALLER_STATEMENTS,
        "I think so.",
        *(f"Yes, he is {verb}." for verb in ("awake", "breathing")),
        *(f"No, she is not {verb}." for verb in ("awake", "breathing")),
    ]
    number, street = _alternatives(dialogue.NUMBER_WORDS), _alternatives(dialogue.STREETS)
    kind, digit = _alternatives(dialogue.STREET_KINDS), _alternatives(dialogue.DIGITS)
    digits = f"{digit}(?: {digit}){{6}}"
    age = _alternatives(dialogue.AGES)
    templates = (
        f"(?:i am at )?{number} {street} {kind}",
        f"(?:it is|my number is) {digits}",
        f"(?:he is|she is about) {age}",
    )
    patterns = tuple(re.compile(t) for t in templates)
    return frozenset(transcript(s) for s in fixed), patterns


def is_call_sentence(sentence: str) -> bool:
    """Whether `sentence` (any case and punctuation) can be a turn of a synthetic_calls
    call, default or varied: a phrase of the calls' half of the pools (the varied
    scripts' phrases too), a distractor or statement, or one of the calls' answers with
    any of its fillers."""
    said = transcript(sentence)
    fixed, patterns = _call_patterns()
    return said in fixed or any(p.fullmatch(said) for p in patterns)


def _pick(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


def _answer(rng: np.random.Generator) -> str:
    """An answer of this module's own templates, its fillers from the calls' word pools
    and `STATES` (the templates, not the fillers, keep it out of the calls)."""
    topic = _pick(rng, tuple(ANSWER_TEMPLATES))
    template = _pick(rng, ANSWER_TEMPLATES[topic])
    street = f"{_pick(rng, dialogue.STREETS)} {_pick(rng, dialogue.STREET_KINDS)}"
    fillers = {
        "number": _pick(rng, dialogue.NUMBER_WORDS),
        "street": street,
        "digits": " ".join(_pick(rng, dialogue.DIGITS) for _ in range(7)),
        "age": _pick(rng, dialogue.AGES),
        "state": _pick(rng, STATES),
    }
    return template.format(**fillers)


def _dialogue_sentence(rng: np.random.Generator) -> str:
    """One call-like sentence: an "lm"-pool question or symptom, an own answer or an own
    statement (`DIALOGUE_WEIGHTS`)."""
    kind = DIALOGUE_KINDS[int(rng.choice(len(DIALOGUE_KINDS), p=DIALOGUE_WEIGHTS))]
    if kind in ("question", "symptom"):
        pool = dialogue.QUESTIONS if kind == "question" else dialogue.SYMPTOMS
        return _pick(rng, dialogue._half(pool[_pick(rng, tuple(pool))], "lm"))
    return _answer(rng) if kind == "answer" else _pick(rng, STATEMENTS)


def _general_sentence(rng: np.random.Generator, config: RecogniserTextConfig) -> str:
    """One sentence of the trigram model, capitalised and ended with a full stop."""
    model, vocabulary = lm.model_and_vocabulary(config.vocabulary_size)
    words = lm.sample_words(rng, model, vocabulary, *config.general_words)
    return " ".join(words).capitalize() + "."


def draw_sentence(rng: np.random.Generator, source: str, config: RecogniserTextConfig) -> str:
    """A sentence of `source` that no call holds (`is_call_sentence`), drawn again while
    one collides; a RuntimeError after `config.max_draws` draws."""
    checks.require_choice("source", source, SOURCES)
    for _ in range(config.max_draws):
        if source == "dialogue":
            sentence = _dialogue_sentence(rng)
        else:
            sentence = _general_sentence(rng, config)
        if not is_call_sentence(sentence):
            return sentence
    raise RuntimeError(
        f"draw_sentence: {config.max_draws} {source} sentences in a row were call "
        f"sentences (last {sentence!r})"
    )


def draw_source(rng: np.random.Generator, config: RecogniserTextConfig) -> str:
    """An utterance's source: "dialogue" with chance `config.dialogue_share` (one draw)."""
    return "dialogue" if rng.random() < config.dialogue_share else "general"


def draw_utterance(
    rng: np.random.Generator, config: RecogniserTextConfig = RecogniserTextConfig()
) -> UtteranceText:
    """An utterance: its source (`draw_source`), its sentence count, then its sentences."""
    source = draw_source(rng, config)
    return draw_sentences(rng, source, config)


def draw_sentences(
    rng: np.random.Generator, source: str, config: RecogniserTextConfig
) -> UtteranceText:
    """The rest of `draw_utterance` once its source is drawn: the sentence count, then
    the sentences (a caller may stop after `draw_source` to skip general text)."""
    count = int(rng.integers(config.sentences[0], config.sentences[1] + 1))
    return UtteranceText(tuple(draw_sentence(rng, source, config) for _ in range(count)), source)
