"""Small n-gram language models in ARPA format, sentences sampled from pocketsphinx's
shipped trigram model, and word / character error rates.

`train_arpa` estimates a backoff n-gram model with absolute discounting (Katz-style
backoff weights, so each history's probabilities sum to 1) from tokenised sentences and
writes it as ARPA text, which pocketsphinx loads as `RecogniserConfig.language_model`.

`sample_words` draws a sentence word by word from pocketsphinx's shipped en-us trigram
model (`shipped_model_paths`) over its most probable alphabetic words
(`model_and_vocabulary`), so text reads like varied, loosely grammatical English; a
caller may reshape each step's next-word probabilities (cskws_jax's keyword sentences
do). Everything comes from the `np.random.Generator` passed in (~0.1 s a sentence).
"""

from __future__ import annotations

import functools
import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from speechkit import files

BOS, EOS = "<s>", "</s>"


def _ngram_counts(sentences: Iterable[Sequence[str]], order: int) -> list[Counter]:
    counts = [Counter() for _ in range(order)]
    for words in sentences:
        tokens = (BOS, *words, EOS)
        for n in range(1, order + 1):
            for i in range(len(tokens) - n + 1):
                gram = tokens[i : i + n]
                if n == 1 and gram == (BOS,):
                    continue
                counts[n - 1][gram] += 1
    return counts


def train_arpa(
    sentences: Iterable[Sequence[str]],
    path: str | os.PathLike,
    order: int = 3,
    discount: float = 0.5,
) -> dict[int, int]:
    """Writes an ARPA backoff model of the given order; returns n-gram counts per order.

    sentences: lists of words (already normalised and in the recogniser's dictionary).
    """
    if order < 1 or not 0 < discount < 1:
        raise ValueError(f"order >= 1 and 0 < discount < 1 expected, got {order}, {discount}")
    counts = _ngram_counts(list(sentences), order)
    if not counts[0]:
        raise ValueError("train_arpa: no words in the training sentences")
    total = sum(counts[0].values())
    prob: dict[tuple[str, ...], float] = {g: c / total for g, c in counts[0].items()}
    prob[(BOS,)] = 0.0
    backoff: dict[tuple[str, ...], float] = {}
    for n in range(2, order + 1):
        by_history: dict[tuple[str, ...], dict[str, int]] = defaultdict(dict)
        for gram, count in counts[n - 1].items():
            by_history[gram[:-1]][gram[-1]] = count
        for history, followers in by_history.items():
            history_total = sum(followers.values())
            seen_lower = 0.0
            for word, count in followers.items():
                prob[(*history, word)] = (count - discount) / history_total
                seen_lower += _lower_prob(prob, backoff, (*history[1:], word))
            left = discount * len(followers) / history_total
            backoff[history] = left / max(1e-12, 1.0 - seen_lower) if seen_lower < 1 else 1e-12
    _write_arpa(path, prob, backoff, order)
    return {n + 1: len(c) for n, c in enumerate(counts)}


def _lower_prob(prob, backoff, gram: tuple[str, ...]) -> float:
    """P(last word | shorter history) under the model built so far (recursive backoff)."""
    if gram in prob:
        return prob[gram]
    if len(gram) == 1:
        return 0.0
    return backoff.get(gram[:-1], 1.0) * _lower_prob(prob, backoff, gram[1:])


def _write_arpa(path, prob, backoff, order) -> None:
    by_order = defaultdict(list)
    for gram in prob:
        by_order[len(gram)].append(gram)
    with files.atomic_open(path) as out:
        out.write("\\data\\\n")
        for n in range(1, order + 1):
            out.write(f"ngram {n}={len(by_order[n])}\n")
        for n in range(1, order + 1):
            out.write(f"\n\\{n}-grams:\n")
            for gram in sorted(by_order[n]):
                p = prob[gram]
                log_p = -99.0 if p <= 0 else math.log10(p)
                line = f"{log_p:.6f}\t{' '.join(gram)}"
                if n < order and gram in backoff:
                    line += f"\t{math.log10(max(backoff[gram], 1e-12)):.6f}"
                elif n < order:
                    line += "\t0.000000"
                out.write(line + "\n")
        out.write("\n\\end\\\n")


def edit_distance(reference: Sequence, hypothesis: Sequence) -> int:
    """Levenshtein distance (substitutions, insertions, deletions all cost 1)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, start=1):
        current = [i]
        for j, hyp in enumerate(hypothesis, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def error_rate(references: Iterable[Sequence], hypotheses: Iterable[Sequence]) -> float:
    """Total edit distance over total reference length (WER for word lists, CER for
    character strings)."""
    errors = length = 0
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        errors += edit_distance(reference, hypothesis)
        length += len(reference)
    if length == 0:
        raise ValueError("error_rate: the references are empty")
    return errors / length


# ---------------------------------------------------------------------------- sampling


def shipped_model_paths() -> tuple[str, str]:
    """(trigram model, pronouncing dictionary) paths of pocketsphinx's shipped en-us model."""
    from pocketsphinx import get_model_path

    folder = os.path.join(get_model_path(), "en-us")
    return os.path.join(folder, "en-us.lm.bin"), os.path.join(folder, "cmudict-en-us.dict")


def read_pronunciations(path: str | os.PathLike) -> dict[str, list[str]]:
    """word -> its first pronunciation (ARPAbet phones), in file order, for a CMU-style
    dictionary file ("word(2)" lines are alternative pronunciations, skipped)."""
    pronunciations: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 2:
                raise ValueError(f"{path}:{number}: a word without a pronunciation")
            if "(" not in fields[0]:
                pronunciations.setdefault(fields[0], fields[1:])
    return pronunciations


@functools.lru_cache(maxsize=2)
def model_and_vocabulary(vocabulary_size: int) -> tuple[object, list[str]]:
    """(pocketsphinx `NGramModel` of the shipped en-us trigram model, vocabulary): its
    `vocabulary_size` most probable alphabetic dictionary words (unigram probability,
    ties in dictionary order), then EOS. Loaded once per size (a few seconds)."""
    from pocketsphinx import Config, LogMath, NGramModel

    lm_path, dict_path = shipped_model_paths()
    model = NGramModel(Config(), LogMath(), lm_path)
    words = [w for w in read_pronunciations(dict_path) if w.isalpha()]
    scores = np.array([model.prob([w]) for w in words], np.float64)
    order = np.argsort(-scores, kind="stable")[:vocabulary_size]
    return model, [words[i] for i in order] + [EOS]


def next_word_probabilities(model, vocabulary: Sequence[str], history: Sequence[str]):
    """float64 [len(vocabulary)]: P(word | the last two words of `history`) under the
    pocketsphinx `model`, renormalised over `vocabulary`."""
    # NGramModel.prob takes the word first, then its history most recent first.
    context = list(reversed(history[-2:]))
    scores = np.array([model.prob([word, *context]) for word in vocabulary], np.float64)
    scores *= math.log(1.0001)  # pocketsphinx's log base -> natural log
    scores -= scores.max()
    probabilities = np.exp(scores)
    return probabilities / probabilities.sum()


# adjust(probabilities, words so far) reshapes the next-word probabilities in place and
# says whether the sentence may end there.
Adjust = Callable[[np.ndarray, list[str]], bool]


def sample_words(
    rng: np.random.Generator,
    model,
    vocabulary: Sequence[str],
    min_words: int,
    max_words: int,
    adjust: Adjust | None = None,
) -> list[str]:
    """A sentence of at most `max_words` words drawn from `model` over `vocabulary`
    (ending in EOS, as `model_and_vocabulary` gives it), one `rng.choice` per word: it
    may end (draw EOS) only after `min_words` words and when `adjust` allows."""
    history, words = [BOS], []
    while len(words) < max_words:
        probabilities = next_word_probabilities(model, vocabulary, history)
        may_end = adjust(probabilities, words) if adjust is not None else True
        if len(words) < min_words or not may_end:
            probabilities[-1] = 0.0  # EOS
        word = vocabulary[int(rng.choice(len(vocabulary), p=probabilities / probabilities.sum()))]
        if word == EOS:
            break
        words.append(word)
        history.append(word)
    return words
