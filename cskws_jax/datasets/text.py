"""Sentences for the synthetic keyword-spotting corpus, sampled from an n-gram model.

Text is sampled word by word from pocketsphinx's shipped en-us trigram model over its
most probable alphabetic words (`vocabulary_size`, plus the keywords), so utterances
read like varied, loosely grammatical English. Each sentence holds a drawn number of
keywords (0-3), reached while sampling: once the sentence has them, keywords get
probability zero; while some are missing, keyword probabilities are multiplied by
`keyword_boost` and the sentence may not end. If `max_words` is reached first, the
missing keywords are inserted at random positions. Everything comes from the
`np.random.Generator` passed in (one sentence: ~0.1 s).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from cskws_jax import keywords as keyword_list
from speechkit import checks

END = "</s>"


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


@functools.lru_cache(maxsize=2)
def _model_and_vocabulary(vocabulary_size: int):
    from pocketsphinx import Config, LogMath, NGramModel

    lm_path, dict_path = keyword_list.shipped_model_paths()
    model = NGramModel(Config(), LogMath(), lm_path)
    words = [w for w in keyword_list.read_dictionary(dict_path) if w.isalpha()]
    scores = np.array([model.prob([w]) for w in words], np.float64)
    order = np.argsort(-scores, kind="stable")[:vocabulary_size]
    vocabulary = [words[i] for i in order] + [END]
    return model, vocabulary


def _vocabulary_with(vocabulary_size: int, keywords: tuple[str, ...]):
    """(model, vocabulary ending in END, keyword positions int64 [len(keywords)])."""
    model, vocabulary = _model_and_vocabulary(vocabulary_size)
    missing = [k for k in keywords if k not in vocabulary]
    vocabulary = vocabulary[:-1] + missing + [END]
    return model, vocabulary, np.array([vocabulary.index(k) for k in keywords], np.int64)


def _next_word_probabilities(model, vocabulary, history) -> np.ndarray:
    # NGramModel.prob takes the word first, then its history most recent first.
    context = list(reversed(history[-2:]))
    scores = np.array([model.prob([word, *context]) for word in vocabulary], np.float64)
    scores *= math.log(1.0001)  # pocketsphinx's log base -> natural log
    scores -= scores.max()
    probabilities = np.exp(scores)
    return probabilities / probabilities.sum()


def sample_utterance_text(
    rng: np.random.Generator, keywords: list[str], config: TextConfig = TextConfig()
) -> tuple[list[str], int]:
    """(words, wanted): a sentence holding exactly `wanted` keyword occurrences, where
    `wanted` is drawn from 0..max_keywords (see the module docstring)."""
    wanted = int(rng.integers(0, config.max_keywords + 1))
    model, vocabulary, keyword_ids = _vocabulary_with(config.vocabulary_size, tuple(keywords))
    keyword_set = set(keywords)
    history, words, found = ["<s>"], [], 0
    while len(words) < config.max_words:
        probabilities = _next_word_probabilities(model, vocabulary, history)
        if found < wanted:
            probabilities[keyword_ids] *= config.keyword_boost
        else:
            probabilities[keyword_ids] = 0.0
        if len(words) < config.min_words or found < wanted:
            probabilities[-1] = 0.0  # END
        word = vocabulary[int(rng.choice(len(vocabulary), p=probabilities / probabilities.sum()))]
        if word == END:
            break
        words.append(word)
        history.append(word)
        found += word in keyword_set
    for _ in range(wanted - found):
        position = int(rng.integers(0, len(words) + 1))
        words.insert(position, keywords[int(rng.integers(len(keywords)))])
    return words, wanted
