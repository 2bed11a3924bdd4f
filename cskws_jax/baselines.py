"""Sliding-window keyword classifier: the CS-KWS baseline that AF-KWS is compared with.

A classifier (`WindowClassifier`) labels fixed windows of log-mel frames on a regular
grid (`extract_windows`, `window_labels`: keyword, unknown or silence) and its windows'
keyword probabilities become detections (`detections`) in the format of
`metrics.detection_scores`. The specification (window grid, label rule, classifier,
detections) and a usage example are in docs/models.md, "The sliding-window keyword
classifier".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from cskws_jax import decode
from cskws_jax.input_pipeline import HOP_S
from speechkit import checks
from speechkit.losses import cross_entropy
from speechkit.optim import OptimizerConfig, TrainState

NUM_MELS = 64  # log-mel bands of the KWS front end (cskws_jax.datasets.features)
TOLERANCE = 1e-5  # slack on the overlap shares, for float32 rounding of times


def unknown_class(num_keywords: int) -> int:
    """Class id of the *unknown* class (other words, partial keywords): K."""
    return num_keywords


def silence_class(num_keywords: int) -> int:
    """Class id of *silence* (no word overlaps the window enough): K + 1."""
    return num_keywords + 1


def num_classes(num_keywords: int) -> int:
    """Classifier outputs: K keywords, unknown, silence."""
    return num_keywords + 2


# ----------------------------------------------------------------------------- config


@dataclasses.dataclass(frozen=True)
class WindowConfig:
    """Every setting of the sliding-window baseline; hashable (a static jit argument).
    Times in seconds, whole multiples of the 10 ms frame."""

    window_s: float = 0.8  # window length, about one keyword
    hop_s: float = 0.1  # one window every hop_s
    # labels (module docstring)
    min_overlap: float = 0.8  # share of a keyword inside a window to label it that keyword
    word_overlap: float = 0.5  # share of any word inside to label the window unknown
    # classifier
    channels: tuple[int, ...] = (32, 64, 64)  # one conv layer each
    kernel: int = 5  # conv kernel (frames)
    pool: int = 2  # max-pool size and stride (frames) after each conv
    hidden: int = 64  # dense layer before the logits
    # learning (AdamW, constant rate, global-norm clipping)
    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    clip_norm: float = 1.0
    # detections
    radius: int = 1  # local-maximum neighbourhood, in windows
    min_score: float = 0.05  # lowest keyword probability of a detection

    def __post_init__(self):
        field = "WindowConfig.{}".format
        for name in ("window_s", "hop_s"):
            checks.require_frames(field(name), getattr(self, name), HOP_S)
        for name in ("min_overlap", "word_overlap"):
            checks.require_number(field(name), getattr(self, name), above=0, at_most=1)
        checks.require_at_most(
            field("word_overlap"), self.word_overlap, "min_overlap", self.min_overlap
        )
        channels = checks.require_ints(field("channels"), self.channels, at_least=1, non_empty=True)
        object.__setattr__(self, "channels", channels)
        for name in ("kernel", "pool", "hidden"):
            checks.require_int(field(name), getattr(self, name), at_least=1)
        checks.require_number(field("learning_rate"), self.learning_rate, above=0)
        checks.require_number(field("weight_decay"), self.weight_decay, at_least=0)
        checks.require_number(field("clip_norm"), self.clip_norm, above=0)
        checks.require_int(field("radius"), self.radius, at_least=0)
        checks.require_number(field("min_score"), self.min_score, at_least=0, at_most=1)

    @property
    def window_frames(self) -> int:
        return checks.require_frames("WindowConfig.window_s", self.window_s, HOP_S)

    @property
    def hop_frames(self) -> int:
        return checks.require_frames("WindowConfig.hop_s", self.hop_s, HOP_S)

    def num_windows(self, num_frames: int) -> int:
        """Windows on a batch of `num_frames` frames (at least 1: short audio is padded)."""
        return max(num_frames - self.window_frames, 0) // self.hop_frames + 1


# ----------------------------------------------------------------------------- checks


def _require_num_keywords(num_keywords) -> int:
    return checks.require_int("num_keywords", num_keywords, at_least=1)


def _check_audio(audio, audio_mask) -> tuple[int, int]:
    """audio float [B, T, 64], audio_mask bool [B, T] -> (B, T)."""
    batch_size, frames, _ = checks.require_shape("audio", audio, ("B", "T", NUM_MELS), "log-mel")
    checks.require_dtype("audio", audio, "float")
    checks.require_mask("audio_mask", audio_mask, (batch_size, frames), "audio's [B, T]")
    return batch_size, frames


def _check_events(batch_size: int, start, end, label, valid) -> None:
    """Events start, end float, label int, valid bool: one shape [B, E]."""
    shape = checks.require_shape("start", start, (batch_size, "E"))
    for name, value in (("end", end), ("label", label), ("valid", valid)):
        checks.require_shape(name, value, shape, "start's shape")
    checks.require_dtype("valid", valid, "bool")
    checks.require_dtype("label", label, "int")


def _example_mask(batch: Mapping, batch_size: int):
    if "example_mask" not in batch:
        return jnp.ones((batch_size,), bool)
    checks.require_shape("example_mask", batch["example_mask"], (batch_size,))
    return jnp.asarray(batch["example_mask"], bool)


# ----------------------------------------------------------------------------- windows


def _grid(num_windows: int, config: WindowConfig) -> tuple[jax.Array, jax.Array]:
    first = jnp.arange(num_windows) * config.hop_frames
    start = first.astype(jnp.float32) * HOP_S
    return start, (first + config.window_frames).astype(jnp.float32) * HOP_S


def window_times(num_frames: int, config: WindowConfig) -> tuple[jax.Array, jax.Array]:
    """(start, end) float32 [N] seconds of the windows on `num_frames` frames."""
    return _grid(config.num_windows(num_frames), config)


def _frame_index(num_frames: int, config: WindowConfig) -> jax.Array:
    first = jnp.arange(config.num_windows(num_frames)) * config.hop_frames
    return first[:, None] + jnp.arange(config.window_frames)[None, :]  # [N, W]


def _pad_to_window(audio, audio_mask, config: WindowConfig):
    missing = config.window_frames - audio.shape[1]
    if missing > 0:
        audio = jnp.pad(audio, ((0, 0), (0, missing), (0, 0)))
        audio_mask = jnp.pad(audio_mask, ((0, 0), (0, missing)))
    return audio, audio_mask


def extract_windows(audio, audio_mask, config: WindowConfig) -> tuple[jax.Array, jax.Array]:
    """Windows of a padded batch by one gather: audio float [B, T, 64], audio_mask bool
    [B, T] -> (windows float [B, N, W, 64], window_mask bool [B, N]: all frames valid)."""
    _check_audio(audio, audio_mask)
    audio, audio_mask = _pad_to_window(jnp.asarray(audio), jnp.asarray(audio_mask), config)
    index = _frame_index(audio.shape[1], config)
    return audio[:, index], jnp.all(audio_mask[:, index], axis=-1)


def window_labels(
    start, end, label, valid, audio_mask, config: WindowConfig, num_keywords: int
) -> tuple[jax.Array, jax.Array]:
    """Class of every window (module docstring): events start, end float [B, E] seconds,
    label int [B, E] (0..K-1 keywords, K unknown), valid bool [B, E]; audio_mask bool
    [B, T]. Returns (labels int32 [B, N] in 0..K+1, mask bool [B, N]). Pure jnp."""
    num_keywords = _require_num_keywords(num_keywords)
    batch_size, num_frames = checks.require_shape("audio_mask", audio_mask, ("B", "T"))
    _check_events(batch_size, start=start, end=end, label=label, valid=valid)
    audio_mask = jnp.asarray(audio_mask, bool)
    if num_frames < config.window_frames:
        audio_mask = jnp.pad(audio_mask, ((0, 0), (0, config.window_frames - num_frames)))
    window_mask = jnp.all(audio_mask[:, _frame_index(audio_mask.shape[1], config)], axis=-1)
    window_start, window_end = window_times(audio_mask.shape[1], config)

    start = jnp.asarray(start, jnp.float32)[:, None, :]  # [B, 1, E]
    end = jnp.asarray(end, jnp.float32)[:, None, :]
    label = jnp.asarray(label, jnp.int32)[:, None, :]
    length = end - start
    window_start, window_end = window_start[None, :, None], window_end[None, :, None]
    seconds_inside = jnp.maximum(
        0.0, jnp.minimum(end, window_end) - jnp.maximum(start, window_start)
    )  # [B, N, E]
    inside = seconds_inside / jnp.where(length > 0, length, 1.0)
    counts = jnp.asarray(valid, bool)[:, None, :] & (length > 0)
    keyword = counts & (label >= 0) & (label < num_keywords)
    is_keyword = keyword & (inside >= config.min_overlap - TOLERANCE)
    best = jnp.argmax(jnp.where(is_keyword, seconds_inside, -1.0), axis=-1)  # first on ties
    best_label = jnp.take_along_axis(jnp.broadcast_to(label, is_keyword.shape), best[..., None], -1)
    speech = counts & (label >= 0) & (label <= num_keywords)
    is_speech = speech & (inside >= config.word_overlap - TOLERANCE)
    classes = jnp.where(
        jnp.any(is_keyword, axis=-1),
        best_label[..., 0],
        jnp.where(jnp.any(is_speech, axis=-1), num_keywords, num_keywords + 1),
    )
    classes = jnp.where(window_mask, classes, num_keywords + 1)
    return classes.astype(jnp.int32), window_mask


# ----------------------------------------------------------------------------- classifier


def max_pool(x, size: int):
    """Maxima over windows of `size` frames at stride `size` with SAME padding: x float
    [N, L, C] -> [N, ceil(L / size), C]. Values and gradients equal `flax.linen.max_pool`'s
    (the first of tied maxima takes the gradient), built from comparisons: XLA:CPU runs
    reduce_window's gradient (select-and-scatter) as a scan over index arrays of the
    whole input, which made the classifier's training step 1.2x slower (benchmarks.pooling)."""
    frames = x.shape[1]
    pooled = -(-frames // size)
    missing = pooled * size - frames
    if missing:
        x = jnp.pad(
            x, ((0, 0), (missing // 2, missing - missing // 2), (0, 0)), constant_values=-jnp.inf
        )
    x = x.reshape(x.shape[0], pooled, size, x.shape[2])
    best = x[:, :, 0]
    for j in range(1, size):
        candidate = x[:, :, j]
        best = jnp.where((candidate > best) | jnp.isnan(candidate), candidate, best)
    return best


class WindowClassifier(nn.Module):
    """Log-mel windows [..., W, 64] -> logits [..., num_classes] (module docstring)."""

    config: WindowConfig
    num_classes: int

    @nn.compact
    def __call__(self, windows):
        lead = windows.shape[:-2]
        x = windows.reshape((-1, *windows.shape[-2:]))
        for i, channels in enumerate(self.config.channels):
            x = nn.Conv(channels, (self.config.kernel,), padding="SAME", name=f"conv{i}")(x)
            x = nn.relu(nn.LayerNorm(name=f"norm{i}")(x))
            x = max_pool(x, self.config.pool)
        x = jnp.concatenate([jnp.mean(x, axis=1), jnp.max(x, axis=1)], axis=-1)
        x = nn.relu(nn.Dense(self.config.hidden, name="hidden")(x))
        logits = nn.Dense(self.num_classes, name="logits")(x)
        return logits.reshape((*lead, self.num_classes))


def classifier(config: WindowConfig, num_keywords: int) -> WindowClassifier:
    return WindowClassifier(config, num_classes(_require_num_keywords(num_keywords)))


def init_params(config: WindowConfig, num_keywords: int, rng) -> Any:
    """Classifier parameters for K = num_keywords keywords."""
    windows = jnp.zeros((1, config.window_frames, NUM_MELS), jnp.float32)
    return classifier(config, num_keywords).init(rng, windows)


def optimizer_config(config: WindowConfig) -> OptimizerConfig:
    """AdamW at the constant `learning_rate`, after global-norm gradient clipping."""
    return OptimizerConfig.constant_rate(
        config.learning_rate, config.weight_decay, clip_norm=config.clip_norm
    )


def create_train_state(config: WindowConfig, num_keywords: int, rng) -> TrainState:
    """Initial parameters and AdamW state (`speechkit.optim.TrainState`)."""
    return TrainState.create(init_params(config, num_keywords, rng), optimizer_config(config))


def window_probabilities(
    params, batch: Mapping, config: WindowConfig, num_keywords: int
) -> tuple[jax.Array, jax.Array]:
    """Class probabilities of every window of a batch (audio, audio_mask, optional
    example_mask): (float32 [B, N, K + 2] softmax, window_mask bool [B, N])."""
    checks.require_keys("batch", batch, ("audio", "audio_mask"))
    batch_size, _ = _check_audio(batch["audio"], batch["audio_mask"])
    windows, mask = extract_windows(batch["audio"], batch["audio_mask"], config)
    mask = mask & _example_mask(batch, batch_size)[:, None]
    logits = classifier(config, num_keywords).apply(params, windows)
    return jax.nn.softmax(logits.astype(jnp.float32), axis=-1), mask


def _logits_and_labels(params, batch: Mapping, config: WindowConfig, num_keywords: int):
    checks.require_keys("batch", batch, ("audio", "audio_mask", "start", "end", "label", "valid"))
    batch_size, _ = _check_audio(batch["audio"], batch["audio_mask"])
    windows, mask = extract_windows(batch["audio"], batch["audio_mask"], config)
    labels, _ = window_labels(
        batch["start"],
        batch["end"],
        batch["label"],
        batch["valid"],
        batch["audio_mask"],
        config,
        num_keywords,
    )
    mask = mask & _example_mask(batch, batch_size)[:, None]
    logits = classifier(config, num_keywords).apply(params, windows)
    return logits, labels, mask


def loss(params, batch: Mapping, config: WindowConfig, num_keywords: int, class_weights=None):
    """Cross-entropy over the valid windows of a batch (training crops or whole
    utterances), weighted by class_weights float [K + 2] (default 1): the weighted mean
    (0 when no window is valid)."""
    num_keywords = _require_num_keywords(num_keywords)
    if class_weights is not None:
        checks.require_shape("class_weights", class_weights, (num_classes(num_keywords),), "K + 2")
    logits, labels, mask = _logits_and_labels(params, batch, config, num_keywords)
    return cross_entropy(logits, labels, mask, class_weights)


def train_step(
    state: TrainState, batch: Mapping, config: WindowConfig, num_keywords: int, class_weights=None
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One AdamW step on the windows of a batch -> (new state, {"loss", "grad_norm",
    "windows": number of valid windows})."""
    value, grads = jax.value_and_grad(loss)(
        state.params, batch, config, num_keywords, class_weights
    )
    new_state = state.apply_gradients(grads)
    _, mask = extract_windows(batch["audio"], batch["audio_mask"], config)
    mask = mask & _example_mask(batch, mask.shape[0])[:, None]
    stats = {"loss": value, "grad_norm": optax.tree.norm(grads), "windows": jnp.sum(mask)}
    return new_state, stats


# ----------------------------------------------------------------------------- detections


def window_detections(
    probability, window_mask, config: WindowConfig, num_keywords: int, max_detections: int = 64
) -> dict[str, jax.Array]:
    """Window probabilities float [B, N, C >= K] (of the grid `window_times`) and
    window_mask bool [B, N] -> detections {start, end, score float32 [B, D]; label int32
    [B, D]; valid bool [B, D]}, D = max_detections (module docstring)."""
    num_keywords = _require_num_keywords(num_keywords)
    max_detections = checks.require_int("max_detections", max_detections, at_least=1)
    shape = checks.require_shape("probability", probability, ("B", "N", "C"))
    if shape[-1] < num_keywords:
        raise ValueError(f"probability: shape {shape}; expected C >= num_keywords={num_keywords}")
    checks.require_shape("window_mask", window_mask, shape[:2], "probability's [B, N]")
    probability = jnp.asarray(probability, jnp.float32)
    window_mask = jnp.asarray(window_mask, bool)
    is_peak = decode.peaks(
        probability,
        window_mask,
        num_keywords=num_keywords,
        radius=config.radius,
        min_score=config.min_score,
    )
    start, end = _grid(shape[1], config)
    fields = {
        "start": jnp.broadcast_to(start, shape[:2]),
        "end": jnp.broadcast_to(end, shape[:2]),
    }
    found, _ = decode.best_peaks(is_peak, probability[..., :num_keywords], fields, max_detections)
    return found


def detections(
    params, batch: Mapping, config: WindowConfig, num_keywords: int, max_detections: int = 64
) -> dict[str, jax.Array]:
    """The classifier over every window of whole utterances (batch: audio float
    [B, T, 64], audio_mask bool [B, T], optional example_mask bool [B]) -> detections
    {start, end, score float32 [B, D]; label int32 [B, D]; valid bool [B, D]} in seconds,
    D = max_detections. Jittable with config, num_keywords, max_detections static."""
    _require_num_keywords(num_keywords)
    checks.require_int("max_detections", max_detections, at_least=1)
    probability, mask = window_probabilities(params, batch, config, num_keywords)
    return window_detections(probability, mask, config, num_keywords, max_detections)
