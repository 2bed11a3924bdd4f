"""Greedy causal CTC decoding with emission times, and the recogniser's error rates.

    emit, symbol = greedy(logits, mask)                       # jittable, [B, T] each
    state = initial_state(batch); emit, symbol, state = step(logits, mask, state)
    transcript = transcribe(emit[0], symbol[0], hop_s=0.02)  # Transcript(text, chars, words)
    posteriors = text_posteriors(logits)                      # [B, T, 29], MultiQT's text

A frame's best symbol is emitted when it is not blank and differs from the previous valid
frame's; nothing after frame t is needed, so `step` over blocks equals `greedy` over the
whole stream. Characters and words carry the time they were emitted
(`speechkit.asr.TimedWord`). `text_posteriors` is the soft output, the paper's MultiQT
input. Specification (collapse, masks, emission times, word spans):
docs/models.md#the-character-recogniser ("Decoding").
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ctc_jax import symbols
from speechkit import asr
from speechkit.error_rates import error_rate


@dataclasses.dataclass(frozen=True)
class Transcript:
    text: str  # words joined by single spaces
    chars: tuple[tuple[str, float], ...]  # (character, emission time s), spaces included
    words: tuple[asr.TimedWord, ...]  # start / end / emitted in seconds


def initial_state(batch_size: int) -> jax.Array:
    """int32 [B]: the best symbol of the last valid frame (blank before any)."""
    return jnp.full((batch_size,), symbols.BLANK, jnp.int32)


def step(logits, mask, state):
    """One block of logits float [B, n, V] and mask bool [B, n] (None: all valid) ->
    (emit bool [B, n], symbol int32 [B, n], state)."""
    best = jnp.argmax(logits, axis=-1).astype(jnp.int32)
    mask = jnp.ones(best.shape, bool) if mask is None else jnp.asarray(mask, bool)

    def one(previous, frame):
        symbol, valid = frame
        emit = valid & (symbol != symbols.BLANK) & (symbol != previous)
        return jnp.where(valid, symbol, previous), emit

    state, emit = jax.lax.scan(one, state, (best.T, mask.T))
    return emit.T, best, state


def text_posteriors(logits):
    """Character posteriors in `speechkit.asr`'s columns: logits float [..., T, 30] ->
    float32 [..., T, speechkit.asr.NUM_SYMBOLS], the softmax with the word boundary's
    probability added to blank's (`speechkit.asr.char_frames` renders the frames between
    words as blank). Rows sum to 1."""
    probabilities = jax.nn.softmax(jnp.asarray(logits, jnp.float32), axis=-1)
    columns = probabilities[..., : asr.NUM_SYMBOLS]
    return columns.at[..., symbols.BLANK].add(probabilities[..., symbols.SPACE])


def greedy(logits, mask=None):
    """Whole streams: logits float [B, T, V], mask bool [B, T] -> (emit bool [B, T],
    symbol int32 [B, T]); see the module docstring."""
    emit, symbol, _ = step(logits, mask, initial_state(jnp.shape(logits)[0]))
    return emit, symbol


def transcribe(emit, symbol, *, hop_s: float) -> Transcript:
    """One stream's greedy output (emit bool [T], symbol int [T]) as text, characters and
    timed words (host side)."""
    emit, symbol = np.asarray(emit, bool), np.asarray(symbol)
    if emit.shape != symbol.shape or emit.ndim != 1:
        raise ValueError(f"transcribe: emit {emit.shape} and symbol {symbol.shape}, expected [T]")
    chars, words, current = [], [], []
    for t in np.flatnonzero(emit):
        character = symbols.character(symbol[t])
        chars.append((character, frame_time(t + 1, hop_s)))
        if character == " ":
            _close(current, words, hop_s)
        else:
            current.append((character, int(t)))
    _close(current, words, hop_s)
    return Transcript(" ".join(w.word for w in words), tuple(chars), tuple(words))


def _close(current: list, words: list, hop_s: float) -> None:
    """Appends the word of `current` (characters and frames) to `words`, emptying it."""
    if not current:
        return
    first, last = current[0][1], current[-1][1]
    end = frame_time(last + 1, hop_s)
    words.append(asr.TimedWord("".join(c for c, _ in current), frame_time(first, hop_s), end, end))
    current.clear()


def frame_time(frames: int, hop_s: float) -> float:
    """Seconds at the start of output frame `frames`, to the microsecond (the times of
    `transcribe` and of `ctc_jax.beam`)."""
    return round(float(frames) * hop_s, 6)


def error_rates(references, hypotheses) -> dict[str, float]:
    """{"cer", "wer"} of hypothesis texts against reference texts (both normalised with
    `ctc_jax.symbols.normalise_text`); CER counts the spaces between words as
    characters."""
    references = [symbols.normalise_text(t) for t in references]
    hypotheses = [symbols.normalise_text(t) for t in hypotheses]
    return {
        "cer": error_rate(references, hypotheses),
        "wer": error_rate([r.split() for r in references], [h.split() for h in hypotheses]),
    }
