"""Real speech recognition with pocketsphinx (its en-us model ships in the wheel).

- `recognise(waveform, config)`: streaming decoding as a live system does it: an
  endpointer cuts the stream into utterances at pauses, and each word is emitted as soon
  as it stopped changing, at the latest when its utterance ends.
- `align(waveform, words, config)`: forced alignment of known text (word start / end).
- `char_frames(words, num_frames)`: timed words -> a "character temporal softmax"
  [frames, symbols] at 20 ms; `causal=True` places each word at its emission time.
- `emission_report(calls)`: emission lag and causal text coverage of a corpus, for the
  build reports.

Specification: docs/architecture.md, "The recogniser and the causal text stream", and
docs/speechkit.md, "asr".
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re

import numpy as np

from speechkit import checks, dsp

_FILLER = re.compile(r"^(<s>|</s>|<sil>|\[.*\]|\+\+.*\+\+)$")
_ALTERNATIVE = re.compile(r"\(\d+\)$")
ALPHABET = "abcdefghijklmnopqrstuvwxyz'"
BLANK, UNKNOWN = 0, len(ALPHABET) + 1  # symbol ids; letters are 1..len(ALPHABET)
NUM_SYMBOLS = len(ALPHABET) + 2
TEXT_FRAME_S = 0.02  # seconds per text frame: stride 2 against 10 ms audio frames


@dataclasses.dataclass(frozen=True)
class RecogniserConfig:
    """pocketsphinx settings; None means the model's (or pocketsphinx's) own default."""

    sample_rate: int = 16_000
    language_model: str | None = None  # ARPA or binary n-gram model
    dictionary: str | None = None  # pronunciation dictionary
    # pocketsphinx `lw`. 8.5 is its default weight for the second (fwdflat) pass; with
    # the later passes off, the one pass gets it (6.5, the first-pass default, lost
    # about 2 WER points on the synthetic calls).
    language_weight: float | None = 8.5
    # pocketsphinx `beam`, `wbeam`, `pbeam` (wider = fewer search errors). Wider than its
    # defaults (1e-48, 7e-29, 1e-48): 1.5 WER points better on the synthetic calls at
    # about the same speed.
    beam: float | None = 1e-80
    word_beam: float | None = 1e-60
    phone_beam: float | None = 1e-80
    # pocketsphinx's fwdflat and bestpath passes at the end of each utterance. They
    # revise the words after the partials were shown, so a word could only count as
    # emitted at the utterance's end; off, the final words are the last partial's.
    final_passes: bool = False
    # The endpointer: an utterance starts / ends when `endpoint_ratio` of the last
    # `endpoint_window_s` seconds is speech / non-speech (the window is its delay).
    endpoint_window_s: float = 0.3
    endpoint_ratio: float = 0.9
    vad_mode: int = 0  # voice-activity aggressiveness, 0 (loose) .. 3 (strict)

    def __post_init__(self):
        field = "RecogniserConfig.{}".format
        checks.require_number(field("endpoint_ratio"), self.endpoint_ratio, above=0, at_most=1)
        checks.require_number(
            field("endpoint_window_s"), self.endpoint_window_s, above=0, at_most=5
        )
        checks.require_int(field("vad_mode"), self.vad_mode, at_least=0, at_most=3)

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
        if not self.final_passes:
            options.update(fwdflat=False, bestpath=False)
        for key in ("lm", "dict"):
            if key in options and not os.path.exists(options[key]):
                raise FileNotFoundError(f"RecogniserConfig: {key} file {options[key]} not found")
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
    text: str  # the whole hypothesis at that time (earlier utterances' words included)


@dataclasses.dataclass(frozen=True)
class Utterance:
    start: float  # seconds: where the endpointer put the start of speech
    end: float  # seconds: where it put the end of speech
    decided: float  # seconds of audio consumed when the utterance was closed


@dataclasses.dataclass(frozen=True)
class Recognition:
    words: tuple[TimedWord, ...]
    partials: tuple[Partial, ...]
    utterances: tuple[Utterance, ...] = ()

    @property
    def text(self) -> str:
        return " ".join(w.word for w in self.words)


ALIGN_CONFIG = RecogniserConfig(
    beam=1e-100, word_beam=1e-80, phone_beam=1e-100, language_weight=None, final_passes=True
)
"""Forced alignment of synthetic or noisy speech needs much wider beams than decoding
(pocketsphinx's own defaults otherwise)."""


class _Decoder:
    """A pocketsphinx decoder that starts every call (or alignment) from the same state.

    pocketsphinx adapts its feature normalisation (live CMN) from utterance to utterance,
    so results would depend on what was decoded before; re-initialising the feature
    extraction before each call makes them reproducible. Within a call it adapts, as a
    live recogniser does.
    """

    def __init__(self, config: RecogniserConfig):
        from pocketsphinx import Decoder

        self.decoder = Decoder(**config.decoder_options())
        self.frame_rate = float(self.decoder.config["frate"])

    def start(self):
        self.decoder.reinit_feat()
        self.decoder.start_utt()
        return self.decoder


@functools.lru_cache(maxsize=4)
def _decoder(config: RecogniserConfig) -> _Decoder:
    return _Decoder(config)


def _pcm(waveform, name: str = "waveform") -> bytes:
    waveform = dsp.as_waveform(name, waveform)
    if waveform.size == 0:
        raise ValueError(f"{name}: expected a non-empty mono waveform, got shape {waveform.shape}")
    return (np.clip(waveform, -1.0, 1.0) * 32767).astype("<i2").tobytes()


def _segments(decoder, frame_rate: float, offset: float = 0.0) -> list[TimedWord]:
    """The final words of the utterance, times in seconds plus `offset`."""
    words = []
    for segment in decoder.seg():
        if _FILLER.match(segment.word):
            continue
        word = _ALTERNATIVE.sub("", segment.word)
        start, end = segment.start_frame / frame_rate, (segment.end_frame + 1) / frame_rate
        words.append(TimedWord(word, offset + start, offset + end))
    return words


def _hypothesis(decoder) -> list[str]:
    hypothesis = decoder.hyp()
    return [_ALTERNATIVE.sub("", w) for w in (hypothesis.hypstr.split() if hypothesis else [])]


def _stable_times(final: list[str], partials: list[tuple[float, list[str]]], end: float):
    """For word i, the first partial from which every later partial starts with
    final[: i + 1]; `end` (the utterance's close) if it only settled then."""
    times = []
    for i in range(len(final)):
        prefix = final[: i + 1]
        settled = end
        for time_s, words in reversed(partials):
            if words[: i + 1] != prefix:
                break
            settled = time_s
        times.append(settled)
    return times


class _Utterances:
    """Decodes the endpointer's speech frames utterance by utterance, collecting words
    with emission times, partials and utterance bounds."""

    def __init__(self, state: _Decoder):
        self.state, self.decoder = state, state.decoder
        self.words: list[TimedWord] = []
        self.final_text = ""  # the words of the closed utterances, joined
        self.partials: list[Partial] = []
        self.utterances: list[Utterance] = []
        self.current: list[tuple[float, list[str]]] | None = None  # this utterance's partials
        self.start = 0.0

    def feed(self, speech: bytes, start: float, now: float) -> None:
        if self.current is None:
            self.decoder.start_utt()
            self.current, self.start = [], start
        self.decoder.process_raw(speech, False, False)
        words = _hypothesis(self.decoder)
        self.current.append((now, words))
        self.partials.append(Partial(now, " ".join(filter(None, (self.final_text, *words)))))

    def close(self, end: float, now: float) -> None:
        if self.current is None:
            return
        self.decoder.end_utt()
        final = _segments(self.decoder, self.state.frame_rate, self.start)
        settled = _stable_times([w.word for w in final], self.current, now)
        self.words += [
            dataclasses.replace(w, emitted=max(t, w.end))
            for w, t in zip(final, settled, strict=True)
        ]
        self.final_text = " ".join(filter(None, (self.final_text, *(w.word for w in final))))
        self.utterances.append(Utterance(self.start, end, now))
        self.current = None
        # What was known at `now` is the final result, not the partial before it.
        if self.partials and self.partials[-1].time == now:
            self.partials.pop()
        self.partials.append(Partial(now, self.final_text))


def recognise(waveform, config: RecogniserConfig = RecogniserConfig()) -> Recognition:
    """Streams `waveform` (float [samples] at config.sample_rate) through the endpointer
    and pocketsphinx, one endpointer frame (30 ms) at a time (see the module docstring).

    Times are seconds from the start of the waveform; `emitted` and the partials' times
    count the audio consumed when the recogniser knew them (the endpointer's delay
    included).
    """
    from pocketsphinx import Endpointer

    pcm = _pcm(waveform)
    state = _decoder(config)
    state.decoder.reinit_feat()
    endpointer = Endpointer(
        window=config.endpoint_window_s,
        ratio=config.endpoint_ratio,
        vad_mode=config.vad_mode,
        sample_rate=config.sample_rate,
    )
    step = endpointer.frame_bytes
    run = _Utterances(state)
    for offset in range(0, len(pcm), step):
        frame = pcm[offset : offset + step]
        now = (offset + len(frame)) / 2 / config.sample_rate
        last = offset + step >= len(pcm)
        speech = endpointer.end_stream(frame) if last else endpointer.process(frame)
        if speech is not None:
            if speech:
                run.feed(speech, endpointer.speech_start, now)
            if not endpointer.in_speech:
                run.close(endpointer.speech_end, now)
    run.close(len(pcm) / 2 / config.sample_rate, len(pcm) / 2 / config.sample_rate)
    return Recognition(tuple(run.words), tuple(run.partials), tuple(run.utterances))


def normalise_words(text: str) -> list[str]:
    """Lower-case words as the dictionary spells them (letters and apostrophes)."""
    return re.findall(r"[a-z']+", text.lower())


def align(waveform, words, config: RecogniserConfig = ALIGN_CONFIG):
    """Forced alignment of `words` (a string or list) to the waveform.

    Returns one TimedWord per word that pocketsphinx aligned, in order. Alignment of
    synthetic or noisy speech can stop early: the result may cover only a prefix of the
    words; callers compare lengths. Raises ValueError for words missing from the
    dictionary.
    """
    pcm = _pcm(waveform)
    words = normalise_words(words) if isinstance(words, str) else [w.lower() for w in words]
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
        state.decoder.activate_search()  # back to the language model for `recognise`
    return tuple(aligned)


def _symbol(character: str) -> int:
    index = ALPHABET.find(character)
    return index + 1 if index >= 0 else UNKNOWN


def _frame_spans(words, frame_s: float, causal: bool) -> list[tuple[TimedWord, int, int]]:
    """(word, first frame, end frame exclusive) of every word.

    Offline: the word's own [start, end). Causal: the same number of frames, starting at
    the word's emission, in emission order, each after the one before: words emitted
    together (an utterance's last words) follow each other the way a screen appends
    them, instead of overwriting each other.
    """
    spans, cursor = [], None
    if causal:
        missing = [w.word for w in words if w.emitted is None]
        if missing:
            raise ValueError(f"char_frames: causal=True needs emission times ({missing[0]!r})")
        words = sorted(words, key=lambda w: (w.emitted, w.start))
    for word in words:
        first = int(np.floor(word.start / frame_s + 1e-9))
        last = max(first + 1, int(np.ceil(word.end / frame_s - 1e-9)))  # exclusive
        if causal:
            length = last - first
            first = int(np.floor(word.emitted / frame_s + 1e-9))
            first = first if cursor is None else max(first, cursor)
            last = cursor = first + length
        spans.append((word, first, last))
    return spans


def char_frames(
    words, num_frames: int, *, frame_s: float = TEXT_FRAME_S, causal: bool = False
) -> np.ndarray:
    """Timed words -> character posteriors, float32 [num_frames, NUM_SYMBOLS].

    Each word's letters are spread evenly over the frames of its span (a frame shared by
    several letters splits its mass between them); frames outside every word are blank.
    causal=True moves each word's span to start where the recogniser emitted it
    (`TimedWord.emitted`) or, if the word before it still occupies that frame, right
    after that word, so frame t only holds what was known at time t and no word hides
    another. Spans past the last frame are cut. Letters outside ALPHABET map to UNKNOWN.
    Every row sums to 1.
    """
    frames = np.zeros((num_frames, NUM_SYMBOLS), np.float32)
    covered = np.zeros(num_frames, bool)
    for word, first, last in _frame_spans(words, frame_s, causal):
        letters = [_symbol(c) for c in word.word.lower()]
        span = np.arange(first, last)
        keep = (span >= 0) & (span < num_frames)
        if not letters or not keep.any():
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


def _letter_frames(words, num_frames: int, causal: bool) -> int:
    """How many of the num_frames text frames hold letters (are not all blank)."""
    return int((char_frames(words, num_frames, causal=causal)[:, BLANK] < 1.0).sum())


def emission_report(calls) -> dict:
    """What a causal text stream holds over a corpus.

    `calls`: iterable of (words, num_text_frames) per call, words with emission times.
    Returns the words' emission lag (`emitted - end`, seconds: median, 90th percentile,
    share within 1 s and 2 s), the share of words emitted only after their call's audio
    ended (never seen by a causal model), and the share of non-blank text frames
    `causal` (as a streaming model sees them) and `offline` (words at their own times).
    """
    lags, late, frames, causal, offline = [], 0, 0, 0, 0
    for words, num_frames in calls:
        words = list(words)
        lags += [w.emitted - w.end for w in words]
        late += sum(w.emitted >= num_frames * TEXT_FRAME_S for w in words)
        frames += num_frames
        causal += _letter_frames(words, num_frames, causal=True)
        offline += _letter_frames(words, num_frames, causal=False)
    lags = np.asarray(lags, np.float64)
    if not lags.size:
        raise ValueError("emission_report: no recognised words in the corpus")
    return {
        "words": int(lags.size),
        "lag_median_s": float(np.median(lags)),
        "lag_p90_s": float(np.percentile(lags, 90)),
        "within_1s": float(np.mean(lags <= 1.0)),
        "within_2s": float(np.mean(lags <= 2.0)),
        "emitted_after_call_end": late / lags.size,
        "nonblank_text_frames_causal": causal / max(frames, 1),
        "nonblank_text_frames_offline": offline / max(frames, 1),
    }
