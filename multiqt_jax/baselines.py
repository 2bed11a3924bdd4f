"""Segment-trained MultiQT baselines: a random forest and a feed-forward network.

Classifiers trained on fixed segments (each labelled question instance, plus sampled
background), with features pooled over a span (`pooled_features`), then run over a
stream as causal sliding windows:

    X, y = baselines.segment_dataset(train_batches, config)
    forest = baselines.fit_random_forest(X, y, config)   # or fit_fnn(X, y, config, ...)
    pred = baselines.sliding_labels_batch(forest, test_batch, config)   # int32 [B, T]

The features, the window grid, the inputs and a worked example: docs/models.md,
"MultiQT baselines".
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from sklearn.ensemble import RandomForestClassifier

from multiqt_jax.datasets.features import FEATURES
from speechkit import asr, checks
from speechkit.losses import cross_entropy
from speechkit.optim import OptimizerConfig, TrainState, make_optimizer

FRAME_S = FEATURES.hop_s  # seconds per audio frame (labels share this rate)
NUM_MELS = FEATURES.num_mels  # 40
NUM_SYMBOLS = asr.NUM_SYMBOLS  # 29
FEATURE_DIM = 2 * NUM_MELS + NUM_SYMBOLS  # 109: mel mean, mel std, posterior mean
BACKGROUND = 0


@dataclasses.dataclass(frozen=True)
class BaselineConfig:
    """Sizes of the segment baselines. Times in seconds, whole multiples of 10 ms."""

    window_s: float = 2.0  # sliding window length
    hop_s: float = 0.2  # one window ends every hop_s
    min_window_s: float | None = None  # shortest (left-truncated) early window; None = window_s
    background_per_segment: float = 1.0  # background segments per labelled segment
    # random forest (scikit-learn)
    n_estimators: int = 100
    max_depth: int | None = None  # None = grow until leaves are pure
    n_jobs: int = 1  # results do not depend on it (random_state is fixed)
    # feed-forward network (flax.linen + optax AdamW)
    hidden: tuple[int, ...] = (128, 128)
    epochs: int = 100
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 0  # forest random_state, network init and minibatch order, segment sampling

    def __post_init__(self):
        field = "BaselineConfig.{}".format
        for name in ("window_s", "hop_s"):
            checks.require_frames(field(name), getattr(self, name), FRAME_S)
        if self.min_window_s is not None:
            checks.require_frames(field("min_window_s"), self.min_window_s, FRAME_S)
            checks.require_at_most(
                field("min_window_s"), self.min_window_s, "window_s", self.window_s
            )
        checks.require_number(
            field("background_per_segment"), self.background_per_segment, at_least=0
        )
        for name in ("n_estimators", "epochs", "batch_size"):
            checks.require_int(field(name), getattr(self, name), at_least=1)
        if self.max_depth is not None:
            checks.require_int(field("max_depth"), self.max_depth, at_least=1)
        if checks.require_int(field("n_jobs"), self.n_jobs) == 0:
            raise ValueError(f"{field('n_jobs')}: expected a nonzero int (-1 = all cores), got 0")
        hidden = checks.require_ints(field("hidden"), self.hidden, at_least=1)
        object.__setattr__(self, "hidden", hidden)
        checks.require_number(field("learning_rate"), self.learning_rate, above=0)
        checks.require_number(field("weight_decay"), self.weight_decay, at_least=0)
        checks.require_int(field("seed"), self.seed, at_least=0)

    @property
    def window_frames(self) -> int:
        return checks.require_frames("BaselineConfig.window_s", self.window_s, FRAME_S)

    @property
    def hop_frames(self) -> int:
        return checks.require_frames("BaselineConfig.hop_s", self.hop_s, FRAME_S)

    @property
    def min_window_frames(self) -> int:
        if self.min_window_s is None:
            return self.window_frames
        return checks.require_frames("BaselineConfig.min_window_s", self.min_window_s, FRAME_S)


# ----------------------------------------------------------------------------- validation


def _check_streams(audio, text, *, batched: bool, prefix: str = ""):
    """Validates audio / text widths and lengths; returns float32 arrays."""
    a_name, t_name = (f"{prefix}['audio']", f"{prefix}['text']") if prefix else ("audio", "text")
    audio = checks.as_array(a_name, audio, np.float32)
    text = checks.as_array(t_name, text, np.float32)
    batch = ("B",) if batched else ()
    checks.require_shape(a_name, audio, (*batch, "Ta", NUM_MELS), "log-mel bands at 10 ms")
    audio_rows = audio.shape[:1] if batched else ()
    checks.require_shape(
        t_name, text, (*audio_rows, "Ta // 2", NUM_SYMBOLS), "character posteriors at 20 ms"
    )
    frames, expected = audio.shape[-2], audio.shape[-2] // 2
    if abs(text.shape[-2] - expected) > 1:
        raise ValueError(
            f"{t_name}: shape {text.shape} has {text.shape[-2]} frames at 20 ms but {a_name} "
            f"{audio.shape} has {frames} frames at 10 ms; expected {expected} (+-1) text frames"
        )
    return audio, text


def _check_mask(name: str, mask, shape: tuple[int, ...]) -> np.ndarray:
    """A bool mask of `shape`; all True when mask is None."""
    if mask is None:
        return np.ones(shape, bool)
    mask = checks.as_array(name, mask)
    checks.require_mask(name, mask, shape)
    return mask


def _text_mask_from_audio(mask: np.ndarray, text_frames: int) -> np.ndarray:
    """Text frame i (audio frames 2i, 2i + 1) is valid when audio frame 2i + 1 is."""
    out = np.zeros(mask.shape[:-1] + (text_frames,), bool)
    odd = mask[..., 1::2][..., :text_frames]
    out[..., : odd.shape[-1]] = odd
    return out


# ------------------------------------------------------------------------------- pooling


def _span_sums(values: np.ndarray, mask: np.ndarray, starts, ends, squares: bool):
    """Masked sums of values [B, T, F] (and of their squares) and counts over [s, e)."""
    weights = mask.astype(np.float64)
    count = np.zeros(mask.shape[:1] + (mask.shape[1] + 1,))
    count[:, 1:] = np.cumsum(weights, axis=1)
    values = values.astype(np.float64) * weights[..., None]
    # Shift by the per-row mean so the running sums of squares do not cancel.
    shift = values.sum(axis=1, keepdims=True) / np.maximum(count[:, -1:, None], 1)
    centred = (values - shift) * weights[..., None]
    rows = np.arange(values.shape[0])[:, None]
    n = count[rows, ends] - count[rows, starts]
    total = np.zeros((values.shape[0], values.shape[1] + 1, values.shape[2]))
    total[:, 1:] = np.cumsum(centred, axis=1)
    sums = total[rows, ends] - total[rows, starts]
    squared = None
    if squares:
        total[:, 1:] = np.cumsum(centred * centred, axis=1)
        squared = total[rows, ends] - total[rows, starts]
    return n, sums, squared, shift


def pooled_features(audio, text, starts, ends, *, audio_mask=None, text_mask=None) -> np.ndarray:
    """Pooled features of many spans, by cumulative sums (layout: module docstring).

    Args:
      audio: float [B, Ta, 40] log-mel (or [Ta, 40] for one example).
      text: float [B, Tt, 29] character posteriors at 20 ms, |Tt - Ta // 2| <= 1
        (or [Tt, 29]).
      starts, ends: int [B, N] or [N] (shared by all rows): spans [start, end) of 10 ms
        frames; clipped to [0, Ta].
      audio_mask: optional bool [B, Ta] (or [Ta]); False frames are left out.
      text_mask: optional bool [B, Tt]; default: frame i is valid when audio frame 2i + 1 is.

    Returns:
      float32 [B, N, FEATURE_DIM] (or [N, FEATURE_DIM] for one example).
    """
    batched = np.ndim(audio) == 3
    audio, text = _check_streams(audio, text, batched=batched)
    if not batched:
        audio, text = audio[None], text[None]
        audio_mask = None if audio_mask is None else np.asarray(audio_mask)[None]
        text_mask = None if text_mask is None else np.asarray(text_mask)[None]
    rows, frames = audio.shape[:2]
    audio_mask = _check_mask("audio_mask", audio_mask, (rows, frames))
    if text_mask is None:
        text_mask = _text_mask_from_audio(audio_mask, text.shape[1])
    text_mask = _check_mask("text_mask", text_mask, text.shape[:2])
    starts = checks.as_array("starts", starts)
    ends = checks.as_array("ends", ends)
    checks.require_dtype("starts", starts, "int")
    checks.require_dtype("ends", ends, "int")
    if starts.shape != ends.shape or starts.ndim not in (1, 2):
        raise ValueError(
            f"starts, ends: shapes {starts.shape}, {ends.shape}; expected one shape [N] or [B, N]"
        )
    spans = (rows, starts.shape[-1])
    if starts.ndim == 2:
        checks.require_shape("starts", starts, spans, "or [N]")
    starts = np.broadcast_to(np.clip(starts, 0, frames), spans)
    ends = np.broadcast_to(np.clip(ends, 0, frames), spans)
    ends = np.maximum(ends, starts)

    n, sums, squared, shift = _span_sums(audio, audio_mask, starts, ends, squares=True)
    safe = np.maximum(n, 1)[..., None]
    centred_mean = sums / safe
    variance = np.maximum(squared / safe - centred_mean**2, 0.0)
    mel_mean = np.where(n[..., None] > 0, centred_mean + shift, 0.0)
    mel_std = np.where(n[..., None] > 0, np.sqrt(variance), 0.0)

    text_starts = np.minimum((starts + 1) // 2, text.shape[1])  # text frames wholly inside
    text_ends = np.maximum(np.minimum(ends // 2, text.shape[1]), text_starts)
    tn, tsums, _, tshift = _span_sums(text, text_mask, text_starts, text_ends, squares=False)
    text_mean = np.where(tn[..., None] > 0, tsums / np.maximum(tn, 1)[..., None] + tshift, 0.0)

    features = np.concatenate([mel_mean, mel_std, text_mean], axis=-1).astype(np.float32)
    return features if batched else features[0]


def segment_features(audio, text, start: int, end: int) -> np.ndarray:
    """Pooled features of one span [start, end) of one example: float32 [FEATURE_DIM].

    audio [Ta, 40], text [Tt, 29]; the same definition as `pooled_features`.
    """
    return pooled_features(audio, text, np.array([start]), np.array([end]))[0]


# ------------------------------------------------------------------------------ segments


def label_runs(labels, mask=None, background: int = BACKGROUND):
    """Instances of one example: maximal runs of one non-background label within the mask.

    Args:
      labels: int [T] class ids; mask: optional bool [T] (a False frame ends a run).

    Returns:
      (starts, ends, classes): int64 [K], int64 [K] (exclusive) and int32 [K], in time order.
    """
    labels = checks.as_array("labels", labels)
    checks.require_shape("labels", labels, ("T",))
    checks.require_dtype("labels", labels, "int")
    mask = _check_mask("mask", mask, labels.shape)
    inside = mask & (labels != background)
    same = np.zeros(labels.shape, bool)
    same[1:] = inside[1:] & inside[:-1] & (labels[1:] == labels[:-1])
    starts = np.flatnonzero(inside & ~same)
    after = np.append(same[1:], False)
    ends = np.flatnonzero(inside & ~after) + 1
    return starts, ends, labels[starts].astype(np.int32)


def _background_runs(labels: np.ndarray, mask: np.ndarray, background: int):
    """Maximal runs of valid background frames: starts, ends (exclusive)."""
    inside = (mask & (labels == background)).astype(np.int8)
    edges = np.diff(np.concatenate([[0], inside, [0]]))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


@dataclasses.dataclass(frozen=True)
class _Example:
    audio: np.ndarray  # float32 [Ta, 40]
    text: np.ndarray  # float32 [Tt, 29]
    labels: np.ndarray  # int32 [Ta]
    mask: np.ndarray  # bool [Ta]
    text_mask: np.ndarray  # bool [Tt]


def _check_labels(name: str, labels, shape: tuple[int, ...], data_name: str) -> np.ndarray:
    """Integer class ids, one per audio frame of the example or batch `data_name`."""
    labels = checks.as_array(name, labels)
    checks.require_shape(name, labels, shape, f"one per frame of {data_name}['audio']")
    checks.require_dtype(name, labels, "int")
    return labels


def _batch_examples(name: str, batch: Mapping) -> list[_Example]:
    checks.require_keys(name, batch, ("audio", "text", "labels"))
    audio, text = _check_streams(batch["audio"], batch["text"], batched=True, prefix=name)
    rows, frames = audio.shape[:2]
    labels = _check_labels(f"{name}['labels']", batch["labels"], (rows, frames), name)
    mask = _check_mask(f"{name}['audio_mask']", batch.get("audio_mask"), (rows, frames))
    if "text_mask" in batch:
        text_mask = _check_mask(f"{name}['text_mask']", batch["text_mask"], text.shape[:2])
    else:
        text_mask = _text_mask_from_audio(mask, text.shape[1])
    example_mask = _check_mask(f"{name}['example_mask']", batch.get("example_mask"), (rows,))
    return [
        _Example(audio[r], text[r], labels[r].astype(np.int32), mask[r], text_mask[r])
        for r in np.flatnonzero(example_mask)
    ]


def _one_example(name: str, example: Mapping) -> _Example:
    checks.require_keys(name, example, ("audio", "text", "labels"))
    audio, text = _check_streams(example["audio"], example["text"], batched=False, prefix=name)
    labels = _check_labels(f"{name}['labels']", example["labels"], audio.shape[:1], name)
    mask = np.ones(audio.shape[0], bool)
    return _Example(audio, text, labels.astype(np.int32), mask, np.ones(text.shape[0], bool))


def _as_examples(data) -> list[_Example]:
    """A batch dict, an example dict, or a sequence of either -> unpadded-or-masked examples."""
    items = [("data", data)] if isinstance(data, Mapping) else None
    if items is None:
        if not isinstance(data, Iterable):
            raise TypeError(
                f"data: expected a dict or a sequence of dicts, got {type(data).__name__}"
            )
        items = [(f"data[{i}]", item) for i, item in enumerate(data)]
    examples = []
    for name, item in items:
        if not isinstance(item, Mapping):
            raise TypeError(f"{name}: expected a dict of arrays, got {type(item).__name__}")
        if "audio" in item and np.ndim(item["audio"]) == 3:
            examples.extend(_batch_examples(name, item))
        else:
            examples.append(_one_example(name, item))
    return examples


def _rng(rng, config: BaselineConfig) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng(config.seed)
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng: expected a numpy Generator, an int seed or None, got {rng!r}")


def segment_dataset(
    data, config: BaselineConfig = BaselineConfig(), rng=None
) -> tuple[np.ndarray, np.ndarray]:
    """The fixed-segment training set: pooled features of instances and background spans.

    Every labelled instance (a maximal run of one non-background label at 10 ms, within
    the mask) is a segment of its true extent. Then
    `round(config.background_per_segment * #instances)` background segments: each draws
    a length from the instances' lengths, and a position uniformly among all placements
    inside the valid background runs of all examples that fit it (a length no run fits
    is cut to the longest background run). No background at all: no background segments.

    Args:
      data: a pipeline batch dict, an unpadded example dict ({audio, text, labels}), or a
        sequence of either (a list of batches, a list of examples, a Grain dataset...).
        Batch rows with example_mask False are skipped.
      config: `background_per_segment`, and `seed` when rng is None.
      rng: numpy Generator or int seed (default: config.seed); same rng -> same set.

    Returns:
      (X float32 [N, FEATURE_DIM], y int32 [N]): instances first (in example and time
      order), then background segments (label 0).
    """
    examples = _as_examples(data)
    generator = _rng(rng, config)
    spans = []  # (example, start, end, class)
    for index, example in enumerate(examples):
        starts, ends, classes = label_runs(example.labels, example.mask)
        spans.extend(zip([index] * len(starts), starts, ends, classes, strict=True))
    if not spans:
        raise ValueError(
            f"segment_dataset: no labelled instance (run of a non-background label) in "
            f"{len(examples)} example(s); an empty training set"
        )
    lengths = np.array([end - start for _, start, end, _ in spans], np.int64)

    regions = [
        (index, start, end)
        for index, example in enumerate(examples)
        for start, end in zip(
            *_background_runs(example.labels, example.mask, BACKGROUND), strict=True
        )
    ]
    wanted = int(round(config.background_per_segment * len(spans)))
    if regions and wanted:
        region = np.array(regions, np.int64).reshape(-1, 3)
        room = region[:, 2] - region[:, 1]
        drawn = np.minimum(generator.choice(lengths, size=wanted), room.max())
        for length in np.unique(drawn):  # sorted: the order of draws is reproducible
            count = int(np.sum(drawn == length))
            weight = np.maximum(room - length + 1, 0).astype(np.float64)
            chosen = generator.choice(len(region), size=count, p=weight / weight.sum())
            offset = generator.integers(0, room[chosen] - length + 1)
            for r, o in zip(chosen, offset, strict=True):
                start = int(region[r, 1] + o)
                spans.append((int(region[r, 0]), start, start + int(length), BACKGROUND))

    features = np.zeros((len(spans), FEATURE_DIM), np.float32)
    table = np.array([(i, s, e) for i, s, e, _ in spans], np.int64)
    for index in np.unique(table[:, 0]):
        rows = np.flatnonzero(table[:, 0] == index)
        example = examples[index]
        features[rows] = pooled_features(
            example.audio,
            example.text,
            table[rows, 1],
            table[rows, 2],
            audio_mask=example.mask,
            text_mask=example.text_mask,
        )
    return features, np.array([c for *_, c in spans], np.int32)


def _check_training_set(X, y) -> tuple[np.ndarray, np.ndarray]:
    """X float32 [N >= 1, FEATURE_DIM] finite, y int32 [N] class ids >= 0."""
    X = _check_features(X, name="X")
    if X.shape[0] == 0:
        raise ValueError(f"X: shape {X.shape}; expected at least one segment (empty training set)")
    y = checks.as_array("y", y)
    checks.require_shape("y", y, X.shape[:1], "one class id per row of X")
    checks.require_dtype("y", y, "int")
    if y.min() < 0:
        raise ValueError(f"y: expected class ids >= 0, got min {y.min()}")
    if not np.isfinite(X).all():
        raise ValueError(f"X: shape {X.shape} holds non-finite values")
    return X, y.astype(np.int32)


def _check_features(features, name: str = "features") -> np.ndarray:
    """float32 [N, FEATURE_DIM] pooled features."""
    features = checks.as_array(name, features, np.float32)
    checks.require_shape(name, features, ("N", FEATURE_DIM), "pooled features")
    return features


# --------------------------------------------------------------------------- classifiers


class SegmentClassifier(Protocol):
    """Anything with predict(features float32 [N, FEATURE_DIM]) -> int labels [N]."""

    def predict(self, features: np.ndarray) -> np.ndarray: ...


@dataclasses.dataclass(frozen=True)
class ForestClassifier:
    """A fitted scikit-learn random forest over pooled segment features."""

    model: RandomForestClassifier

    def predict(self, features) -> np.ndarray:
        """int32 [N] class ids of features float32 [N, FEATURE_DIM]."""
        features = _check_features(features)
        if features.shape[0] == 0:
            return np.zeros(0, np.int32)
        return np.asarray(self.model.predict(features)).astype(np.int32)


def fit_random_forest(X, y, config: BaselineConfig = BaselineConfig()) -> ForestClassifier:
    """Fits `RandomForestClassifier(n_estimators, max_depth, random_state=seed, n_jobs)`."""
    X, y = _check_training_set(X, y)
    model = RandomForestClassifier(
        n_estimators=config.n_estimators,
        max_depth=config.max_depth,
        random_state=config.seed,
        n_jobs=config.n_jobs,
    )
    return ForestClassifier(model.fit(X, y))


class FeedForward(nn.Module):
    """Dense-ReLU stack; returns logits (softmax applied by the loss and predict_proba)."""

    hidden: tuple[int, ...]
    num_classes: int

    @nn.compact
    def __call__(self, x):
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.num_classes)(x)


@functools.lru_cache(maxsize=16)
def _fnn_trainer(hidden: tuple[int, ...], num_classes: int, optimizer: OptimizerConfig):
    """(tx, step): the optimiser and a jitted step(state, x, y, weight) -> (state, mean
    loss), built once per setting so that repeated fits share one compilation."""
    module = FeedForward(hidden, num_classes)
    tx = make_optimizer(optimizer)

    @jax.jit
    def step(state: TrainState, x, y, weight):
        def loss_fn(params):
            return cross_entropy(module.apply(params, x), y, weight)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads), loss

    return tx, step


@functools.partial(jax.jit, static_argnames=("hidden", "num_classes"))
def fnn_probabilities(params, mean, scale, features, *, hidden, num_classes):
    """Softmax class probabilities [N, num_classes] of raw features [N, FEATURE_DIM]."""
    logits = FeedForward(hidden, num_classes).apply(params, (features - mean) / scale)
    return jax.nn.softmax(logits, axis=-1)


@dataclasses.dataclass(frozen=True)
class FNNClassifier:
    """A trained feed-forward network and the train-set standardisation it needs."""

    params: Any  # flax parameters of FeedForward(hidden, num_classes)
    mean: np.ndarray  # float32 [FEATURE_DIM] train feature means
    scale: np.ndarray  # float32 [FEATURE_DIM] train feature stds (1 where constant)
    hidden: tuple[int, ...]
    num_classes: int
    losses: np.ndarray  # float32 [epochs] mean minibatch loss per epoch

    def predict_proba(self, features) -> np.ndarray:
        """float32 [N, num_classes] softmax outputs of features float32 [N, FEATURE_DIM]."""
        features = _check_features(features)
        count = features.shape[0]
        padded = max(64, 1 << max(count - 1, 0).bit_length())  # few jit shapes
        rows = np.zeros((padded, FEATURE_DIM), np.float32)
        rows[:count] = features
        probs = fnn_probabilities(
            self.params,
            self.mean,
            self.scale,
            rows,
            hidden=self.hidden,
            num_classes=self.num_classes,
        )
        return np.asarray(probs)[:count]

    def predict(self, features) -> np.ndarray:
        """int32 [N] most probable class of each row."""
        return self.predict_proba(features).argmax(axis=-1).astype(np.int32)


def fit_fnn(
    X, y, config: BaselineConfig = BaselineConfig(), num_classes: int | None = None
) -> FNNClassifier:
    """Trains FeedForward(config.hidden) on standardised features with AdamW at the
    constant config.learning_rate, unclipped (`speechkit.optim.OptimizerConfig.constant_rate`).

    Softmax cross-entropy (`speechkit.losses.cross_entropy`), `BaselineConfig.epochs` passes over
    minibatches of min(batch_size, N) rows in a seeded random order (the last short
    minibatch padded with zero-weight rows, so one jitted step serves all).
    Initialisation and order come from config.seed: same inputs and config -> same
    parameters.

    num_classes: output width (default: max(y) + 1, at least 2).
    """
    X, y = _check_training_set(X, y)
    classes = max(int(y.max()) + 1, 2) if num_classes is None else num_classes
    classes = checks.require_int("num_classes", classes, at_least=2)
    if y.max() >= classes:
        raise ValueError(f"y: class {y.max()} out of range for num_classes={classes}")
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale = np.where(scale > 1e-6, scale, 1.0).astype(np.float32)
    standard = (X - mean) / scale

    hidden = config.hidden
    optimizer = OptimizerConfig.constant_rate(
        float(config.learning_rate), float(config.weight_decay), clip_norm=None
    )
    tx, step = _fnn_trainer(hidden, classes, optimizer)
    params = FeedForward(hidden, classes).init(
        jax.random.PRNGKey(config.seed), jnp.zeros((1, FEATURE_DIM), jnp.float32)
    )
    state = TrainState.for_optimizer(params, tx)
    order_rng = np.random.default_rng(config.seed)
    count = X.shape[0]
    size = min(config.batch_size, count)
    steps = -(-count // size)
    losses = np.zeros(config.epochs, np.float32)
    for epoch in range(config.epochs):
        order = np.zeros(steps * size, np.int64)
        order[:count] = order_rng.permutation(count)
        weight = (np.arange(steps * size) < count).astype(np.float32)
        epoch_loss = 0.0
        for s in range(steps):
            batch = slice(s * size, (s + 1) * size)
            rows = order[batch]
            state, loss = step(state, standard[rows], y[rows], weight[batch])
            epoch_loss += loss * weight[batch].sum()
        losses[epoch] = float(epoch_loss) / count
    return FNNClassifier(
        params=state.params,
        mean=mean.astype(np.float32),
        scale=scale,
        hidden=hidden,
        num_classes=classes,
        losses=losses,
    )


# ------------------------------------------------------------------------------ streaming


def window_ends(frames: int, config: BaselineConfig = BaselineConfig()) -> np.ndarray:
    """Exclusive end frames of the sliding windows over `frames` 10 ms steps, int64 [J].

    The grid: window_frames + j * hop_frames for j >= 0 (full windows), plus earlier
    points of the same grid down to min_window_frames (shorter, left-truncated windows).
    """
    window, hop, shortest = config.window_frames, config.hop_frames, config.min_window_frames
    first = window - ((window - shortest) // hop) * hop
    return np.arange(first, frames + 1, hop, dtype=np.int64)


def sliding_labels(
    classifier: SegmentClassifier,
    audio,
    text,
    mask=None,
    config: BaselineConfig = BaselineConfig(),
    *,
    text_mask=None,
) -> np.ndarray:
    """Runs a segment classifier causally as a sliding window: int32 labels at 10 ms.

    Windows of config.window_s end every config.hop_s (`window_ends`); the window whose
    last frame is k labels timesteps k .. (next window's last frame - 1), so a label never
    depends on later audio or text. Timesteps before the first window's last frame are
    background (0); so are masked timesteps. All windows of the batch are pooled at once
    with cumulative sums and classified in one `classifier.predict` call; a window with
    no valid audio frame is background without being classified.

    Args:
      classifier: anything with predict(float32 [N, FEATURE_DIM]) -> int [N]
        (`ForestClassifier`, `FNNClassifier`, a fitted scikit-learn estimator).
      audio: float [B, Ta, 40] (or [Ta, 40]); text: float [B, Tt, 29] with
        |Tt - Ta // 2| <= 1 (or [Tt, 29]).
      mask: optional bool [B, Ta] (or [Ta]), False = padding; default all valid.
      text_mask: optional bool [B, Tt]; default from mask (frame i valid when audio
        frame 2i + 1 is).

    Returns:
      int32 [B, Ta] (or [Ta]) class ids.
    """
    batched = np.ndim(audio) == 3
    audio, text = _check_streams(audio, text, batched=batched)
    if not batched:
        audio, text = audio[None], text[None]
        mask = None if mask is None else np.asarray(mask)[None]
        text_mask = None if text_mask is None else np.asarray(text_mask)[None]
    rows, frames = audio.shape[:2]
    mask = _check_mask("mask", mask, (rows, frames))
    if text_mask is None:
        text_mask = _text_mask_from_audio(mask, text.shape[1])
    text_mask = _check_mask("text_mask", text_mask, text.shape[:2])

    labels = np.zeros((rows, frames), np.int32)
    ends = window_ends(frames, config)
    if ends.size == 0 or rows == 0:
        return labels if batched else labels[0]
    starts = np.maximum(ends - config.window_frames, 0)
    features = pooled_features(
        audio, text, starts, ends, audio_mask=mask, text_mask=text_mask
    )  # [B, J, D]
    valid_count = np.cumsum(np.concatenate([np.zeros((rows, 1)), mask], axis=1), axis=1)
    has_audio = (valid_count[:, ends] - valid_count[:, starts]) > 0  # [B, J]
    window_pred = np.zeros(has_audio.shape, np.int32)
    if has_audio.any():
        predicted = np.asarray(classifier.predict(features[has_audio]))
        if predicted.shape != (int(has_audio.sum()),):
            raise ValueError(
                f"classifier.predict: returned shape {predicted.shape}; "
                f"expected ({int(has_audio.sum())},)"
            )
        window_pred[has_audio] = predicted.astype(np.int32)
    # Timestep t takes the latest window whose last frame (end - 1) is <= t.
    latest = np.searchsorted(ends - 1, np.arange(frames), side="right") - 1  # [Ta], -1 = none
    labels = np.where(latest >= 0, window_pred[:, np.maximum(latest, 0)], BACKGROUND)
    labels = np.where(mask, labels, 0).astype(np.int32)
    return labels if batched else labels[0]


def sliding_labels_batch(
    classifier: SegmentClassifier, batch: Mapping, config: BaselineConfig = BaselineConfig()
) -> np.ndarray:
    """`sliding_labels` over a pipeline batch: int32 [B, Ta], 0 on padding and filler rows."""
    checks.require_keys("batch", batch, ("audio", "text", "audio_mask"))
    mask = checks.as_array("batch['audio_mask']", batch["audio_mask"])
    if "example_mask" in batch:
        example_mask = checks.as_array("batch['example_mask']", batch["example_mask"])
        checks.require_shape("batch['example_mask']", example_mask, mask.shape[:1])
        mask = mask & example_mask[:, None]
    text_mask = batch.get("text_mask")
    if text_mask is not None and "example_mask" in batch:
        text_mask = np.asarray(text_mask) & np.asarray(batch["example_mask"])[:, None]
    return sliding_labels(
        classifier, batch["audio"], batch["text"], mask, config, text_mask=text_mask
    )
