"""The recogniser's input pipeline: transcribed utterances -> padded, masked batches.

    source = tfds.data_source("recogniser_speech/quick", data_dir=DIR)["train"]
    dataset = batches(source, PipelineConfig(batch_size=16, num_epochs=20), seed=0)
    batch = next(iter(dataset))     # grain iterator: get_state() / set_state()

A record needs `audio` (log-mel [frames, 40] at 10 ms) and `text`
(`ctc_jax.symbols.normalise_text`d); a batch holds `audio`, `audio_mask`, `labels`,
`label_mask` and `example_mask`, labels padded to a length fixed by the frames so each
frame bucket is one compiled program. Order and bucketing are `speechkit.batching`'s.
Specification (shapes, the label length rule, refusals):
docs/corpora.md#the-recognisers-corpus-recogniser_speech ("Batches").
"""

from __future__ import annotations

import dataclasses

import grain.python as grain
import numpy as np

from ctc_jax import symbols
from speechkit import batching, checks

LABEL_RATIO = 4  # 10 ms frames per label slot


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    batch_size: int = 16
    num_epochs: int = 1
    shuffle: bool = True
    bucket_window: int = 8  # batches per length-sorting window (1 = no bucketing)
    pad_multiple: int = 200  # 10 ms frames: 2 s buckets
    drop_remainder: bool = False

    def __post_init__(self):
        checks.require_int("PipelineConfig.pad_multiple", self.pad_multiple, at_least=LABEL_RATIO)
        if self.pad_multiple % LABEL_RATIO:
            raise ValueError(
                f"PipelineConfig.pad_multiple: {self.pad_multiple} is not a multiple of "
                f"{LABEL_RATIO} (frames per label slot)"
            )
        self.batching_config  # noqa: B018 - checks the batching fields

    @property
    def batching_config(self) -> batching.BatchingConfig:
        """The shared epoch plan: bucketed, and batches shuffled whenever examples are."""
        return batching.BatchingConfig.bucketed(self)


def record_text(record) -> str:
    """A record's `text` as str."""
    text = record["text"]
    return text.decode("utf-8") if isinstance(text, bytes) else str(text)


def to_example(record, where: str = "record") -> dict[str, np.ndarray]:
    """{"audio" float32 [frames, F], "labels" int32 [chars]} of one record."""
    audio = np.asarray(record["audio"], np.float32)
    if audio.ndim != 2:
        raise ValueError(f"{where}: audio shape {audio.shape}, expected [frames, features]")
    text = record_text(record)
    if text != symbols.normalise_text(text):
        raise ValueError(
            f"{where}: text {text[:40]!r} is not normalised (lower-case words, single spaces)"
        )
    return {"audio": audio, "labels": symbols.encode(text)}


def collate(examples: list[dict], config: PipelineConfig, where: str = "batch") -> dict:
    """Pads examples into one batch of config.batch_size rows, with masks."""
    frames = batching.round_up(max(e["audio"].shape[0] for e in examples), config.pad_multiple)
    slots = frames // LABEL_RATIO
    for i, example in enumerate(examples):
        if example["labels"].size > slots:
            raise ValueError(
                f"{where}: example {i} has {example['labels'].size} characters in "
                f"{example['audio'].shape[0] / 100:.2f} s, more than {slots} (the label "
                f"padding of {frames} frames: {100 // LABEL_RATIO} characters a second)"
            )
    fields = {
        "audio": batching.Field(np.float32, frames, mask="audio_mask"),
        "labels": batching.Field(np.int32, slots, mask="label_mask"),
    }
    return batching.collate(examples, fields, config.batch_size)


def lengths(source) -> np.ndarray:
    """int32 [N]: every record's frames (reads the source once)."""
    return np.asarray([np.shape(source[i]["audio"])[0] for i in range(len(source))], np.int32)


def batches(
    source, config: PipelineConfig, *, seed: int = 0, indices=None, frames=None
) -> grain.MapDataset:
    """A Grain dataset of padded batches over `source[indices]` (all records when None)
    for config.num_epochs; `frames`: `lengths(source)` when already read."""
    indices = batching.select(len(source), indices)
    frames = lengths(source) if frames is None else np.asarray(frames)
    steps = batching.plan(indices, config.batching_config, seed=seed, lengths=frames[indices])

    def load(step: int, records: np.ndarray) -> dict[str, np.ndarray]:
        examples = [to_example(source[int(i)], f"record {int(i)}") for i in records]
        return collate(examples, config, f"step {step}")

    return batching.map_dataset(steps, load)
