"""Real speech recognition with pocketsphinx (its en-us model ships in the wheel).

- `recognize(waveform, config)`: streaming decoding, audio fed in `chunk_ms` blocks;
  the final timed words plus every partial hypothesis as it was known after each block,
  and for each final word the time at which it became stable (for causal text input).
- `align(waveform, words, config)`: forced alignment of known text (word start / end).
- `char_frames(words, num_frames)`: timed words -> a "character temporal softmax"
  [frames, symbols] at 20 ms (stride 2 against 10 ms audio frames): each word's letters
  spread over its span, blank elsewhere; `causal=True` places each word at the time the
  recogniser had emitted it instead, so a frame only holds what was known by then.

The recogniser's errors are real: on synthetic speech the general English language
model gets many words wrong (see `RecognizerConfig.language_model` to use another).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re

import numpy as np

from speechkit import channel

_FILLER = re.compile(r"^(<s>|</s>|<sil>|\[.*\]|\+\+.*\+\+)$")
_ALTERNATIVE = re.compile(r"\(\d+\)$")
ALPHABET = "abcdefghijklmnopqrstuvwxyz'"
BLANK, UNKNOWN = 0, len(ALPHABET) + 1  # symbol ids; letters are 1..len(ALPHABET)
NUM_SYMBOLS = len(ALPHABET) + 2
TEXT_FRAME_S = 0.02  # seconds per text frame: stride 2 against 10 ms audio frames


@dataclasses.dataclass(frozen=True)
class RecognizerConfig:
    """pocketsphinx settings; None means the model shipped with the wheel."""

    sample_rate: int = 16_000
    language_model: str | None = None  # ARPA or binary n-gram model
    dictionary: str | None = None  # pronunciation dictionary
    language_weight: float | None = None  # pocketsphinx `lw`
    beam: float | None = None  # pocketsphinx `beam` (wider = slower, fewer search errors)
    word_beam: float | None = None  # pocketsphinx `wbeam`
    phone_beam: float | None = None  # pocketsphinx `pbeam`
    chunk_ms: float = 100.0  # audio per streaming step

    def decoder_options(self) -> dict:
        options = {"samprate": self.sample_rate, "loglevel": "FATAL"}
        optional = {
            "lm": self.language_model,
            "dict": self.dictionary,
            "lw": self.language_weight,
            "beam": self.beam,
            "wbeam": self.word_beam,
            "pbeam": self.phone_beam,
        }
        options.update({k: v for k, v in optional.items() if v is not None})
        for key in ("lm", "dict"):
            if key in options and not os.path.exists(options[key]):
                raise FileNotFoundError(f"RecognizerConfig: {key} file {options[key]} not found")
        return options


@dataclasses.dataclass(frozen=True)
class TimedWord:
    word: str
    start: float  # seconds
    end: float  # seconds
    emitted: float | None = None  # seconds: when the streaming recogniser had it for good


@dataclasses.dataclass(frozen=True)
class Partial:
    time: float  # seconds of audio consumed
    text: str  # the hypothesis at that time


@dataclasses.dataclass(frozen=True)
class Recognition:
    words: tuple[TimedWord, ...]
    partials: tuple[Partial, ...]

    @property
    def text(self) -> str:
        return " ".join(w.word for w in self.words)


ALIGN_CONFIG = RecognizerConfig(beam=1e-100, word_beam=1e-80, phone_beam=1e-100)
"""Forced alignment of synthetic or noisy speech needs much wider beams than decoding."""


class _Decoder:
    """A pocketsphinx decoder that starts every utterance from the same state.

    pocketsphinx adapts its feature normalisation (live CMN) from utterance to utterance,
    so results would depend on what was decoded before; re-initialising the feature
    extraction before each utterance makes them reproducible.
    """

    def __init__(self, config: RecognizerConfig):
        from pocketsphinx import Decoder

        self.decoder = Decoder(**config.decoder_options())
        self.frame_rate = float(self.decoder.config["frate"])

    def start(self):
        self.decoder.reinit_feat()
        self.decoder.start_utt()
        return self.decoder


@functools.lru_cache(maxsize=4)
def _decoder(config: RecognizerConfig) -> _Decoder:
    return _Decoder(config)


def _pcm(waveform, name: str = "waveform") -> bytes:
    waveform = channel.as_waveform(name, waveform)
    if waveform.size == 0:
        raise ValueError(f"{name}: expected a non-empty mono waveform, got shape {waveform.shape}")
    return (np.clip(waveform, -1.0, 1.0) * 32767).astype("<i2").tobytes()


def _segments(decoder, frame_rate: float) -> list[TimedWord]:
    words = []
    for segment in decoder.seg():
        if _FILLER.match(segment.word):
            continue
        word = _ALTERNATIVE.sub("", segment.word)
        words.append(
            TimedWord(word, segment.start_frame / frame_rate, (segment.end_frame + 1) / frame_rate)
        )
    return words


def _stable_times(final: list[str], partials: list[Partial], end: float) -> list[float]:
    """For word i, the first partial from which every later hypothesis starts with
    final[: i + 1] (the end of the audio if it only settled at the end)."""
    times = []
    for i in range(len(final)):
        prefix = final[: i + 1]
        settled = end
        for partial in reversed(partials):
            if partial.text.split()[: i + 1] != prefix:
                break
            settled = partial.time
        times.append(settled)
    return times


def recognize(waveform, config: RecognizerConfig = RecognizerConfig()) -> Recognition:
    """Streams `waveform` (float [samples] at config.sample_rate) through pocketsphinx."""
    pcm = _pcm(waveform)
    state = _decoder(config)
    step = max(1, int(config.sample_rate * config.chunk_ms / 1000)) * 2  # bytes
    partials = []
    decoder = state.start()
    for offset in range(0, len(pcm), step):
        decoder.process_raw(pcm[offset : offset + step], False, False)
        hypothesis = decoder.hyp()
        consumed = min(offset + step, len(pcm)) / 2 / config.sample_rate
        text = " ".join(
            _ALTERNATIVE.sub("", w) for w in (hypothesis.hypstr.split() if hypothesis else [])
        )
        partials.append(Partial(consumed, text))
    decoder.end_utt()
    words = _segments(decoder, state.frame_rate)
    end = len(pcm) / 2 / config.sample_rate
    stable = _stable_times([w.word for w in words], partials, end)
    words = [
        dataclasses.replace(w, emitted=max(t, w.end)) for w, t in zip(words, stable, strict=True)
    ]
    return Recognition(tuple(words), tuple(partials))


def normalise(text: str) -> list[str]:
    """Lower-case words as the dictionary spells them (letters and apostrophes)."""
    return re.findall(r"[a-z']+", text.lower())


def align(waveform, words, config: RecognizerConfig = ALIGN_CONFIG):
    """Forced alignment of `words` (a string or list) to the waveform.

    Returns one TimedWord per word that pocketsphinx aligned, in order. Alignment of
    synthetic or noisy speech can stop early: the result may cover only a prefix of the
    words; callers compare lengths. Raises ValueError for words missing from the
    dictionary.
    """
    pcm = _pcm(waveform)
    words = normalise(words) if isinstance(words, str) else [w.lower() for w in words]
    if not words:
        raise ValueError("align: no words to align")
    state = _decoder(config)
    missing = [w for w in words if state.decoder.lookup_word(w) is None]
    if missing:
        raise ValueError(f"align: not in the pronunciation dictionary: {missing}")
    state.decoder.set_align_text(" ".join(words))
    try:
        decoder = state.start()
        decoder.process_raw(pcm, False, True)
        decoder.end_utt()
        aligned = _segments(decoder, state.frame_rate) if decoder.hyp() else []
    finally:
        state.decoder.activate_search()  # back to the language model for `recognize`
    return tuple(aligned)


def _symbol(character: str) -> int:
    index = ALPHABET.find(character)
    return index + 1 if index >= 0 else UNKNOWN


def char_frames(
    words, num_frames: int, *, frame_s: float = TEXT_FRAME_S, causal: bool = False
) -> np.ndarray:
    """Timed words -> character posteriors, float32 [num_frames, NUM_SYMBOLS].

    Each word's letters are spread evenly over the frames of its span (a frame shared by
    several letters splits its mass between them); frames outside every word are blank.
    causal=True moves each word's span to start where the recogniser emitted it
    (`TimedWord.emitted`), so frame t only holds what was known at time t. Letters
    outside ALPHABET map to UNKNOWN. Every row sums to 1.
    """
    frames = np.zeros((num_frames, NUM_SYMBOLS), np.float32)
    covered = np.zeros(num_frames, bool)
    for word in words:
        letters = [_symbol(c) for c in word.word.lower()]
        if not letters:
            continue
        start, end = word.start, word.end
        if causal:
            if word.emitted is None:
                raise ValueError(f"char_frames: causal=True needs emission times ({word.word!r})")
            start, end = word.emitted, word.emitted + (word.end - word.start)
        first = int(np.floor(start / frame_s + 1e-9))
        last = max(first + 1, int(np.ceil(end / frame_s - 1e-9)))  # exclusive
        span = np.arange(first, last)
        keep = (span >= 0) & (span < num_frames)
        if not keep.any():
            continue
        row = np.zeros((span.size, NUM_SYMBOLS), np.float32)
        if len(letters) >= span.size:  # several letters per frame
            owner = np.arange(len(letters)) * span.size // len(letters)
            np.add.at(row, (owner, letters), 1.0)
        else:  # each letter over several frames
            row[
                np.arange(span.size),
                np.array(letters)[np.arange(span.size) * len(letters) // span.size],
            ] = 1.0
        row /= row.sum(axis=1, keepdims=True)
        frames[span[keep]] = row[keep]
        covered[span[keep]] = True
    frames[~covered, BLANK] = 1.0
    return frames
