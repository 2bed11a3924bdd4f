"""MultiQT input pipeline: Grain over a `tfds.data_source`, padded masked batches.

    source = tfds.data_source("synthetic_calls/questions-quick", data_dir=DIR)["train"]
    index = CorpusIndex.read(source)
    dataset = batches(source, index.select(folds=(0, 1, 2, 3)), PipelineConfig(), seed=0)
    iterator = iter(dataset)            # grain iterator: get_state() / set_state()
    batch = next(iterator)

A batch (B = batch_size; frames padded to a multiple of `pad_multiple` 10 ms steps):
  audio   float32 [B, Ta, 40]   log-mel at 10 ms
  text    float32 [B, Ta // 2, V] character posteriors at 20 ms (offline or causal ASR)
  labels  int32   [B, Ta]       class ids at 10 ms (0 on padding)
  audio_mask bool [B, Ta], text_mask bool [B, Ta // 2], example_mask bool [B]
  (example_mask is False on the filler rows of a last, partial batch)

Order: each epoch shuffles with (seed, epoch), then sorts windows of
`bucket_window * batch_size` examples by length before cutting batches (bucketing: less
padding) and shuffles the batches. Same seed -> same batches; the iterator's state can
be checkpointed and restored mid-epoch.
"""

from __future__ import annotations

import dataclasses

import grain.python as grain
import numpy as np

from multiqt_jax.datasets.features import recognised_words
from speechkit import asr


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    batch_size: int = 8
    num_epochs: int = 1
    shuffle: bool = True
    bucket_window: int = 8  # batches per length-sorting window (1 = no bucketing)
    pad_multiple: int = 100  # pad frames to a multiple of this (bounds jit shapes)
    causal_text: bool = True  # text frames hold only what the recogniser had emitted
    drop_remainder: bool = False

    def __post_init__(self):
        for name in ("batch_size", "num_epochs", "bucket_window", "pad_multiple"):
            if getattr(self, name) < 1:
                raise ValueError(f"PipelineConfig.{name}: expected >= 1, got {getattr(self, name)}")
        if self.pad_multiple % 2:
            raise ValueError("PipelineConfig.pad_multiple: must be even (text frames are 2 steps)")


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


def to_example(record, causal_text: bool) -> dict[str, np.ndarray]:
    """One record -> unpadded arrays: audio [Ta, 40], text [Ta // 2, V], labels [Ta]."""
    audio = np.asarray(record["audio"], np.float32)
    labels = np.asarray(record["labels"], np.int32)
    if audio.ndim != 2 or labels.shape != audio.shape[:1]:
        raise ValueError(
            f"record {record.get('call_id', '?')!r}: audio {audio.shape} and labels "
            f"{labels.shape} do not share a time axis"
        )
    given = np.asarray(record.get("text_posteriors", np.zeros((0, 0))), np.float32)
    if given.size:  # a user's own recogniser output (annotated_calls)
        if given.shape != (audio.shape[0] // 2, asr.NUM_SYMBOLS):
            raise ValueError(
                f"record {record.get('call_id', '?')!r}: text_posteriors {given.shape}, "
                f"expected {(audio.shape[0] // 2, asr.NUM_SYMBOLS)}"
            )
        return {"audio": audio, "text": given, "labels": labels}
    text = asr.char_frames(recognised_words(record), audio.shape[0] // 2, causal=causal_text)
    return {"audio": audio, "text": text, "labels": labels}


def epoch_plan(
    lengths: np.ndarray, config: PipelineConfig, seed: int, epoch: int
) -> list[np.ndarray]:
    """Batches of positions into `lengths` for one epoch (see the module docstring)."""
    order = np.arange(len(lengths))
    rng = np.random.default_rng([seed, epoch])
    if config.shuffle:
        order = rng.permutation(order)
    window = config.batch_size * config.bucket_window
    if config.bucket_window > 1:
        order = (
            np.concatenate(
                [
                    chunk[np.argsort(lengths[chunk], kind="stable")]
                    for chunk in np.array_split(order, max(1, int(np.ceil(len(order) / window))))
                ]
            )
            if len(order)
            else order
        )
    plan = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
    if config.drop_remainder and plan and len(plan[-1]) < config.batch_size:
        plan = plan[:-1]
    if config.shuffle:
        plan = [plan[i] for i in rng.permutation(len(plan))]
    return plan


def _pad(array: np.ndarray, length: int) -> np.ndarray:
    return np.pad(array, [(0, length - array.shape[0])] + [(0, 0)] * (array.ndim - 1))


def collate(examples: list[dict], config: PipelineConfig) -> dict[str, np.ndarray]:
    """Pads examples into one batch of config.batch_size rows, with masks."""
    longest = max(e["audio"].shape[0] for e in examples)
    frames = int(np.ceil(max(longest, 1) / config.pad_multiple) * config.pad_multiple)
    rows = config.batch_size
    batch = {
        "audio": np.zeros((rows, frames, examples[0]["audio"].shape[1]), np.float32),
        "text": np.zeros((rows, frames // 2, asr.NUM_SYMBOLS), np.float32),
        "labels": np.zeros((rows, frames), np.int32),
        "audio_mask": np.zeros((rows, frames), bool),
        "text_mask": np.zeros((rows, frames // 2), bool),
        "example_mask": np.zeros(rows, bool),
    }
    for row, example in enumerate(examples):
        length = example["audio"].shape[0]
        batch["audio"][row] = _pad(example["audio"], frames)
        batch["text"][row] = _pad(example["text"], frames // 2)
        batch["labels"][row] = _pad(example["labels"], frames)
        batch["audio_mask"][row, :length] = True
        batch["text_mask"][row, : example["text"].shape[0]] = True
        batch["example_mask"][row] = True
    return batch


def batches(
    source,
    indices,
    config: PipelineConfig = PipelineConfig(),
    seed: int = 0,
    index: CorpusIndex | None = None,
) -> grain.MapDataset:
    """A Grain dataset of padded batches over `source[indices]` for config.num_epochs.

    index: the corpus index (read from the source when not given).
    """
    indices = np.asarray(indices, np.int64)
    if indices.size == 0:
        raise ValueError("batches: no records selected")
    index = index or CorpusIndex.read(source)
    lengths = index.frames[indices]
    plan = [
        indices[positions]
        for epoch in range(config.num_epochs)
        for positions in epoch_plan(lengths, config, seed, epoch)
    ]

    def load(step: int) -> dict[str, np.ndarray]:
        examples = [to_example(source[int(i)], config.causal_text) for i in plan[step]]
        return collate(examples, config)

    return grain.MapDataset.range(len(plan)).map(load)
