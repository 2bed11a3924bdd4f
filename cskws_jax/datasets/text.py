"""Sentences for the synthetic keyword-spotting corpus, sampled from an n-gram model.

Text is sampled word by word from pocketsphinx's shipped en-us trigram model over its
most probable alphabetic words (`vocabulary_size`), so utterances read like varied,
loosely grammatical English. Each sentence should hold a drawn number of keywords
(0-3): sentences are resampled until they do (keywords are frequent words, so this is
usually quick) and, failing that, the missing keywords are inserted at random
positions. Everything comes from the `np.random.Generator` passed in.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from cskws_jax import keywords as keyword_list

END = "</s>"


@dataclasses.dataclass(frozen=True)
class TextConfig:
    vocabulary_size: int = 3000
    min_words: int = 5
    max_words: int = 22
    max_keywords: int = 3
    resample_tries: int = 60


@functools.lru_cache(maxsize=2)
def _model_and_vocabulary(vocabulary_size: int):
    from pocketsphinx import Config, LogMath, NGramModel

    lm_path, dict_path = keyword_list._shipped_model_paths()
    model = NGramModel(Config(), LogMath(), lm_path)
    words = [w for w in keyword_list.read_dictionary(dict_path) if w.isalpha()]
    scores = np.array([model.prob([w]) for w in words], np.float64)
    order = np.argsort(-scores, kind="stable")[:vocabulary_size]
    vocabulary = [words[i] for i in order] + [END]
    return model, vocabulary


def _next_word_probabilities(model, vocabulary, history) -> np.ndarray:
    # NGramModel.prob takes the word first, then its history most recent first.
    context = list(reversed(history[-2:]))
    scores = np.array([model.prob([word, *context]) for word in vocabulary], np.float64)
    scores *= math.log(1.0001)  # pocketsphinx's log base -> natural log
    scores -= scores.max()
    probabilities = np.exp(scores)
    return probabilities / probabilities.sum()


def sample_sentence(rng: np.random.Generator, config: TextConfig = TextConfig()) -> list[str]:
    """One sentence (list of words) from the trigram model."""
    model, vocabulary = _model_and_vocabulary(config.vocabulary_size)
    history = ["<s>"]
    words: list[str] = []
    while len(words) < config.max_words:
        probabilities = _next_word_probabilities(model, vocabulary, history)
        if len(words) < config.min_words:
            probabilities[-1] = 0.0  # no end before min_words
            probabilities /= probabilities.sum()
        word = vocabulary[int(rng.choice(len(vocabulary), p=probabilities))]
        if word == END:
            break
        words.append(word)
        history.append(word)
    return words


def sample_utterance_text(
    rng: np.random.Generator, keywords: list[str], config: TextConfig = TextConfig()
) -> tuple[list[str], int]:
    """(words, wanted keyword count): a sentence holding exactly the drawn number of
    keyword occurrences (0..max_keywords)."""
    wanted = int(rng.integers(0, config.max_keywords + 1))
    keyword_set = set(keywords)
    words = sample_sentence(rng, config)
    for _ in range(config.resample_tries):
        if sum(w in keyword_set for w in words) == wanted:
            return words, wanted
        words = sample_sentence(rng, config)
    # Fall back: drop surplus keywords, insert missing ones at random positions.
    words = [w for w in words if w not in keyword_set] if wanted == 0 else words
    while sum(w in keyword_set for w in words) > wanted:
        surplus = [i for i, w in enumerate(words) if w in keyword_set]
        del words[surplus[-1]]
    while sum(w in keyword_set for w in words) < wanted:
        position = int(rng.integers(0, len(words) + 1))
        words.insert(position, keywords[int(rng.integers(len(keywords)))])
    return words, wanted
