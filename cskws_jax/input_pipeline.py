"""KWS input pipeline: Grain over a `tfds.data_source`, fixed-length training crops and
whole-utterance evaluation batches, both padded and masked.

    source = tfds.data_source("synthetic_kws/quick", data_dir=DIR)
    keywords = list(tfds.builder("synthetic_kws/quick", data_dir=DIR).info.metadata["keywords"])
    train = training_batches(source["train"], PipelineConfig(), num_keywords=20, seed=0)
    test = evaluation_batches(source["test"], PipelineConfig(), num_keywords=20)
    # optional: indices=[...] (records of the source; all when None)
    batch = next(iter(train))      # grain iterators: get_state() / set_state()

A batch holds `audio` [B, T, 64] log-mel with `audio_mask`, padded events (`start`,
`end`, `label`, `valid`; the unknown class is K), `duration`, `example_mask` and
`record`. Specification (batch fields, crop rules): docs/corpora.md#batches.
"""

from __future__ import annotations

import dataclasses

import grain.python as grain
import numpy as np

from cskws_jax.datasets.features import FEATURES
from speechkit import batching, checks

HOP_S = FEATURES.hop_s  # seconds per audio frame
INTERVAL_TOLERANCE_S = 0.05  # a word may end this much after the audio


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    batch_size: int = 16
    crop_s: float = 4.0  # training crop length (seconds)
    num_epochs: int = 1
    shuffle: bool = True
    max_events: int = 64  # keyword + unknown-word slots per row
    unknown_class: bool = True  # other words as class K (False: the ablation)
    min_visible: float = 0.5  # share of a word that must be inside a crop to keep it
    shift_repeats: bool = True  # a repeated short utterance starts at a random frame
    pad_multiple: int = 100  # evaluation: pad frames to a multiple of this
    drop_remainder: bool = False

    def __post_init__(self):
        for name in ("batch_size", "num_epochs", "max_events", "pad_multiple"):
            checks.require_int(f"PipelineConfig.{name}", getattr(self, name), at_least=1)
        checks.require_frames("PipelineConfig.crop_s", self.crop_s, HOP_S)
        checks.require_number("PipelineConfig.min_visible", self.min_visible, above=0, at_most=1)

    @property
    def crop_frames(self) -> int:
        return int(round(self.crop_s / HOP_S))

    def batching_config(self, evaluation: bool = False) -> batching.BatchingConfig:
        """The shared epoch plan: training shuffles the examples (no bucketing), evaluation
        is one pass sorted by length."""
        return batching.BatchingConfig(
            batch_size=self.batch_size,
            num_epochs=1 if evaluation else self.num_epochs,
            shuffle=self.shuffle and not evaluation,
            bucket_window=None if evaluation else 1,
            drop_remainder=self.drop_remainder,
        )


def record_events(record, num_keywords: int, unknown_class: bool):
    """(start, end, label) float64/float64/int32 arrays of a record's words in time order:
    the valid keywords, plus the other words as class `num_keywords` if unknown_class."""
    valid = np.asarray(record["keyword_valid"], bool)
    start = [np.asarray(record["keyword_start"], np.float64)[valid]]
    end = [np.asarray(record["keyword_end"], np.float64)[valid]]
    label = [np.asarray(record["keyword_label"], np.int32)[valid]]
    if label[0].size and not (label[0].min() >= 0 and label[0].max() < num_keywords):
        raise ValueError(
            f"record {_name(record)}: keyword labels {label[0].tolist()} outside "
            f"[0, {num_keywords})"
        )
    if unknown_class:
        start.append(np.asarray(record["other_start"], np.float64))
        end.append(np.asarray(record["other_end"], np.float64))
        label.append(np.full(start[-1].size, num_keywords, np.int32))
    start, end, label = np.concatenate(start), np.concatenate(end), np.concatenate(label)
    duration = float(record["duration"]) if "duration" in record else np.inf
    bad = ~((start >= 0) & (end >= start) & (end <= duration + INTERVAL_TOLERANCE_S))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"record {_name(record)}: word interval [{start[i]:.3f}, {end[i]:.3f}] s (label "
            f"{label[i]}) is not inside the audio ({duration:.3f} s) or ends before it starts"
        )
    order = np.argsort(start, kind="stable")
    return start[order], end[order], label[order]


def _name(record) -> str:
    name = record.get("utterance_id", "?")
    return repr(name.decode() if isinstance(name, bytes) else name)


def crop(
    record, config: PipelineConfig, num_keywords: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """One record -> a training crop: audio [crop_frames, 64] and its events (unpadded)."""
    audio = np.asarray(record["audio"], np.float32)
    frames, length = audio.shape[0], config.crop_frames
    if frames == 0:
        raise ValueError(f"record {_name(record)}: empty audio")
    start, end, label = record_events(record, num_keywords, config.unknown_class)
    if frames < length:  # repeat the utterance (and its words) until it fills the crop
        first = int(rng.integers(0, frames)) if config.shift_repeats else 0
        copies = -(-(first + length) // frames)
        offsets = np.repeat(np.arange(copies) * frames * HOP_S, start.size)
        audio = np.tile(audio, (copies, 1))
        start, end = np.tile(start, copies) + offsets, np.tile(end, copies) + offsets
        label = np.tile(label, copies)
    else:
        first = int(rng.integers(0, frames - length + 1))
    window_start, window_end = first * HOP_S, (first + length) * HOP_S
    clipped_start = np.clip(start, window_start, window_end)
    clipped_end = np.clip(end, window_start, window_end)
    visible = clipped_end - clipped_start
    keep = visible >= config.min_visible * np.maximum(end - start, 1e-9)
    keep &= visible > 0
    return {
        "audio": audio[first : first + length],
        "start": (clipped_start[keep] - window_start).astype(np.float32),
        "end": (clipped_end[keep] - window_start).astype(np.float32),
        "label": label[keep],
        "duration": np.float32(length * HOP_S),
        "name": _name(record),
    }


def whole(record, config: PipelineConfig, num_keywords: int) -> dict[str, np.ndarray]:
    """One record -> an evaluation example: all its audio and events (unpadded)."""
    audio = np.asarray(record["audio"], np.float32)
    if audio.shape[0] == 0:
        raise ValueError(f"record {_name(record)}: empty audio")
    start, end, label = record_events(record, num_keywords, config.unknown_class)
    return {
        "audio": audio,
        "start": start.astype(np.float32),
        "end": end.astype(np.float32),
        "label": label,
        "duration": np.float32(record["duration"]),
        "name": _name(record),
    }


def collate(
    examples: list[dict], records: list[int], config: PipelineConfig, frames: int
) -> dict[str, np.ndarray]:
    """Pads examples (audio to `frames`, events to max_events) into one batch."""
    slots = config.max_events
    rows = [{**e, "record": record} for e, record in zip(examples, records, strict=True)]
    for row in rows:
        if row["label"].size > slots:
            raise ValueError(
                f"record {row['record']} ({row['name']}): {row['label'].size} events "
                f"(keywords + unknown words) in one row, more than PipelineConfig.max_events "
                f"= {slots}"
            )
    fields = {
        "audio": batching.Field(np.float32, frames, mask="audio_mask"),
        "start": batching.Field(np.float32, slots),
        "end": batching.Field(np.float32, slots),
        "label": batching.Field(np.int32, slots, mask="valid"),
        "duration": batching.Field(np.float32),
        "record": batching.Field(np.int32, fill=-1),
    }
    return batching.collate(rows, fields, config.batch_size)


def training_batches(
    source, config: PipelineConfig, *, num_keywords: int, seed: int = 0, indices=None
) -> grain.MapDataset:
    """Batches of random `crop_s` crops over source[indices] (all records when None) for
    config.num_epochs; the crop of row r of step s is drawn with the seed (seed, s, r)."""
    indices = batching.select(len(source), indices)
    steps = batching.plan(indices, config.batching_config(), seed=seed)

    def load(step: int, records: np.ndarray) -> dict[str, np.ndarray]:
        examples = [
            crop(source[int(i)], config, num_keywords, np.random.default_rng([seed, step, row]))
            for row, i in enumerate(records)
        ]
        return collate(examples, records.tolist(), config, config.crop_frames)

    return batching.map_dataset(steps, load)


def evaluation_batches(
    source, config: PipelineConfig, *, num_keywords: int, indices=None
) -> grain.MapDataset:
    """One pass over whole utterances of source[indices] (all records when None), in
    length order."""
    indices = batching.select(len(source), indices)
    durations = np.array([float(source[int(i)]["duration"]) for i in indices])
    steps = batching.plan(indices, config.batching_config(evaluation=True), lengths=durations)

    def load(step: int, records: np.ndarray) -> dict[str, np.ndarray]:
        examples = [whole(source[int(i)], config, num_keywords) for i in records]
        longest = max(e["audio"].shape[0] for e in examples)
        frames = batching.round_up(longest, config.pad_multiple)
        return collate(examples, records.tolist(), config, frames)

    return batching.map_dataset(steps, load)
