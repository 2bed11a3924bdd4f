"""Streaming post-processing of MultiQT's label stream: a causal minimum-duration rule.

MultiQT's per-frame labels flicker, and every short run is a predicted instance, so
INSTANCE precision falls. `smooth` switches the output to a class only once the class
has held `SmoothingConfig.min_frames` (k) consecutive valid frames, seeing only the
past, at a latency of k - 1 frames (`SmoothingConfig.latency_frames`):

    config = SmoothingConfig(min_frames=3)
    smoothed = smooth(pred, mask, config)                    # int32 [B, T]
    state = initial_state(batch_size, config)
    labels, out_mask, state = step(pred_block, mask_block, state, config)   # live use

Blocks give `smooth`'s labels over any partition; masked frames are skipped; optional
hysteresis (`enter`, `exit`) on logits. The rule exactly: docs/models.md, "Smoothing".
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from speechkit import checks


@dataclasses.dataclass(frozen=True)
class SmoothingConfig:
    """The causal minimum-duration rule and its optional probability hysteresis."""

    # A class must hold this many consecutive valid frames before the output switches to
    # it (background included); 1 = no smoothing.
    min_frames: int = 3
    background: int = 0  # the non-question class: output before any switch and on masked frames
    # Hysteresis on softmax probabilities (needs logits): enter a class at p >= enter,
    # hold the current one while its p >= exit. Both None (off) or 0 < exit <= enter <= 1.
    enter: float | None = None
    exit: float | None = None

    def __post_init__(self):
        field = "SmoothingConfig.{}".format
        checks.require_int(field("min_frames"), self.min_frames, at_least=1)
        checks.require_int(field("background"), self.background, at_least=0)
        if (self.enter is None) != (self.exit is None):
            missing = "exit" if self.exit is None else "enter"
            raise ValueError(f"{field(missing)}: expected a number when the other threshold is set")
        if self.enter is not None:
            checks.require_number(field("exit"), self.exit, above=0, at_most=1)
            checks.require_number(field("enter"), self.enter, above=0, at_most=1)
            checks.require_at_most(field("exit"), self.exit, "enter", self.enter)

    @property
    def latency_frames(self) -> int:
        """Output frames between a true switch and its appearance in the output: k - 1."""
        return self.min_frames - 1

    @property
    def hysteresis(self) -> bool:
        """Whether the probability thresholds are on (the stream must then be logits)."""
        return self.enter is not None


class SmoothingState(NamedTuple):
    """The rule's state per stream, int32 [B] each."""

    output: jax.Array  # the label emitted at the latest valid frame
    candidate: jax.Array  # the label (or proposal) of the latest valid frame
    count: jax.Array  # valid frames the candidate has held, at most min_frames


def initial_state(batch_size: int, config: SmoothingConfig) -> SmoothingState:
    """The state before a stream's first frame: as if it had been background for ever."""
    batch_size = checks.require_int("batch_size", batch_size, at_least=0)

    def full(value):
        return jnp.full((batch_size,), value, jnp.int32)

    return SmoothingState(
        output=full(config.background),
        candidate=full(config.background),
        count=full(config.min_frames),
    )


def _check_stream(stream, mask, config: SmoothingConfig):
    """(batch, frames) of labels int [B, T] or logits float [B, T, C], after the checks."""
    if getattr(stream, "ndim", None) == 3:
        batch, frames, classes = checks.require_shape("logits", stream, ("B", "T", "C"))
        checks.require_dtype("logits", stream, "float")
        if config.background >= classes:
            raise ValueError(
                f"SmoothingConfig.background: expected < {classes} (the logits' classes), "
                f"got {config.background}"
            )
    else:
        batch, frames = checks.require_shape("labels", stream, ("B", "T"), "or logits [B, T, C]")
        checks.require_dtype("labels", stream, "int")
        if config.hysteresis:
            raise ValueError(
                "SmoothingConfig.enter: the probability thresholds need logits [B, T, C], "
                "got labels [B, T]"
            )
    if mask is not None:
        checks.require_mask("mask", mask, (batch, frames))
    return batch, frames


def _check_state(state: SmoothingState, batch: int) -> None:
    if not isinstance(state, SmoothingState):
        raise TypeError(f"state: expected a SmoothingState, got {type(state).__name__}")
    for name, value in state._asdict().items():
        checks.require_shape(f"state.{name}", value, (batch,))
        checks.require_dtype(f"state.{name}", value, "int")


def _evidence(stream, config: SmoothingConfig):
    """(labels int32 [B, T], probabilities float32 [B, T, C] or None) of a stream."""
    if stream.ndim == 2:
        return stream.astype(jnp.int32), None
    labels = jnp.argmax(stream, axis=-1).astype(jnp.int32)
    if not config.hysteresis:
        return labels, None
    return labels, jax.nn.softmax(stream.astype(jnp.float32), axis=-1)


def _proposal(labels, probabilities, output, config: SmoothingConfig):
    """int32 [B]: one frame's label after the hysteresis (see the module docstring)."""
    if probabilities is None:
        return labels
    background = config.background
    p_output = jnp.take_along_axis(probabilities, output[:, None], axis=-1)[:, 0]
    p_label = jnp.take_along_axis(probabilities, labels[:, None], axis=-1)[:, 0]
    hold = (output != background) & (p_output >= config.exit)
    enter = (labels != background) & (p_label >= config.enter)
    return jnp.where(hold, output, jnp.where(enter, labels, background))


def _advance(state: SmoothingState, frame, config: SmoothingConfig):
    """One frame of every stream: (new state, output labels int32 [B])."""
    labels, probabilities, valid = frame
    proposal = _proposal(labels, probabilities, state.output, config)
    held = proposal == state.candidate
    count = jnp.where(held, jnp.minimum(state.count + 1, config.min_frames), 1)
    output = jnp.where(count >= config.min_frames, proposal, state.output)
    advanced = SmoothingState(output=output, candidate=proposal, count=count)
    state = SmoothingState(
        *(jnp.where(valid, new, old) for new, old in zip(advanced, state, strict=True))
    )
    return state, jnp.where(valid, state.output, config.background)


def step(stream, mask, state: SmoothingState, config: SmoothingConfig):
    """One block of every stream -> (labels int32 [B, n], mask bool [B, n], state).

    Args:
      stream: the block's labels int [B, n], or logits float [B, n, C] (argmax labels;
        softmax probabilities for the hysteresis).
      mask: bool [B, n], False on padding; None: all valid. Returned as the output mask
        (the output clock is the input's: output frame t describes frame t).
      state: from `initial_state` or the previous step.
      config: the rule; static under `jax.jit`.
    """
    batch, frames = _check_stream(stream, mask, config)
    _check_state(state, batch)
    stream = jnp.asarray(stream)
    mask = jnp.ones((batch, frames), bool) if mask is None else jnp.asarray(mask)
    labels, probabilities = _evidence(stream, config)
    time_major = (
        labels.T,
        None if probabilities is None else jnp.swapaxes(probabilities, 0, 1),
        mask.T,
    )
    state = SmoothingState(*(jnp.asarray(value, jnp.int32) for value in state))
    state, outputs = jax.lax.scan(lambda s, f: _advance(s, f, config), state, time_major)
    return outputs.T, mask, state


def smooth(stream, mask, config: SmoothingConfig) -> jax.Array:
    """Smoothed labels int32 [B, T] of whole streams (module docstring: the rule).

    Args:
      stream: labels int [B, T] (e.g. `multiqt_jax.train.predict`'s first output) or
        logits float [B, T, C] at one output clock (40 ms for MultiQT).
      mask: bool [B, T], False on padding (output background there); None: all valid.
      config: a `SmoothingConfig`; static under `jax.jit`.
    """
    batch, _ = _check_stream(stream, mask, config)
    labels, _, _ = step(stream, mask, initial_state(batch, config), config)
    return labels
