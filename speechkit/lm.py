"""Small n-gram language models in ARPA format, and sentences sampled from pocketsphinx's
shipped trigram model.

`train_arpa` estimates a backoff n-gram model (absolute discounting, Katz-style backoff
weights, so each history's probabilities sum to 1) from tokenised sentences and writes it
as ARPA text, which pocketsphinx loads as `RecogniserConfig.language_model`. `read_arpa`
reads any ARPA file (bounded by `ARPA_LIMIT`) as an `NgramModel`, the word model of
`ctc_jax.beam` (docs/models.md).

`sample_words` draws a sentence word by word from pocketsphinx's shipped en-us trigram
model (`shipped_model_paths`, `model_and_vocabulary`); a caller may reshape each step's
next-word probabilities, and everything comes from the `np.random.Generator` passed in.
Word and character error rates are `speechkit.error_rates`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import math
import os
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from speechkit import errors, files

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


# ------------------------------------------------------------------------------ reading

ARPA_LIMIT = 32 << 20
"""Bytes: the largest ARPA file `read_arpa` reads (32 MiB, about 1.3 million n-grams).
Reading holds the text and a dict entry per n-gram: at most about 11 times the file's
size (an 8.4 MB trigram model of 341k n-grams peaked at 89 MB and kept 48 MB; read in
1.1 s on one core), so about 350 MB at the limit, in time linear in the size."""

MAX_ORDER = 9  # the longest n-gram read; the toolkits that write ARPA stop well below
MAX_LOG10 = 1000.0  # the largest magnitude of a log10 value read: sums stay finite
UNKNOWN_LOG10 = -8.0  # log10 P(word) of a word a model without <unk> does not know
UNK = "<unk>"


class ArpaError(errors.InvalidInput):
    """An ARPA file that cannot be read; the message names the file and line."""


@dataclasses.dataclass(frozen=True, eq=False)  # eq: never compare the tables
class NgramModel:
    """A backoff n-gram model as an ARPA file holds it (log10 probabilities and backoff
    weights of n-grams, tuples of words).

    `log10_prob(word, history)`: the longest n-gram of `history`'s last words and `word`
    the model holds, plus the backoff weights of the longer histories it skipped (ARPA's
    rule; a history without a weight has 0). A word the model does not know is `<unk>`
    when the model holds it, else it scores `unknown_log10` whatever the history; an
    unknown history word matches no n-gram, so the history backs off past it. `history`
    starts with `BOS` at the start of a sentence; `EOS` is the word that ends one."""

    order: int
    log10_probs: dict[tuple[str, ...], float]
    log10_backoffs: dict[tuple[str, ...], float]
    unknown_log10: float = UNKNOWN_LOG10

    def __contains__(self, word: str) -> bool:
        return (word,) in self.log10_probs

    def log10_prob(self, word: str, history: Sequence[str] = ()) -> float:
        """log10 P(word | history); see the class docstring."""
        if word not in self:
            if UNK not in self:
                return self.unknown_log10
            word = UNK
        context = tuple(history[max(0, len(history) - self.order + 1) :])
        penalty = 0.0
        for start in range(len(context) + 1):
            gram = (*context[start:], word)
            if gram in self.log10_probs:
                return penalty + self.log10_probs[gram]
            penalty += self.log10_backoffs.get(context[start:], 0.0)
        raise AssertionError("unreachable: a known word's unigram is held")

    def log_prob(self, word: str, history: Sequence[str] = ()) -> float:
        """Natural log P(word | history): `log10_prob` times ln 10."""
        return self.log10_prob(word, history) * math.log(10.0)

    def sentence_log10_prob(self, words: Sequence[str]) -> float:
        """log10 P(words, then EOS | BOS): each word given the ones before it."""
        history, total = [BOS], 0.0
        for word in (*words, EOS):
            total += self.log10_prob(word, history)
            history.append(word)
        return total


def read_arpa(
    path: str | os.PathLike, *, unknown_log10: float = UNKNOWN_LOG10, limit: int = ARPA_LIMIT
) -> NgramModel:
    """The `NgramModel` of an ARPA file of at most `limit` bytes (a regular file; see
    `parse_arpa` for what it must hold); anything else is an `ArpaError` naming it."""
    data = files.read_regular_file(os.fspath(path), limit, what="ARPA model", error=ArpaError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ArpaError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    del data
    return parse_arpa(text, where=os.fspath(path), unknown_log10=unknown_log10)


def parse_arpa(
    text: str, *, where: str = "ARPA text", unknown_log10: float = UNKNOWN_LOG10
) -> NgramModel:
    """The `NgramModel` of ARPA text (`train_arpa`'s, or any standard one): anything
    before a `\\data\\` line, `ngram N=COUNT` lines for N = 1, 2, ... (at most
    `MAX_ORDER`), then each order's `\\N-grams:` section of exactly COUNT lines
    `LOG10_PROB WORD1 .. WORDN [LOG10_BACKOFF]` (numbers within +-`MAX_LOG10`,
    probabilities <= 1, no n-gram twice), then `\\end\\`. Blank lines are skipped.
    Anything else is an `ArpaError` naming `where` and the line."""
    if not math.isfinite(unknown_log10) or unknown_log10 > 0:
        raise ValueError(f"unknown_log10: a finite log10 probability <= 0, got {unknown_log10}")
    lines = _content_lines(text)
    counts = _arpa_counts(lines, where)
    probs: dict[tuple[str, ...], float] = {}
    backoffs: dict[tuple[str, ...], float] = {}
    for order, count in enumerate(counts, start=1):
        _arpa_section(lines, order, count, where, probs, backoffs)
        expected = f"\\{order + 1}-grams:" if order < len(counts) else "\\end\\"
        number, line = next(lines, (None, "the end of the file"))
        if line != expected:
            at = f"{where}:{number}" if number else where
            raise ArpaError(f"{at}: {line!r} after {count} {order}-grams, expected {expected!r}")
    if counts[0] == 0:
        raise ArpaError(f"{where}: no unigrams")
    return NgramModel(len(counts), probs, backoffs, unknown_log10)


def _content_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, the line stripped) of every line that is not blank."""
    for number, line in enumerate(io.StringIO(text), start=1):
        line = line.strip()
        if line:
            yield number, line


def _arpa_counts(lines: Iterator[tuple[int, str]], where: str) -> list[int]:
    """The counts of the `ngram N=COUNT` lines after `\\data\\`, through the
    `\\1-grams:` line that ends them (consumed)."""
    if not any(line == "\\data\\" for _, line in lines):
        raise ArpaError(f"{where}: no \\data\\ line")
    counts: list[int] = []
    for number, line in lines:
        if line == "\\1-grams:" and counts:
            return counts
        match = re.fullmatch(r"ngram\s+(\d{1,4})\s*=\s*(\d{1,12})", line)
        if match is None or int(match.group(1)) != len(counts) + 1:
            raise ArpaError(
                f"{where}:{number}: {line[:80]!r}, expected 'ngram {len(counts) + 1}=COUNT'"
            )
        if len(counts) == MAX_ORDER:
            raise ArpaError(f"{where}:{number}: more than {MAX_ORDER} orders")
        counts.append(int(match.group(2)))
    raise ArpaError(f"{where}: the file ends in its \\data\\ header")


def _arpa_section(lines, order: int, count: int, where: str, probs, backoffs) -> None:
    """Reads `count` lines of `order`-grams into `probs` and `backoffs` (log10)."""
    for _ in range(count):
        number, line = next(lines, (None, ""))
        if number is None or line.startswith("\\"):
            at = f"{where}:{number}" if number else where
            raise ArpaError(f"{at}: fewer {order}-grams than the header's {count}")
        gram, log10_prob, log10_backoff = _arpa_entry(line.split(), order, f"{where}:{number}")
        if gram in probs:
            raise ArpaError(f"{where}:{number}: the {order}-gram {' '.join(gram)!r} twice")
        probs[gram] = log10_prob
        if log10_backoff is not None:
            backoffs[gram] = log10_backoff


def _arpa_entry(fields: list[str], order: int, where: str):
    """(n-gram, log10 probability, log10 backoff or None) of one split n-gram line."""
    if len(fields) not in (order + 1, order + 2):
        raise ArpaError(f"{where}: {len(fields)} fields, expected an {order}-gram line")
    log10_prob = _arpa_number(fields[0], where)
    if log10_prob > 0:
        raise ArpaError(f"{where}: log10 probability {fields[0]} above 0")
    log10_backoff = _arpa_number(fields[-1], where) if len(fields) == order + 2 else None
    return tuple(sys.intern(word) for word in fields[1 : order + 1]), log10_prob, log10_backoff


def _arpa_number(field: str, where: str) -> float:
    """A float within +-`MAX_LOG10` (ARPA's -99 for log10 0 included), else a named
    `ArpaError`."""
    try:
        value = float(field)
    except ValueError:
        raise ArpaError(f"{where}: {field[:40]!r} is not a number") from None
    if not abs(value) <= MAX_LOG10:  # NaN too
        raise ArpaError(f"{where}: {field[:40]!r} is not a number within +-{MAX_LOG10:g}")
    return value


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
