"""Word timings from what each engine reports, matched to the words of the input text.

espeak-ng gives word events (sample-exact onsets) but sometimes folds a short function
word into its neighbour's event ("of the emergency" gives events for "of" and
"emergency" only): such words share their group's span, split in proportion to their
letters, and carry `exact=False` (`espeak_words`). Piper gives phoneme durations,
grouped into words between spaces; a sentence whose phoneme words do not match its text
words gets letter-proportional estimates inside its sounding span (`piper_words`).
Festival gives its own words, which are the text's unless it expanded a number or an
abbreviation (`festival_words`). Times are seconds from the start of the waveform.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

_WORD = re.compile(r"[\w']+")
_SENTENCE = re.compile(r"[^.!?]*[^.!?\s][^.!?]*[.!?]*|[.!?]+")


@dataclasses.dataclass(frozen=True)
class WordTiming:
    """One word of the input text and where it is in the audio."""

    text: str
    start: float  # seconds
    end: float  # seconds
    char_start: int  # offset of the word in the input text
    exact: bool  # False when espeak folded it into a neighbour's event (start/end estimated)


def words_of(text: str, offset: int = 0) -> list[tuple[str, int]]:
    """(word, char offset + `offset`) of each word of `text`."""
    return [(m.group(), offset + m.start()) for m in _WORD.finditer(text)]


def sentences(text: str) -> list[tuple[int, str]]:
    """(char offset, sentence) of each sentence of `text` that has a word."""
    return [(m.start(), m.group()) for m in _SENTENCE.finditer(text) if _WORD.search(m.group())]


def _trim_silence(waveform: np.ndarray, start: int, end: int, threshold: float) -> int:
    """Last sample in [start, end) above the threshold (+1), or start if none."""
    loud = np.flatnonzero(np.abs(waveform[start:end]) > threshold)
    return start + int(loud[-1]) + 1 if loud.size else start


def espeak_words(text, waveform, events, rate) -> tuple[WordTiming, ...]:
    """The words of `text` in `waveform` (float [samples] at `rate` Hz) from espeak's word
    events [(0-based char offset, sample)]; words without an event share the span of
    the event before them (`exact=False`), which ends where its sound does."""
    tokens = words_of(text)
    if not tokens:
        return ()
    onsets = sorted(events) or [(tokens[0][1], 0)]
    onsets[0] = (min(onsets[0][0], tokens[0][1]), onsets[0][1])  # leading tokens join
    boundaries = [sample for _, sample in onsets[1:]] + [waveform.shape[0]]
    threshold = 0.02 * max(float(np.abs(waveform).max(initial=0.0)), 1e-9)
    groups: dict[int, list[tuple[str, int]]] = {}
    for token, offset in tokens:
        group = max(i for i, (char, _) in enumerate(onsets) if char <= offset)
        groups.setdefault(group, []).append((token, offset))
    words = []
    for group, members in sorted(groups.items()):
        start = onsets[group][1]
        end = max(_trim_silence(waveform, start, boundaries[group], threshold), start + 1)
        letters = np.cumsum([0] + [len(token) for token, _ in members])
        for k, (token, offset) in enumerate(members):
            word_start = start + (end - start) * letters[k] / letters[-1]
            word_end = start + (end - start) * letters[k + 1] / letters[-1]
            words.append(
                WordTiming(
                    token,
                    float(word_start / rate),
                    float(word_end / rate),
                    offset,
                    len(members) == 1,
                )
            )
    return tuple(words)


def estimated(tokens, waveform, start: int, end: int, rate: int) -> list[WordTiming]:
    """Words spread over the sounding part of [start, end) samples, in proportion to
    their letters (exact=False), or exact when there is one word."""
    threshold = 0.02 * max(float(np.abs(waveform).max(initial=0.0)), 1e-9)
    loud = np.flatnonzero(np.abs(waveform[start:end]) > threshold)
    if loud.size:
        start, end = start + int(loud[0]), start + int(loud[-1]) + 1
    end = max(end, start + 1)
    letters = np.cumsum([0] + [len(token) for token, _ in tokens])
    return [
        WordTiming(
            token,
            float((start + (end - start) * letters[k] / letters[-1]) / rate),
            float((start + (end - start) * letters[k + 1] / letters[-1]) / rate),
            offset,
            len(tokens) == 1,
        )
        for k, (token, offset) in enumerate(tokens)
    ]


def phoneme_words(phonemes: list[tuple[str, int]]) -> list[tuple[int, int]]:
    """(start, end) samples of each word of Piper's phoneme durations: words are the runs
    between spaces, sentence marks ("^", "$") and punctuation, which hold pauses."""
    spans, cursor, current = [], 0, None
    for phoneme, samples in phonemes:
        if phoneme in (" ", "^", "$") or not any(c.isalpha() for c in phoneme):
            if current is not None and phoneme in (" ", "^", "$"):
                spans.append(current)
                current = None
        elif phoneme not in ("ˈ", "ˌ", "ː"):
            current = (cursor if current is None else current[0], cursor + samples)
        elif current is not None:
            current = (current[0], cursor + samples)
        cursor += samples
    if current is not None:
        spans.append(current)
    return spans


def piper_words(spoken, pieces, rate: int) -> tuple[WordTiming, ...]:
    """The words of Piper's sentences, timed in their concatenated waveform.

    spoken: (char offset, sentence) of each sentence (`sentences`); pieces: per sentence
    (float32 samples, [(phoneme, samples)]) as Piper gave them; rate in Hz.
    """
    words, cursor = [], 0
    for (offset, sentence), (samples, phonemes) in zip(spoken, pieces, strict=True):
        tokens = words_of(sentence, offset)
        spans = phoneme_words(phonemes)
        if len(spans) == len(tokens) and sum(n for _, n in phonemes) == samples.size:
            words += [
                WordTiming(token, (cursor + a) / rate, (cursor + b) / rate, char, True)
                for (token, char), (a, b) in zip(tokens, spans, strict=True)
            ]
        else:  # the phonemiser joined or split words here: estimates in the sentence
            sentence_words = estimated(tokens, samples, 0, samples.size, rate)
            words += [
                dataclasses.replace(w, start=w.start + cursor / rate, end=w.end + cursor / rate)
                for w in sentence_words
            ]
        cursor += samples.size
    return tuple(words)


def festival_words(text: str, waveform, rate: int, spoken) -> tuple[WordTiming, ...]:
    """The words of `text` timed by Festival's [(word, start_s, end_s)] (`spoken`, as
    `festival.synthesize` gives them), or letter-proportional estimates over `waveform`
    (float [samples] at `rate` Hz) when Festival's words are not the text's (e.g. a
    number it expanded)."""
    tokens = words_of(text)
    if [w.lower() for w, _, _ in spoken] == [t.lower() for t, _ in tokens]:
        return tuple(
            WordTiming(token, start, end, char, True)
            for (token, char), (_, start, end) in zip(tokens, spoken, strict=True)
        )
    return tuple(estimated(tokens, waveform, 0, waveform.size, rate))
