"""Sentences for the synthetic keyword-spotting corpus, sampled from an n-gram model.

Text is sampled word by word (`speechkit.lm.sample_words`) from pocketsphinx's shipped
en-us trigram model over its most probable alphabetic words (`vocabulary_size`, plus the
keywords), so utterances read like varied, loosely grammatical English. Each sentence
holds a drawn number of keywords (0-3), reached while sampling: once the sentence has
them, keywords get
probability zero; while some are missing, keyword probabilities are multiplied by
`keyword_boost` and the sentence may not end. If `max_words` is reached first, the
missing keywords are inserted at random positions. Everything comes from the
`np.random.Generator` passed in (one sentence: ~0.1 s).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from speechkit import checks, lm

END = lm.EOS


@dataclasses.dataclass(frozen=True)
class TextConfig:
    vocabulary_size: int = 3000
    min_words: int = 5
    max_words: int = 22
    max_keywords: int = 3
    keyword_boost: float = 4.0  # keyword probability factor while keywords are missing

    def __post_init__(self):
        checks.require_int("TextConfig.min_words", self.min_words, at_least=1)
        checks.require_int("TextConfig.max_words", self.max_words)
        checks.require_at_most("TextConfig.min_words", self.min_words, "max_words", self.max_words)
        checks.require_int("TextConfig.max_keywords", self.max_keywords, at_least=0)
        checks.require_number("TextConfig.keyword_boost", self.keyword_boost, above=0)


def _vocabulary_with(vocabulary_size: int, keywords: tuple[str, ...]):
    """(model, vocabulary ending in END, keyword positions int64 [len(keywords)])."""
    model, vocabulary = lm.model_and_vocabulary(vocabulary_size)
    missing = [k for k in keywords if k not in vocabulary]
    vocabulary = vocabulary[:-1] + missing + [END]
    return model, vocabulary, np.array([vocabulary.index(k) for k in keywords], np.int64)


def sample_utterance_text(
    rng: np.random.Generator, keywords: list[str], config: TextConfig = TextConfig()
) -> tuple[list[str], int]:
    """(words, wanted): a sentence holding exactly `wanted` keyword occurrences, where
    `wanted` is drawn from 0..max_keywords (see the module docstring)."""
    wanted = int(rng.integers(0, config.max_keywords + 1))
    model, vocabulary, keyword_ids = _vocabulary_with(config.vocabulary_size, tuple(keywords))
    keyword_set = set(keywords)

    def adjust(probabilities: np.ndarray, words: list[str]) -> bool:
        """Boosts the keywords while some are missing, bars them after; ends only with all."""
        found = sum(word in keyword_set for word in words)
        if found < wanted:
            probabilities[keyword_ids] *= config.keyword_boost
        else:
            probabilities[keyword_ids] = 0.0
        return found >= wanted

    words = lm.sample_words(rng, model, vocabulary, config.min_words, config.max_words, adjust)
    found = sum(word in keyword_set for word in words)
    for _ in range(wanted - found):
        position = int(rng.integers(0, len(words) + 1))
        words.insert(position, keywords[int(rng.integers(len(keywords)))])
    return words, wanted
