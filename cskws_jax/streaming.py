"""Keyword detection over unbounded audio, block by block, with explicit state.

    detector = StreamDetector(net, params, block_outputs=5)    # 5 x 40 ms = 200 ms blocks
    state = detector.initial_state(batch_size)
    found, state = detector.step(features_block, mask_block, state)   # per arriving block
    ...
    # at the end of the stream: flush_frames() zero frames, masked out
    tail = detector.flush_frames()
    found, state = detector.step(np.zeros((B, tail, 64)), np.zeros((B, tail), bool), state)

A block holds `block_frames` (= block_outputs * output_stride) log-mel frames of 10 ms;
any multiple of output_stride works (each new size compiles once). `found` holds, for
each output position decided in that step, the keyword peaks (`peak` bool [B, n, K])
with `score`, `start`, `end` (s) and `emitted` (s of audio consumed when the decision
was made). A position is decided once the heads of its `radius` right neighbours exist,
i.e. `delay + radius` output frames after its own frame arrived: `latency_s` = (delay +
radius + 1) output hops after the start of its frame. The decisions are `decode.peaks`
applied frame by frame, so concatenating every step's `found` along the position axis
and keeping the best `max_detections` (`collect`) gives exactly `decode.decode` of the
whole-utterance call (tests/cskws_jax/test_streaming.py). `detect` does all of that for
a whole batch (blocks, flush, `collect`) with `lax.scan` in jit.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from cskws_jax import decode as decode_lib
from cskws_jax import model as model_lib

FRAME_S = 0.01


class StreamDetector:
    def __init__(
        self,
        net: model_lib.AfKws,
        params,
        block_outputs: int = 1,
        radius: int = 1,
        min_score: float = 0.1,
    ):
        if block_outputs < 1:
            raise ValueError(f"block_outputs: expected >= 1, got {block_outputs}")
        self.net, self.params = net, params
        self.config = net.config
        self.block_outputs, self.radius, self.min_score = block_outputs, radius, min_score
        self.spec = model_lib.streaming_spec(self.config)
        self.step = jax.jit(self._step)
        self._scan = jax.jit(self._scan_blocks)

    @property
    def block_frames(self) -> int:
        """Input frames (10 ms) per step."""
        return self.block_outputs * self.config.output_stride

    @property
    def latency_s(self) -> float:
        """Algorithmic latency: audio that must follow a position before it is decided."""
        return (self.config.delay + self.radius + 1) * self.spec.output_hop_s

    def initial_state(self, batch_size: int):
        classes, edge = self.config.num_classes, 2 * self.radius
        return {
            "backbone": self.net.apply(self.params, batch_size, method=self.net.initial_state),
            "mask_fifo": jnp.zeros((batch_size, self.config.delay), bool),
            "probability": jnp.zeros((batch_size, edge, classes), jnp.float32),
            "length": jnp.zeros((batch_size, edge), jnp.float32),
            "offset": jnp.zeros((batch_size, edge), jnp.float32),
            "mask": jnp.zeros((batch_size, edge), bool),
            "frames_in": jnp.zeros((), jnp.int32),  # input frames consumed
        }

    def _step(self, block, block_mask, state):
        """block float [B, block_frames', F] (a multiple of output_stride), block_mask bool
        [B, same] -> (decisions for the block's n output positions, new state)."""
        stride, hop = self.config.output_stride, self.spec.output_hop_s
        heads, backbone = self.net.apply(
            self.params, block, state["backbone"], block_mask, method=self.net.step
        )
        n = heads["length"].shape[1]
        arrived = jnp.concatenate([state["mask_fifo"], block_mask[:, ::stride]], axis=1)
        head_mask, fifo = arrived[:, :n], arrived[:, n:]  # head frame i: position i - delay
        window = {
            "probability": jnp.concatenate(
                [state["probability"], jax.nn.sigmoid(heads["heatmap"])], axis=1
            ),
            "length": jnp.concatenate([state["length"], heads["length"]], axis=1),
            "offset": jnp.concatenate([state["offset"], heads["offset"]], axis=1),
            "mask": jnp.concatenate([state["mask"], head_mask], axis=1),
        }
        keywords = self.config.num_keywords
        is_peak = decode_lib.peaks(
            window["probability"],
            window["mask"],
            num_keywords=keywords,
            radius=self.radius,
            min_score=self.min_score,
        )
        middle = slice(self.radius, self.radius + n)  # frames whose neighbours all exist
        frames_in = state["frames_in"] + block.shape[1]
        # Window frame radius + j is head frame (frames_in / stride - n - radius + j),
        # which describes position (that - delay).
        first = frames_in // stride - n - self.radius - self.config.delay
        start, end = decode_lib.positions(
            {"offset": window["offset"][:, middle], "length": window["length"][:, middle]}, hop
        )
        shift = first.astype(jnp.float32) * hop  # positions() counts from frame 0
        decided = {
            "peak": is_peak[:, middle],
            "score": window["probability"][:, middle, :keywords],
            "start": start + shift,
            "end": end + shift,
            "emitted": jnp.broadcast_to(frames_in * FRAME_S, start.shape).astype(jnp.float32),
        }
        edge = 2 * self.radius
        new_state = {
            "backbone": backbone,
            "mask_fifo": fifo,
            **{k: v[:, v.shape[1] - edge :] for k, v in window.items()},
            "frames_in": frames_in,
        }
        return decided, new_state

    def flush_frames(self) -> int:
        """Zero input frames that push every real position through the decision."""
        return (self.config.delay + self.radius) * self.config.output_stride

    def _scan_blocks(self, blocks, block_masks):
        """blocks [N, B, block_frames, F], block_masks [N, B, block_frames]."""

        def one(state, inputs):
            decided, state = self._step(*inputs, state)
            return state, decided

        _, decided = jax.lax.scan(one, self.initial_state(blocks.shape[1]), (blocks, block_masks))
        return jax.tree_util.tree_map(_merge_blocks, decided)

    def detect(self, features, mask=None, max_detections: int = 64):
        """Whole batch, streamed: features float [B, T, F], mask bool [B, T] ->
        (detections like `decode.decode`, emitted float32 [B, D] seconds)."""
        model_lib.check_features(self.config, features)
        features = np.asarray(features, np.float32)
        batch, frames, width = features.shape
        mask = np.ones((batch, frames), bool) if mask is None else np.asarray(mask, bool)
        total = frames + self.flush_frames()
        blocks = -(-total // self.block_frames)
        padded = blocks * self.block_frames
        features = np.pad(features, ((0, 0), (0, padded - frames), (0, 0)))
        mask = np.pad(mask, ((0, 0), (0, padded - frames)))
        decided = self._scan(
            features.reshape(batch, blocks, self.block_frames, width).swapaxes(0, 1),
            mask.reshape(batch, blocks, self.block_frames).swapaxes(0, 1),
        )
        return collect(decided, max_detections)


def _merge_blocks(values):
    """[N, B, n, ...] -> [B, N * n, ...]."""
    values = jnp.moveaxis(values, 0, 1)
    return values.reshape(values.shape[0], -1, *values.shape[3:])


@functools.partial(jax.jit, static_argnames="max_detections")
def collect(decided, max_detections: int = 64):
    """Decisions of a whole stream (fields [B, P, ...]) -> the best `max_detections`
    peaks per example, chosen and ordered as `decode.decode` does, and their emission
    times float32 [B, D] (s)."""
    fields = {k: decided[k] for k in ("start", "end", "emitted")}
    detections, gathered = decode_lib.best_peaks(
        decided["peak"], decided["score"], fields, max_detections
    )
    return detections, gathered["emitted"]
