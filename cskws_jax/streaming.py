"""Keyword detection over unbounded audio, block by block, with explicit state.

    detector = StreamDetector(net, params, block_outputs=5)    # 5 x 40 ms = 200 ms blocks
    state = detector.initial_state(batch_size)
    found, decided, state = detector.step({"audio": block}, {"audio": block_mask}, state)
    ...                                                        # per arriving block
    detections, emitted = detector.detect(features, mask)     # or a whole batch at once

`StreamDetector` is a `speechkit.streaming.BlockRunner` whose step is the model's step
followed by peak decoding (`StreamDetector.from_step`: an exported step instead); its
detections equal `decode.decode` of the whole utterance (`collect`). Specification
(block sizes, the `found` fields, when a position is decided, flushing):
docs/models.md#streaming-detection-streamdetector.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from cskws_jax import decode as decode_lib
from cskws_jax.config import AfKwsConfig
from speechkit import streaming

if TYPE_CHECKING:
    from cskws_jax.model import AfKws


class StreamDetector(streaming.BlockRunner):
    """The live model `net` with `params` (or, by `from_step`, any step of its protocol,
    e.g. an exported one) followed by peak decoding; see the module docstring."""

    def __init__(
        self,
        net: AfKws,
        params,
        block_outputs: int = 1,
        radius: int = 1,
        min_score: float = 0.1,
    ):
        def model_step(inputs, mask, state):
            return net.apply(params, inputs, mask, state, method=net.step)

        def model_initial_state(batch_size: int):
            return net.apply(params, batch_size, method=net.initial_state)

        spec = streaming.spec_of(net)
        self._setup(
            net.config, spec, model_step, model_initial_state, block_outputs, radius, min_score
        )

    @classmethod
    def from_step(
        cls,
        config: AfKwsConfig,
        model_spec: streaming.StreamingSpec,
        model_step,
        model_initial_state,
        block_outputs: int = 1,
        radius: int = 1,
        min_score: float = 0.1,
    ) -> StreamDetector:
        """A detector over another implementation of `AfKws(config)`'s streaming step,
        whose streaming spec is `model_spec`: model_step(inputs, mask, state) -> (heads,
        head_mask, state) on blocks of `block_outputs` output frames,
        model_initial_state(batch_size) -> state (e.g. an exported step, whose spec its
        export stores: `cskws_jax.export`; no model code needed)."""
        detector = cls.__new__(cls)
        detector._setup(
            config, model_spec, model_step, model_initial_state, block_outputs, radius, min_score
        )
        return detector

    def _setup(
        self, config, model_spec, model_step, model_initial_state, block_outputs, radius, min_score
    ):
        self.config, self.radius, self.min_score = config, radius, min_score
        self._model_step, self._model_initial_state = model_step, model_initial_state
        spec = dataclasses.replace(model_spec, output_latency=model_spec.output_latency + radius)
        super().__init__(self._decide, self._initial_state_of, spec, block_outputs)

    @property
    def latency_s(self) -> float:
        """Algorithmic latency: audio that must follow a position before it is decided."""
        return (self.spec.output_latency + 1) * self.spec.output_hop_s

    def flush_frames(self) -> int:
        """Masked zero input frames that push every real position through the decision."""
        return self.spec.output_latency * self.config.output_stride

    def _initial_state_of(self, batch_size: int):
        edge = 2 * self.radius
        return {
            "model": self._model_initial_state(batch_size),
            "probability": jnp.zeros((batch_size, edge, self.config.num_classes), jnp.float32),
            "length": jnp.zeros((batch_size, edge), jnp.float32),
            "offset": jnp.zeros((batch_size, edge), jnp.float32),
            "mask": jnp.zeros((batch_size, edge), bool),
            "frames_in": jnp.zeros((), jnp.int32),  # input frames consumed
        }

    def _decide(self, inputs, mask, state):
        """One block (inputs {"audio" [B, frames, F]}, frames a multiple of output_stride)
        -> (decisions for the block's n positions, their mask [B, n], new state)."""
        stride, hop = self.config.output_stride, self.spec.output_hop_s
        heads, head_mask, model_state = self._model_step(inputs, mask, state["model"])
        n = head_mask.shape[1]
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
        frames_in = state["frames_in"] + inputs["audio"].shape[1]
        # Window frame radius + j is head frame (frames_in / stride - n - radius + j),
        # which describes position (that - delay).
        first = frames_in // stride - n - self.spec.output_latency
        start, end = decode_lib.positions(
            {"offset": window["offset"][:, middle], "length": window["length"][:, middle]}, hop
        )
        shift = first.astype(jnp.float32) * hop  # positions() counts from frame 0
        frame_s = self.spec.inputs["audio"].hop_s
        decided = {
            "peak": is_peak[:, middle],
            "score": window["probability"][:, middle, :keywords],
            "start": start + shift,
            "end": end + shift,
            "emitted": jnp.broadcast_to(frames_in * frame_s, start.shape).astype(jnp.float32),
        }
        edge = 2 * self.radius
        new_state = {
            "model": model_state,
            **{k: v[:, v.shape[1] - edge :] for k, v in window.items()},
            "frames_in": frames_in,
        }
        return decided, window["mask"][:, middle], new_state

    def detect(self, features, mask=None, max_detections: int = 64):
        """Whole batch, streamed: features float [B, T, F], mask bool [B, T] ->
        (detections like `decode.decode`, emitted float32 [B, D] seconds)."""
        features = np.asarray(features, np.float32)
        frame_mask = None if mask is None else {"audio": np.asarray(mask, bool)}
        decided, _ = self.run({"audio": features}, frame_mask)
        return collect(decided, max_detections)


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
