"""Causal CTC prefix beam search with a word n-gram language model, streamed.

    config = BeamConfig(width=32, alpha=0.3, beta=3.0, max_delay_s=0.3)
    decoder = BeamDecoder(config, hop_s=0.02, lm=speechkit.lm.read_arpa("words.arpa"))
    for block in blocks:                  # float [n, 30] log-probabilities, any n >= 0
        for word in decoder.step(block):  # speechkit.asr.TimedWord: final, never revoked
            print(word.word, word.start, word.end, word.emitted)
    rest = decoder.close()                # the words still open at the end of the stream
    transcript = transcribe(log_probs, config, hop_s=0.02, lm=lm)  # decode.Transcript

Hannun et al. 2014 (arXiv:1408.2873) in natural logs, scored with `alpha` x the word
model's log probability and `beta` per completed word; the words every kept prefix
shares are final, and `max_delay_s` bounds the wait. Streaming over any block partition
equals whole-stream decoding, bit for bit. The search, finality, settings and measured
scores: docs/models.md, "Beam search with a word model".
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os

import numpy as np

from ctc_jax import decode, symbols
from speechkit import asr, checks, lm

NEG_INF = -math.inf
MAX_DELAY_S = 0.3  # the default longest wait of a completed word for finality
MAX_WIDTH = 1024  # prefixes kept per frame: the time per frame grows with it
CACHE_SIZE = 1 << 16  # (word, history) scores remembered by a decoder


@dataclasses.dataclass(frozen=True)
class BeamConfig:
    """width: prefixes kept after every frame; alpha: weight of the word model's
    natural-log probability; beta: bonus per completed word (nats); prune_log_prob: a
    frame's labels below this log-probability grow no prefix (None: every label);
    max_delay_s: a word the best prefix completed (its SPACE's frame) at least this long
    ago is made final, dropping the prefixes that disagree (None: wait until every kept
    prefix agrees, however long)."""

    # Chosen on 80 validation utterances of recogniser_speech/quick with the shipped
    # recogniser and a trigram of its training text (docs/models.md).
    width: int = 32
    alpha: float = 0.3
    beta: float = 3.0
    prune_log_prob: float | None = -10.0
    max_delay_s: float | None = MAX_DELAY_S

    def __post_init__(self):
        checks.require_int("BeamConfig.width", self.width, at_least=1, at_most=MAX_WIDTH)
        checks.require_number("BeamConfig.alpha", self.alpha, at_least=0)
        checks.require_number("BeamConfig.beta", self.beta)
        if self.prune_log_prob is not None:
            checks.require_number("BeamConfig.prune_log_prob", self.prune_log_prob, at_most=0)
        if self.max_delay_s is not None:
            checks.require_number("BeamConfig.max_delay_s", self.max_delay_s, at_least=0)


# A path's frames, last first: (frame of the last label, the frames before it) or None.
Frames = tuple | None
CHARACTERS = tuple(symbols.character(i) for i in range(symbols.NUM_SYMBOLS))


class Prefix:
    """One kept prefix: its labels since the last final word, as text (`CHARACTERS`, so
    it hashes fast: the key), their frames on its best path, and its scores (natural
    logs)."""

    __slots__ = ("labels", "frames", "last", "blank", "label", "lm", "history", "word", "best")

    def __init__(self, labels: str, frames: Frames, last: int, lm_score, history, word: str):
        self.labels = labels  # since the last final word: the key
        self.frames = frames  # the frame of each of `labels`, best path, last first
        self.last = last  # the whole prefix's last label (BLANK when empty)
        self.blank = NEG_INF  # log P(frames so far, paths ending in blank)
        self.label = NEG_INF  # log P(frames so far, paths ending in `last`)
        self.lm = lm_score  # alpha * log P(completed words) + beta * their count
        self.history = history  # the word model's context: BOS and completed words
        self.word = word  # the characters of the unfinished word
        self.best = NEG_INF  # this frame's largest contribution (chose `frames`)

    @property
    def acoustic(self) -> float:
        """log P(frames so far, the prefix), over all its paths."""
        return log_add(self.blank, self.label)

    def rank(self) -> tuple:
        """Sort key: the best score first, then the smaller labels."""
        return (-(self.acoustic + self.lm), self.labels)


@dataclasses.dataclass
class BeamState:
    """frame: frames decoded so far; prefixes: the kept ones by labels, best first."""

    frame: int
    prefixes: dict[str, Prefix]


def log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)), exact where either is -inf."""
    if a < b:
        a, b = b, a
    if b == NEG_INF:
        return a
    return a + math.log1p(math.exp(b - a))


def initial_state() -> BeamState:
    """The empty prefix, probability 1, before any frame."""
    empty = Prefix("", None, symbols.BLANK, 0.0, (lm.BOS,), "")
    empty.blank = 0.0
    return BeamState(0, {"": empty})


class WordScorer:
    """alpha * natural-log P(word | history) + beta of completed words under a word
    model (none: beta alone), remembered for the last `CACHE_SIZE` queries."""

    def __init__(self, model: lm.NgramModel | None, alpha: float, beta: float):
        self.model, self.alpha, self.beta = model, alpha, beta
        self.context = 0 if model is None else model.order - 1
        self.word = functools.lru_cache(maxsize=CACHE_SIZE)(self._word)

    def _word(self, word: str, history: tuple[str, ...]) -> tuple[float, tuple[str, ...]]:
        """(score of `word` completed after `history`, the history after it)."""
        if self.model is None:
            return self.beta, history
        score = self.alpha * self.model.log_prob(word, history) + self.beta
        return score, (*history, word)[max(0, len(history) + 1 - self.context) :]

    def end(self, history: tuple[str, ...]) -> float:
        """alpha * log P(EOS | history): the end of the stream (0 without a model)."""
        if self.model is None:
            return 0.0
        return self.alpha * self.model.log_prob(lm.EOS, history)

    def closing(self, prefix: Prefix) -> float:
        """What ending the stream after `prefix` adds: its unfinished word, then EOS."""
        score, history = 0.0, prefix.history
        if prefix.word:
            score, history = self.word(prefix.word, history)
        return score + self.end(history)


def checked_log_probs(log_probs) -> np.ndarray:
    """float64 [n, NUM_SYMBOLS] of a block of log-probabilities, checked: no NaN, none
    above 0 (beyond float32 rounding, clipped); -inf is a label that cannot occur."""
    block = np.asarray(log_probs, np.float64)
    if block.ndim != 2 or block.shape[1] != symbols.NUM_SYMBOLS:
        raise ValueError(
            f"log_probs: shape {block.shape}, expected [frames, {symbols.NUM_SYMBOLS}]"
        )
    if np.isnan(block).any():
        raise ValueError("log_probs: NaN values")
    if block.size and block.max() > 1e-4:
        raise ValueError(
            f"log_probs: a value of {block.max():.4g} above 0: expected log-probabilities "
            "(a log_softmax of the logits), not logits"
        )
    return np.minimum(block, 0.0)


def growing_labels(block: np.ndarray, prune_log_prob: float | None) -> list[list[int]]:
    """Per frame of a checked block, the labels (no blank) that may grow a prefix:
    finite log-probability, at least `prune_log_prob`."""
    allowed = np.isfinite(block)
    if prune_log_prob is not None:
        allowed &= block >= prune_log_prob
    allowed[:, symbols.BLANK] = False
    return [np.flatnonzero(row).tolist() for row in allowed]


def advance(prefixes: dict, row: list[float], labels: list[int], frame: int, scorer) -> dict:
    """The prefixes after one frame (`row`: its log-probabilities; `labels`: those that
    may grow a prefix), unpruned."""
    grown: dict[str, Prefix] = {}
    for prefix in prefixes.values():
        total = prefix.acoustic
        repeat = prefix.label + row[prefix.last] if prefix.last != symbols.BLANK else NEG_INF
        _stay(grown, prefix, total + row[symbols.BLANK], repeat)
        for label in labels:
            before = prefix.blank if label == prefix.last else total
            _grow(grown, prefix, label, before + row[label], frame, scorer)
    return grown


def _stay(grown: dict, prefix: Prefix, blank: float, label: float) -> None:
    """Adds the paths that keep `prefix` (ending in blank, or in its last label)."""
    reached = log_add(blank, label)
    if reached == NEG_INF:
        return
    entry = grown.get(prefix.labels)
    if entry is None:
        entry = grown[prefix.labels] = Prefix(
            prefix.labels, prefix.frames, prefix.last, prefix.lm, prefix.history, prefix.word
        )
    entry.blank, entry.label = log_add(entry.blank, blank), log_add(entry.label, label)
    if reached > entry.best:
        entry.frames, entry.best = prefix.frames, reached


def _grow(grown: dict, prefix: Prefix, label: int, reached: float, frame: int, scorer) -> None:
    """Adds the paths that grow `prefix` by `label` at `frame`."""
    if reached == NEG_INF:
        return
    labels, frames = prefix.labels + CHARACTERS[label], (frame, prefix.frames)
    entry = grown.get(labels)
    if entry is None:
        entry = grown[labels] = _child(prefix, label, labels, frames, scorer)
    entry.label = log_add(entry.label, reached)
    if reached > entry.best:
        entry.frames, entry.best = frames, reached


def _child(prefix: Prefix, label: int, labels: str, frames: Frames, scorer) -> Prefix:
    """The entry of `prefix` + `label`: a SPACE after an unfinished word completes it."""
    if label != symbols.SPACE:
        word = prefix.word + CHARACTERS[label]
        return Prefix(labels, frames, label, prefix.lm, prefix.history, word)
    if not prefix.word:
        return Prefix(labels, frames, label, prefix.lm, prefix.history, "")
    score, history = scorer.word(prefix.word, prefix.history)
    return Prefix(labels, frames, label, prefix.lm + score, history, "")


def prune(grown: dict, width: int) -> dict:
    """The `width` best prefixes, best first (`Prefix.rank`)."""
    kept = sorted(grown.values(), key=Prefix.rank)[:width]
    return {prefix.labels: prefix for prefix in kept}


def shared_final(prefixes: dict) -> int:
    """How many leading labels are final: through the last SPACE that every kept
    prefix shares (0: none)."""
    best = next(iter(prefixes.values())).labels
    if " " not in best:
        return 0
    common = os.path.commonprefix([prefix.labels for prefix in prefixes.values()])
    return common.rfind(" ") + 1


def frame_list(frames: Frames) -> list[int]:
    """The frames of a path, first first."""
    found = []
    while frames is not None:
        frame, frames = frames
        found.append(frame)
    return found[::-1]


def frame_chain(frames: list[int]) -> Frames:
    """`frame_list`'s inverse."""
    chain = None
    for frame in frames:
        chain = (frame, chain)
    return chain


def force_final(prefixes: dict, deadline: int) -> dict:
    """The prefixes that agree with the best one up to its last SPACE on a frame before
    `deadline` (all of them when it has none)."""
    best = next(iter(prefixes.values()))
    if " " not in best.labels:
        return prefixes
    keep = 0
    for i, frame in enumerate(frame_list(best.frames)):
        if frame >= deadline:
            break
        if best.labels[i] == " ":
            keep = i + 1
    head = best.labels[:keep]
    return {labels: prefix for labels, prefix in prefixes.items() if labels.startswith(head)}


def cut_final(prefixes: dict, cut: int) -> tuple[list[tuple[str, int]], dict]:
    """((character, frame) of the first `cut` labels on the best prefix's path, the
    prefixes without them)."""
    best = next(iter(prefixes.values()))
    final = list(zip(best.labels[:cut], frame_list(best.frames)[:cut], strict=True))
    for prefix in prefixes.values():
        prefix.labels = prefix.labels[cut:]
        prefix.frames = frame_chain(frame_list(prefix.frames)[cut:])
    return final, {prefix.labels: prefix for prefix in prefixes.values()}


def timed_words(final: list[tuple[str, int]], hop_s: float, emitted: float):
    """The words of final (character, frame) pairs, as greedy `decode.transcribe` times
    them but emitted at `emitted` s, and the characters with their frames' ends, as its
    `chars`: (words, chars)."""
    words, chars, current = [], [], []
    for character, frame in final:
        chars.append((character, decode.frame_time(frame + 1, hop_s)))
        if character != " ":
            current.append((character, frame))
        elif current:
            words.append(_word(current, hop_s, emitted))
            current = []
    if current:
        words.append(_word(current, hop_s, emitted))
    return words, chars


def _word(current: list[tuple[str, int]], hop_s: float, emitted: float) -> asr.TimedWord:
    """The word of (character, frame) pairs: from its first frame's start to its last
    frame's end."""
    start = decode.frame_time(current[0][1], hop_s)
    end = decode.frame_time(current[-1][1] + 1, hop_s)
    return asr.TimedWord("".join(c for c, _ in current), start, end, emitted)


class BeamDecoder:
    """One stream's causal beam search (see the module docstring): `step` over blocks of
    log-probabilities returns the words that became final, `close` the rest; `chars`
    holds every final character with its time, as `decode.Transcript.chars`. The search
    state is `state` (a `BeamState`); a closed decoder takes no more blocks."""

    def __init__(self, config: BeamConfig, *, hop_s: float, lm: lm.NgramModel | None = None):
        self.config = config
        self.hop_s = checks.require_number("hop_s", hop_s, above=0)
        delay = config.max_delay_s
        self.delay_frames = None if delay is None else math.ceil(delay / hop_s - 1e-9)
        self.scorer = WordScorer(lm, config.alpha, config.beta)
        self.state = initial_state()
        self.chars: list[tuple[str, float]] = []
        self.closed = False

    def step(self, log_probs) -> list[asr.TimedWord]:
        """Decodes a block (float [n, NUM_SYMBOLS] log-probabilities, n >= 0); returns
        the words that became final in it."""
        self._require_open()
        block = checked_log_probs(log_probs)
        labels = growing_labels(block, self.config.prune_log_prob)
        words = []
        for row, growing in zip(block.tolist(), labels, strict=True):
            words += self._frame(row, growing)
        return words

    def _frame(self, row: list[float], labels: list[int]) -> list[asr.TimedWord]:
        """One frame: advance, prune, cut and emit what became final."""
        state = self.state
        grown = advance(state.prefixes, row, labels, state.frame, self.scorer)
        if not grown:
            raise ValueError(f"log_probs: frame {state.frame} leaves no prefix possible")
        prefixes = prune(grown, self.config.width)
        state.frame += 1
        if self.delay_frames is not None:
            prefixes = force_final(prefixes, state.frame - self.delay_frames)
        cut = shared_final(prefixes)
        if cut:
            final, prefixes = cut_final(prefixes, cut)
            state.prefixes = prefixes
            return self._emit(final)
        state.prefixes = prefixes
        return []

    def _emit(self, final: list[tuple[str, int]]) -> list[asr.TimedWord]:
        """The words of `final`, emitted now; their characters go to `chars`."""
        emitted = decode.frame_time(self.state.frame, self.hop_s)
        words, chars = timed_words(final, self.hop_s, emitted)
        self.chars += chars
        return words

    def close(self) -> list[asr.TimedWord]:
        """Ends the stream: the best prefix's remaining words (the unfinished one and
        EOS scored), emitted at the end of the last frame."""
        self._require_open()
        closing = self.scorer.closing
        best = min(
            self.state.prefixes.values(),
            key=lambda prefix: (-(prefix.acoustic + prefix.lm + closing(prefix)), prefix.labels),
        )
        self.closed = True
        return self._emit(list(zip(best.labels, frame_list(best.frames), strict=True)))

    def _require_open(self) -> None:
        if self.closed:
            raise RuntimeError("BeamDecoder: the stream is closed; start a new decoder")

    def hypotheses(self) -> list[tuple[str, float, float]]:
        """(labels since the last final word as text, log P(frames, prefix), word-model
        score) of every kept prefix, best first: the search's current view."""
        return [(p.labels, p.acoustic, p.lm) for p in self.state.prefixes.values()]


def transcribe(
    log_probs, config: BeamConfig, *, hop_s: float, lm: lm.NgramModel | None = None
) -> decode.Transcript:
    """One whole stream (float [T, NUM_SYMBOLS] log-probabilities) decoded by a
    `BeamDecoder`: text, characters and timed words, as `decode.transcribe` gives them."""
    decoder = BeamDecoder(config, hop_s=hop_s, lm=lm)
    words = decoder.step(log_probs) + decoder.close()
    return decode.Transcript(" ".join(w.word for w in words), tuple(decoder.chars), tuple(words))
