"""Batching shared by the task pipelines: an epoch plan of record indices, padded and
masked collation, and a Grain dataset over the plan.

    config = BatchingConfig(batch_size=8, num_epochs=2, bucket_window=8, shuffle_batches=True)
    steps = plan(select(len(source)), config, seed=0, lengths=frames)  # int64 [<= 8] per step
    fields = {"audio": Field(np.float32, length=1000, mask="audio_mask")}

    def load(step, records):  # step: position in the plan; records: its record indices
        return collate([to_example(source[int(i)]) for i in records], fields, rows=8)

    iterator = iter(map_dataset(steps, load))  # grain iterator: get_state() / set_state()

The plan (shuffling, length bucketing), collation and the evaluation's length buckets
(`bucket_length`, `pad_steps`): docs/speechkit.md, "batching".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import grain.python as grain
import numpy as np

from speechkit import checks


@dataclasses.dataclass(frozen=True)
class BatchingConfig:
    """How an epoch's examples become batches (see the module docstring)."""

    batch_size: int
    num_epochs: int = 1
    shuffle: bool = True  # shuffle the examples of each epoch by (seed, epoch)
    # batches per length-sorting window: 1 = no sorting, None = sort the whole epoch
    bucket_window: int | None = 1
    shuffle_batches: bool = False  # shuffle the batches too (bucketing leaves them sorted)
    drop_remainder: bool = False

    def __post_init__(self):
        checks.require_int("BatchingConfig.batch_size", self.batch_size, at_least=1)
        checks.require_int("BatchingConfig.num_epochs", self.num_epochs, at_least=1)
        if self.bucket_window is not None:
            checks.require_int("BatchingConfig.bucket_window", self.bucket_window, at_least=1)

    @classmethod
    def bucketed(cls, pipeline) -> BatchingConfig:
        """The plan of a task pipeline config with the fields batch_size, num_epochs,
        shuffle, bucket_window and drop_remainder: bucketed, and its batches shuffled
        whenever its examples are."""
        return cls(
            batch_size=pipeline.batch_size,
            num_epochs=pipeline.num_epochs,
            shuffle=pipeline.shuffle,
            bucket_window=pipeline.bucket_window,
            shuffle_batches=pipeline.shuffle,
            drop_remainder=pipeline.drop_remainder,
        )


def _sort_windows(order: np.ndarray, lengths, config: BatchingConfig) -> np.ndarray:
    if config.bucket_window == 1:
        return order
    if lengths is None:
        raise ValueError("batching: length bucketing (bucket_window != 1) needs `lengths`")
    windows = 1
    if config.bucket_window is not None:
        window = config.batch_size * config.bucket_window
        windows = max(1, int(np.ceil(len(order) / window)))
    return np.concatenate(
        [part[np.argsort(lengths[part], kind="stable")] for part in np.array_split(order, windows)]
    )


def _cut(order: np.ndarray, config: BatchingConfig) -> list[np.ndarray]:
    size = config.batch_size
    steps = [order[i : i + size] for i in range(0, len(order), size)]
    if config.drop_remainder and len(steps[-1]) < size:
        steps = steps[:-1]
    return steps


def epoch_plan(
    size: int, config: BatchingConfig, *, seed: int, epoch: int, lengths=None
) -> list[np.ndarray]:
    """One epoch's batches of positions 0..size-1: a list of int64 [<= batch_size] arrays.

    lengths: [size] numbers (e.g. frames) to sort by; needed only when bucketing.
    """
    if size < 1:
        raise ValueError("batching: no examples selected")
    if lengths is not None and len(lengths) != size:
        raise ValueError(f"batching: {len(lengths)} lengths for {size} examples")
    lengths = None if lengths is None else np.asarray(lengths)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(size) if config.shuffle else np.arange(size)
    steps = _cut(_sort_windows(order, lengths, config), config)
    if config.shuffle_batches:
        steps = [steps[i] for i in rng.permutation(len(steps))]
    return steps


def plan(indices, config: BatchingConfig, *, seed: int = 0, lengths=None) -> list[np.ndarray]:
    """Batches of `indices` (record indices) for config.num_epochs epochs, epoch after
    epoch: a list of int64 [<= batch_size] arrays. lengths: [len(indices)] numbers to
    sort by, needed only when bucketing. Raises ValueError when nothing is selected or
    `drop_remainder` leaves no batch."""
    indices = np.asarray(indices, np.int64)
    steps = [
        indices[positions]
        for epoch in range(config.num_epochs)
        for positions in epoch_plan(indices.size, config, seed=seed, epoch=epoch, lengths=lengths)
    ]
    if not steps:
        raise ValueError(
            f"batching: {indices.size} examples make no batch of {config.batch_size} "
            "with drop_remainder"
        )
    return steps


def select(num_records: int, indices=None) -> np.ndarray:
    """int64 [n] record indices: `indices`, or all of 0..num_records-1 when None.
    Raises ValueError on an empty selection or an index outside the source."""
    if indices is None:
        indices = np.arange(num_records)
    indices = np.asarray(indices, np.int64).reshape(-1)
    if indices.size == 0:
        raise ValueError("batching: no records selected")
    outside = indices[(indices < 0) | (indices >= num_records)]
    if outside.size:
        raise ValueError(
            f"batching: record indices {outside[:5].tolist()} outside a source of "
            f"{num_records} records"
        )
    return indices


def nested_subset(items: np.ndarray, fraction: float, seed) -> np.ndarray:
    """The first ceil(fraction x len(items)) of `items` in an order drawn with `seed` (an
    int or a sequence of ints for `np.random.default_rng`), back in their own order; all
    of them for fraction 1. For one seed a smaller fraction's subset lies inside a larger
    one's (training-data size studies)."""
    if fraction == 1:
        return items
    order = np.random.default_rng(seed).permutation(len(items))
    return np.sort(items[order[: int(np.ceil(fraction * len(items)))]])


def map_dataset(
    steps: Sequence[np.ndarray], load: Callable[[int, np.ndarray], dict]
) -> grain.MapDataset:
    """A Grain dataset whose element `step` is load(step, steps[step]); iter() of it gives
    an iterator whose get_state() / set_state() checkpoint and restore the position."""
    return grain.MapDataset.range(len(steps)).map(lambda step: load(step, steps[step]))


def round_up(steps: int, multiple: int) -> int:
    """`steps` (at least 1) rounded up to a multiple of `multiple`."""
    return -(-max(steps, 1) // multiple) * multiple


LENGTHS = ("exact", "buckets")
"""How evaluation batches are padded along time: "exact", each to its own longest example
(rounded up to the pipeline's multiple); "buckets", further to `bucket_length`."""


def check_lengths(lengths: str) -> str:
    """`lengths` when it is one of LENGTHS, else a ValueError naming them."""
    if lengths not in LENGTHS:
        raise ValueError(f"batch lengths: expected one of {LENGTHS}, got {lengths!r}")
    return lengths


def bucket_length(steps: int, multiple: int) -> int:
    """The smallest `multiple * 2^k` (k >= 0) holding `steps`: the few padded lengths that
    evaluation batches of any lengths share (at most twice `round_up(steps, multiple)`),
    so that a jitted function compiles once per bucket, not once per batch length."""
    checks.require_int("bucket_length: multiple", multiple, at_least=1)
    length = multiple
    while length < steps:
        length *= 2
    return length


def pad_steps(batch: Mapping[str, np.ndarray], lengths: Mapping[str, int]) -> dict:
    """`batch` with axis 1 (steps) of each field named in `lengths` ({name: steps}) padded
    at the end to that many steps with zeros (False in a mask): as `collate` pads, so
    masked steps stay masked. Other fields are kept as they are. Raises ValueError on a
    field already longer than its length."""
    padded = dict(batch)
    for name, length in lengths.items():
        value = np.asarray(batch[name])
        if value.shape[1] > length:
            raise ValueError(
                f"batching.pad_steps: {name!r} has {value.shape[1]} steps, more than {length}"
            )
        widths = [(0, 0)] * value.ndim
        widths[1] = (0, length - value.shape[1])
        padded[name] = np.pad(value, widths)
    return padded


@dataclasses.dataclass(frozen=True)
class Field:
    """How one example value becomes a batch array (see the module docstring)."""

    dtype: type
    length: int | None = None  # steps to pad axis 0 to; None: one value per example
    mask: str | None = None  # name of the bool [B, length] mask of the real steps
    fill: float = 0  # value of the padding and of the filler rows

    def __post_init__(self):
        if self.length is not None:
            checks.require_int("Field.length", self.length, at_least=1)
        if self.mask is not None and self.length is None:
            raise ValueError(f"Field: a mask ({self.mask!r}) needs a length to pad to")


def collate(
    examples: Sequence[Mapping], fields: Mapping[str, Field], rows: int
) -> dict[str, np.ndarray]:
    """`rows` rows of the examples' `fields` (other keys are ignored), padded and masked,
    plus `example_mask` bool [rows]. Raises ValueError on more examples than rows or a
    value longer than its field's length."""
    if not 0 < len(examples) <= rows:
        raise ValueError(f"batching.collate: {len(examples)} examples for {rows} rows")
    batch = {}
    for name, field in fields.items():
        values = [np.asarray(example[name]) for example in examples]
        batch[name] = _stack(name, values, field, rows)
        if field.mask is not None:
            batch[field.mask] = _steps_mask(values, field.length, rows)
    batch["example_mask"] = np.arange(rows) < len(examples)
    return batch


def _stack(name: str, values: list[np.ndarray], field: Field, rows: int) -> np.ndarray:
    if field.length is None:
        array = np.full((rows, *values[0].shape), field.fill, field.dtype)
        array[: len(values)] = values
        return array
    array = np.full((rows, field.length, *values[0].shape[1:]), field.fill, field.dtype)
    for row, value in enumerate(values):
        if len(value) > field.length:
            raise ValueError(
                f"batching.collate: {name!r} of example {row} has {len(value)} steps, "
                f"more than the padded length {field.length}"
            )
        array[row, : len(value)] = value
    return array


def _steps_mask(values: list[np.ndarray], length: int, rows: int) -> np.ndarray:
    counts = np.zeros(rows, np.int64)
    counts[: len(values)] = [len(value) for value in values]
    return np.arange(length) < counts[:, None]
