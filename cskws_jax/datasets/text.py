"""Sentences for the synthetic keyword-spotting corpus, sampled from an n-gram model.

Text is sampled word by word from pocketsphinx's shipped en-us trigram model, each
sentence holding a drawn number of keywords (0-3). `TextConfig` can vary it
(`VARIED_TEXT`: keywords at the edges, adjacent keywords, `confusable_words` as
fillers); `TextConfig()` draws exactly the sentences it always drew. `text_report`
measures these shares over a corpus's texts. Everything comes from the
`np.random.Generator` passed in.

Specification (sampling, each option's rule, measured shares):
docs/corpora.md#keyword-spotting-corpora-cs-kws.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import types
from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np

from cskws_jax.keywords import VOWELS
from speechkit import checks, lm

END = lm.EOS
CONFUSABLE_VOCABULARY = 50_000  # confusable fillers: the language model's commonest words


@dataclasses.dataclass(frozen=True)
class TextConfig:
    """How keyword sentences are drawn; the three probabilities (each in [0, 1], 0 = off)
    vary where keywords sit and add confusable words (see the module docstring)."""

    vocabulary_size: int = 3000
    min_words: int = 5
    max_words: int = 22
    max_keywords: int = 3
    keyword_boost: float = 4.0  # keyword probability factor while keywords are missing
    edge_keyword_probability: float = 0.0
    adjacent_keywords_probability: float = 0.0
    confusable_filler_probability: float = 0.0

    def __post_init__(self):
        checks.require_int("TextConfig.min_words", self.min_words, at_least=1)
        checks.require_int("TextConfig.max_words", self.max_words)
        checks.require_at_most("TextConfig.min_words", self.min_words, "max_words", self.max_words)
        checks.require_int("TextConfig.max_keywords", self.max_keywords, at_least=0)
        checks.require_number("TextConfig.keyword_boost", self.keyword_boost, above=0)
        for field in (
            "edge_keyword_probability",
            "adjacent_keywords_probability",
            "confusable_filler_probability",
        ):
            checks.require_number(
                f"TextConfig.{field}", getattr(self, field), at_least=0, at_most=1
            )


# Keywords at an edge in about 30% of keyword utterances, a keyword pair in 30% of those
# with two or more, a confusable word in half of all utterances.
VARIED_TEXT = TextConfig(
    edge_keyword_probability=0.3,
    adjacent_keywords_probability=0.3,
    confusable_filler_probability=0.5,
)


def _vocabulary_with(vocabulary_size: int, keywords: tuple[str, ...]):
    """(model, vocabulary ending in END, keyword positions int64 [len(keywords)])."""
    model, vocabulary = lm.model_and_vocabulary(vocabulary_size)
    missing = [k for k in keywords if k not in vocabulary]
    vocabulary = vocabulary[:-1] + missing + [END]
    return model, vocabulary, np.array([vocabulary.index(k) for k in keywords], np.int64)


# --------------------------------------------------------------------- confusable words


def first_syllable(phones: Sequence[str]) -> tuple[str, ...]:
    """A pronunciation's first syllable, closed by the consonant after its vowel (what a
    listener has heard when the word can still go either way): the onset, the first vowel
    (`cskws_jax.keywords.VOWELS`) and the next phone if it is a consonant, stress digits
    dropped. "about" AH B AW T -> (AH, B) ("ab-out"); "people" -> (P, IY, P); "going"
    G OW IH NG -> (G, OW); "hundred" -> (HH, AH, N)."""
    bare = [phone.rstrip("012") for phone in phones]
    vowel = next((i for i, phone in enumerate(bare) if phone in VOWELS), len(bare) - 1)
    end = vowel + 1
    if end < len(bare) and bare[end] not in VOWELS:
        end += 1
    return tuple(bare[:end])


def confusable_words(
    keyword: str,
    dictionary: Mapping[str, Sequence[str]],
    keywords: Collection[str] = (),
    candidates: Iterable[str] | None = None,
) -> tuple[str, ...]:
    """Words that open like `keyword` but are not it, in `candidates` order (default: all
    of `dictionary`, word -> ARPAbet phones as `speechkit.lm.read_pronunciations` reads
    them): alphabetic dictionary words with `keyword`'s `first_syllable`, none of
    `keywords`, not spelt with `keyword` inside ("abouts") and not starting with its whole
    pronunciation (a homophone: "hour" for "our"). () for a word not in `dictionary`."""
    if keyword not in dictionary:
        return ()
    opening = first_syllable(dictionary[keyword])
    whole = [phone.rstrip("012") for phone in dictionary[keyword]]
    excluded = set(keywords) | {keyword}

    def confusable(word: str) -> bool:
        phones = dictionary.get(word)
        return (
            phones is not None
            and word.isalpha()
            and word not in excluded
            and keyword not in word
            and first_syllable(phones) == opening
            and [phone.rstrip("012") for phone in phones[: len(whole)]] != whole
        )

    return tuple(filter(confusable, dictionary if candidates is None else candidates))


@functools.lru_cache(maxsize=4)
def shipped_confusables(keywords: tuple[str, ...]) -> Mapping[str, tuple[str, ...]]:
    """keyword -> its `confusable_words` among the `CONFUSABLE_VOCABULARY` most probable
    words of pocketsphinx's shipped model and dictionary (built once per keyword list,
    ~1 s; read-only)."""
    dictionary = lm.read_pronunciations(lm.shipped_model_paths()[1])
    by_opening: dict[tuple[str, ...], list[str]] = {}
    for word in lm.model_and_vocabulary(CONFUSABLE_VOCABULARY)[1][:-1]:
        by_opening.setdefault(first_syllable(dictionary[word]), []).append(word)

    def candidates(keyword: str) -> list[str]:
        return by_opening.get(first_syllable(dictionary.get(keyword, ())), [])

    return types.MappingProxyType(
        {k: confusable_words(k, dictionary, keywords, candidates(k)) for k in keywords}
    )


# ---------------------------------------------------------------------------- sampling


@dataclasses.dataclass(frozen=True)
class _Placement:
    """Where an utterance's keywords go: first word, last word, two in a row."""

    at_start: bool = False
    at_end: bool = False
    adjacent: bool = False

    def keywords_needed(self) -> int:
        edges = self.at_start + self.at_end
        return max(edges + self.adjacent, 2 * self.adjacent)

    def keywords_appended(self, wanted: int) -> int:
        """Keywords added after the sampled sentence: the end one, and the one before it
        when the pair can only sit at the end (two keywords, no start keyword)."""
        if not self.at_end:
            return 0
        return 2 if self.adjacent and not self.at_start and wanted == 2 else 1


def _chance(rng: np.random.Generator, probability: float) -> bool:
    """True with `probability`; draws nothing when it is 0 (so default text keeps its
    draws)."""
    return probability > 0 and bool(rng.random() < probability)


def _draw_placement(rng: np.random.Generator, wanted: int, config: TextConfig) -> _Placement:
    """The placements drawn for an utterance of `wanted` keywords, dropping random ones
    until they fit."""
    placement = _Placement(
        at_start=wanted >= 1 and _chance(rng, config.edge_keyword_probability),
        at_end=wanted >= 1 and _chance(rng, config.edge_keyword_probability),
        adjacent=wanted >= 2 and _chance(rng, config.adjacent_keywords_probability),
    )
    while placement.keywords_needed() > wanted:
        drawn = [name for name, on in dataclasses.asdict(placement).items() if on]
        dropped = drawn[int(rng.integers(len(drawn)))]
        placement = dataclasses.replace(placement, **{dropped: False})
    return placement


def _has_adjacent_keywords(words: Sequence[str], keyword_set: Collection[str]) -> bool:
    """Whether two consecutive words are both keywords."""
    return any(a in keyword_set and b in keyword_set for a, b in itertools.pairwise(words))


def _insertion_position(
    rng: np.random.Generator, words: list[str], keyword_set: set[str], pair_missing: bool
) -> int:
    """Where a missing keyword goes: after the first keyword while a pair is missing,
    else at random."""
    if pair_missing:
        for i, word in enumerate(words):
            if word in keyword_set:
                return i + 1
    return int(rng.integers(0, len(words) + 1))


def _append_keywords(rng, model, keywords: list[str], words: list[str], count: int) -> None:
    """Appends `count` keywords, each drawn from the model's next-word probabilities
    over the keywords."""
    for _ in range(count):
        probabilities = lm.next_word_probabilities(model, keywords, [lm.BOS, *words])
        words.append(keywords[int(rng.choice(len(keywords), p=probabilities))])


def _replace_with_confusable(
    rng: np.random.Generator, words: list[str], keywords: list[str]
) -> None:
    """Replaces a random non-keyword word by a random keyword's random confusable word
    (`shipped_confusables`); nothing when there is no such word or no keyword has one."""
    confusables = shipped_confusables(tuple(keywords))
    opened = [k for k in keywords if confusables[k]]
    keyword_set = set(keywords)
    slots = [i for i, word in enumerate(words) if word not in keyword_set]
    if not opened or not slots:
        return
    slot = slots[int(rng.integers(len(slots)))]
    choices = confusables[opened[int(rng.integers(len(opened)))]]
    words[slot] = choices[int(rng.integers(len(choices)))]


def sample_utterance_text(
    rng: np.random.Generator, keywords: list[str], config: TextConfig = TextConfig()
) -> tuple[list[str], int]:
    """(words, wanted): a sentence holding exactly `wanted` keyword occurrences, where
    `wanted` is drawn from 0..max_keywords (see the module docstring). At most
    `max_words + max_keywords` words."""
    wanted = int(rng.integers(0, config.max_keywords + 1))
    placement = _draw_placement(rng, wanted, config)
    appended = placement.keywords_appended(wanted)
    in_sentence = wanted - appended
    pair_in_sentence = placement.adjacent and appended < 2
    model, vocabulary, keyword_ids = _vocabulary_with(config.vocabulary_size, tuple(keywords))
    keyword_set = set(keywords)

    def must_be_keyword(words: list[str]) -> bool:
        if not words:
            return placement.at_start
        return (
            pair_in_sentence
            and words[-1] in keyword_set
            and not _has_adjacent_keywords(words, keyword_set)
        )

    def adjust(probabilities: np.ndarray, words: list[str]) -> bool:
        """Boosts the keywords while some are missing (allows only them where a placement
        needs one), bars them after; ends only with all."""
        found = sum(word in keyword_set for word in words)
        if found < in_sentence:
            probabilities[keyword_ids] *= config.keyword_boost
            if must_be_keyword(words):
                kept = probabilities[keyword_ids]
                probabilities[:] = 0.0
                probabilities[keyword_ids] = kept
        else:
            probabilities[keyword_ids] = 0.0
        return found >= in_sentence

    words = lm.sample_words(rng, model, vocabulary, config.min_words, config.max_words, adjust)
    found = sum(word in keyword_set for word in words)
    for _ in range(in_sentence - found):
        pair_missing = pair_in_sentence and not _has_adjacent_keywords(words, keyword_set)
        position = _insertion_position(rng, words, keyword_set, pair_missing)
        words.insert(position, keywords[int(rng.integers(len(keywords)))])
    _append_keywords(rng, model, keywords, words, appended)
    if _chance(rng, config.confusable_filler_probability):
        _replace_with_confusable(rng, words, keywords)
    return words, wanted


# ----------------------------------------------------------------------------- report


def text_report(
    utterances: Sequence[Sequence[str]],
    keywords: Sequence[str],
    confusables: Mapping[str, Collection[str]] | None = None,
) -> dict[str, float | int]:
    """What the varied-text options did to a corpus's texts (lists of words), as
    JSON-ready numbers:

    - `utterances`, `mean_keywords` (keyword occurrences per utterance);
    - `keyword_first`, `keyword_last`: shares of the utterances with keywords whose first
      / last word is one (compare `edge_keyword_probability`);
    - `adjacent_keywords`: share of the utterances with >= 2 keywords that have two in a
      row (compare `adjacent_keywords_probability`);
    - `confusable_filler`: share of all utterances holding a confusable word of any
      keyword (`confusables`, default `shipped_confusables`), sampled or inserted.

    Shares are 0.0 where no utterance qualifies. Sampled text has some of each without
    the options (compare a `TextConfig()` corpus)."""
    keyword_set = set(keywords)
    if confusables is None:
        confusables = shipped_confusables(tuple(keywords))
    confusable_set = set().union(*confusables.values())
    counts = [sum(word in keyword_set for word in words) for words in utterances]
    with_keywords = [words for words, n in zip(utterances, counts, strict=True) if n >= 1]
    with_two = [words for words, n in zip(utterances, counts, strict=True) if n >= 2]
    return {
        "utterances": len(utterances),
        "mean_keywords": _mean(counts),
        "keyword_first": _mean([words[0] in keyword_set for words in with_keywords]),
        "keyword_last": _mean([words[-1] in keyword_set for words in with_keywords]),
        "adjacent_keywords": _mean([_has_adjacent_keywords(w, keyword_set) for w in with_two]),
        "confusable_filler": _mean([not confusable_set.isdisjoint(w) for w in utterances]),
    }


def _mean(values: Sequence[float]) -> float:
    """The mean of `values` (bools count 0 / 1), 0.0 for none."""
    return sum(values) / len(values) if values else 0.0
