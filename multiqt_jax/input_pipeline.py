"""MultiQT input pipeline: Grain over a `tfds.data_source`, padded masked batches.

    source = tfds.data_source("synthetic_calls/questions-quick", data_dir=DIR)["train"]
    index = CorpusIndex.read(source)
    train = index.select(folds=(0, 1, 2, 3))
    dataset = batches(source, PipelineConfig(), seed=0, indices=train, index=index)
    batch = next(iter(dataset))         # grain iterator: get_state() / set_state()

Order and bucketing are `speechkit.batching.epoch_plan`'s (same seed -> same batches);
this module adds what is MultiQT's: records -> examples (`to_example`, text frames from
the recognised words), the corpus index of folds and lengths (`CorpusIndex`) and the
batch fields (`collate`). Specification (the batch fields and shapes, the order):
docs/corpora.md#synthetic-calls-multiqt.
"""

from __future__ import annotations

import dataclasses
import zlib

import grain.python as grain
import numpy as np

from multiqt_jax.datasets.features import recognised_words, spoken_words
from speechkit import asr, batching, checks

WORD_SOURCES = ("recognised", "spoken")


@dataclasses.dataclass(frozen=True)
class TextAlterations:
    """Alterations of the text input for the studies (`experiments.studies`): which words,
    how late, how wrong. The defaults leave the recogniser's output as it is.

    source: "recognised" (the asr_* fields) or "spoken" (the spoken_* oracle transcript of
      synthetic_calls, each word emitted at its true end: a perfect streaming recogniser).
    lag_s: every word emitted this many seconds later (causal text only).
    substitution_rate: the share of words replaced by another word of the same call
      (drawn per call from its call_id, so every epoch and fold sees the same errors):
      a recogniser with this word error rate over the `source` words, all of it substitutions.
    """

    source: str = "recognised"
    lag_s: float = 0.0
    substitution_rate: float = 0.0

    def __post_init__(self):
        checks.require_choice("TextAlterations.source", self.source, WORD_SOURCES)
        checks.require_number("TextAlterations.lag_s", self.lag_s, at_least=0)
        checks.require_number(
            "TextAlterations.substitution_rate", self.substitution_rate, at_least=0, at_most=1
        )

    def check(self, causal_text: bool, where: str) -> None:
        """An emission lag needs the causal stream (offline words have no emission)."""
        if self.lag_s and not causal_text:
            raise ValueError(
                f"{where}: {self.lag_s} s of emission lag needs the causal text stream"
            )

    @property
    def altered(self) -> bool:
        return self != TextAlterations()


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    batch_size: int = 8
    num_epochs: int = 1
    shuffle: bool = True
    bucket_window: int = 8  # batches per length-sorting window (1 = no bucketing)
    pad_multiple: int = 100  # pad frames to a multiple of this (bounds jit shapes)
    causal_text: bool = True  # text frames hold only what the recogniser had emitted
    text: TextAlterations = TextAlterations()  # the studies' alterations of the text input
    drop_remainder: bool = False

    def __post_init__(self):
        for name in ("batch_size", "num_epochs", "bucket_window", "pad_multiple"):
            checks.require_int(f"PipelineConfig.{name}", getattr(self, name), at_least=1)
        self.text.check(self.causal_text, "PipelineConfig.text")
        if self.pad_multiple % 2:
            raise ValueError("PipelineConfig.pad_multiple: must be even (text frames are 2 steps)")

    @property
    def batching_config(self) -> batching.BatchingConfig:
        """The shared epoch plan: bucketed, and batches shuffled whenever examples are."""
        return batching.BatchingConfig.bucketed(self)


@dataclasses.dataclass(frozen=True)
class CorpusIndex:
    """Per-record fold and length (10 ms frames), read once from a data source."""

    folds: np.ndarray  # int32 [N]
    frames: np.ndarray  # int32 [N]

    @classmethod
    def read(cls, source) -> CorpusIndex:
        folds, frames = [], []
        for i in range(len(source)):
            record = source[i]
            folds.append(int(record["fold"]))
            frames.append(int(np.shape(record["audio"])[0]))
        return cls(np.asarray(folds, np.int32), np.asarray(frames, np.int32))

    def select(self, folds) -> np.ndarray:
        """Record indices whose fold is in `folds`, int64 [n]."""
        unknown = set(folds) - set(np.unique(self.folds).tolist())
        if unknown:
            raise ValueError(
                f"folds: {sorted(unknown)} not in the corpus ({np.unique(self.folds)})"
            )
        return np.flatnonzero(np.isin(self.folds, list(folds)))


def to_example(
    record, causal_text: bool, text: TextAlterations = TextAlterations()
) -> dict[str, np.ndarray]:
    """One record -> unpadded arrays: audio [Ta, 40], text [Ta // 2, V], labels [Ta]."""
    audio = np.asarray(record["audio"], np.float32)
    labels = np.asarray(record["labels"], np.int32)
    if audio.ndim != 2 or labels.shape != audio.shape[:1]:
        raise ValueError(
            f"record {record.get('call_id', '?')!r}: audio {audio.shape} and labels "
            f"{labels.shape} do not share a time axis"
        )
    frames = text_input(record, audio.shape[0], causal_text, text)
    return {"audio": audio, "text": frames, "labels": labels}


def text_input(
    record, audio_frames: int, causal_text: bool, text: TextAlterations = TextAlterations()
) -> np.ndarray:
    """The text input float32 [audio_frames // 2, V] (20 ms) of a record's call of
    `audio_frames` 10 ms frames: its own character posteriors when it has them
    (annotated_calls' `text_posteriors`), else its words (`text.source`, altered as `text`
    says) as character frames, each word from its emission on (`causal_text`) or at its
    times."""
    text.check(causal_text, "TextAlterations.lag_s")
    given = np.asarray(record.get("text_posteriors", np.zeros((0, 0))), np.float32)
    if given.size:  # a user's own recogniser output (annotated_calls)
        if given.shape != (audio_frames // 2, asr.NUM_SYMBOLS):
            raise ValueError(
                f"record {record.get('call_id', '?')!r}: text_posteriors {given.shape}, "
                f"expected {(audio_frames // 2, asr.NUM_SYMBOLS)}"
            )
        if text.altered:
            raise ValueError(
                f"record {record.get('call_id', '?')!r}: {text} cannot alter given "
                "text_posteriors (it alters timed words)"
            )
        return given
    return asr.char_frames(text_words(record, text), audio_frames // 2, causal=causal_text)


def text_words(record, text: TextAlterations = TextAlterations()) -> list[asr.TimedWord]:
    """A record's timed words as the text input reads them: recognised or spoken
    (`text.source`), with `text.substitution_rate` of them substituted and each emitted
    `text.lag_s` later."""
    words = spoken_words(record) if text.source == "spoken" else recognised_words(record)
    if text.substitution_rate:
        words = substituted(words, text.substitution_rate, record.get("call_id", ""))
    if text.lag_s:
        words = [dataclasses.replace(w, emitted=w.emitted + text.lag_s) for w in words]
    return words


def substituted(words, rate: float, call_id) -> list[asr.TimedWord]:
    """`words` with each one, with probability `rate`, replaced by a different word of the
    same list (times kept); the draws are seeded by `call_id` (str or bytes), so the same
    call always gets the same errors. A list with one distinct word stays as it is."""
    call_id = call_id if isinstance(call_id, bytes) else str(call_id).encode()
    rng = np.random.default_rng(zlib.crc32(call_id))
    vocabulary = sorted({w.word for w in words})
    out = []
    for word in words:
        others = [v for v in vocabulary if v != word.word]
        if others and rng.random() < rate:
            word = dataclasses.replace(word, word=others[rng.integers(len(others))])
        out.append(word)
    return out


def collate(examples: list[dict], config: PipelineConfig) -> dict[str, np.ndarray]:
    """Pads examples into one batch of config.batch_size rows, with masks."""
    frames = batching.round_up(max(e["audio"].shape[0] for e in examples), config.pad_multiple)
    fields = {
        "audio": batching.Field(np.float32, frames, mask="audio_mask"),
        "text": batching.Field(np.float32, frames // 2, mask="text_mask"),
        "labels": batching.Field(np.int32, frames),
    }
    return batching.collate(examples, fields, config.batch_size)


def batches(
    source,
    config: PipelineConfig,
    *,
    seed: int = 0,
    indices=None,
    index: CorpusIndex | None = None,
) -> grain.MapDataset:
    """A Grain dataset of padded batches over `source[indices]` (all records when None)
    for config.num_epochs.

    index: the corpus index (read from the source when not given).
    """
    indices = batching.select(len(source), indices)
    index = CorpusIndex.read(source) if index is None else index
    steps = batching.plan(indices, config.batching_config, seed=seed, lengths=index.frames[indices])

    def load(step: int, records: np.ndarray) -> dict[str, np.ndarray]:
        examples = [to_example(source[int(i)], config.causal_text, config.text) for i in records]
        return collate(examples, config)

    return batching.map_dataset(steps, load)
