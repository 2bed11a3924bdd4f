"""Question (or symptom) tracking from Python, on audio that arrives in chunks.

    tracker = multiqt_jax.Tracker("multiqt-questions-audio", sample_rate=8_000)
    for chunk in chunks:                       # any sizes; float or int16; mono or [n, channels]
        for segment in tracker.accept(chunk):  # `multiqt_jax.track.Segment`s, as they close
            print(segment.label, segment.start, segment.end, segment.emitted)
    for segment in tracker.close(): ...        # the end of the call: the run still open

`Tracker` is `python -m multiqt_jax.track` (stj-track) as a push API: the same models and
options, and for the same audio the same segments, whatever the chunks
(tests/test_api.py). A model that also reads text runs with `text="none"` (audio only).
Specification (arguments, text, chunks, resampling, latency): docs/api.md#multiqt_jaxtracker.
"""

from __future__ import annotations

import warnings

import numpy as np

from multiqt_jax import models, track
from speechkit import checks, stream_inputs
from speechkit.stream_resample import (
    ChunkBlocks,
    ChunkedStreamer,
    ItemStream,
    arguments_named,
    model_folder,
)

OPTIONS = {"--block-ms": "block_ms", "--backend": "backend"}
"""The command line's options -> the `Tracker` arguments they are, for error messages."""
TEXT_CHOICES = (None, "none")


class Tracker(ChunkedStreamer):
    """A MultiQT tracker over one call at a time, fed chunk by chunk.

    Args:
      model: a shipped model's name (`multiqt_jax.models.CATALOGUE`, e.g.
        "multiqt-questions-audio"), or a bundle folder or an export folder (as
        `multiqt_jax.track.load` takes them).
      sample_rate: the chunks' sample rate in Hz (within
        `speechkit.audio_io.RATE_RANGE`); other than the model's, they are resampled.
      backend: "jax" (a bundle's model, or an export's StableHLO step) or "onnx" (an
        export's ONNX modules in onnxruntime; a shipped name runs its export).
      smoothing_frames: the causal smoothing rule's K, frames a class must hold to
        switch (1: raw labels; None: the model's `decoding.smoothing`).
      block_ms: the audio per model step, ms (None: 200, or an export's own block).
      text: None for a model without text; "none" for a model that reads text: its
        text marked missing (module docstring: the API builds no text).

    A bad argument or model folder is a ValueError (TypeError for a non-number) that
    names it; a bad chunk a ValueError naming what was expected (`accept`).
    """

    def __init__(
        self,
        model,
        *,
        sample_rate: int = 16_000,
        backend: str = "jax",
        smoothing_frames: int | None = None,
        block_ms: float | None = None,
        text: str | None = None,
    ):
        _check_options(smoothing_frames, block_ms, text)
        self.model, self.backend = model_folder(model, models.CATALOGUE, backend), backend
        with arguments_named(OPTIONS):
            self._model = track.load(self.model, block_ms, backend)
        self._present = _present(self._model, text)
        self.smoothing_frames = smoothing_frames
        blocks = ChunkBlocks(
            sample_rate, self._model.info.features.sample_rate, self._model.block_samples
        )
        self._stream = ItemStream(blocks, self._start)

    @property
    def labels(self) -> tuple[str, ...]:
        """The model's classes, the background ("none", class 0) first;
        `Segment.class_id` indexes them."""
        return tuple(self._model.info.labels)

    @property
    def block_s(self) -> float:
        """Audio per model step, seconds: labels come out at a block's end."""
        return self._model.block_outputs * self._model.spec.output_hop_s

    @property
    def latency_s(self) -> float:
        """The longest an output frame's label waits, in seconds of audio after the start
        of the frame: the model's look-ahead (the frame itself included), the smoothing
        rule's lag, the rest of its block, and the audio resampling holds back (0 at
        the model's rate). A segment closes when its run's next frame is out."""
        spec, hop_s = self._model.spec, self._model.spec.output_hop_s
        lag = track.smoothing_of(self._model.info, self.smoothing_frames).latency_frames
        model = (spec.output_latency + lag + 1) * hop_s
        return model + self.block_s - hop_s + self._stream.blocks.held_back_s

    def accept(self, chunk) -> list[track.Segment]:
        """The segments closed once `chunk` has arrived, in the order they closed.

        chunk: the call's next samples at `sample_rate`: float [n] or [n, channels]
        (channels averaged), floats in [-1, 1] or signed integer PCM (int16); any n,
        0 included. Times in a `Segment` are seconds from the call's start: start and
        end of the run, `emitted` the audio consumed when it closed.
        """
        return self._stream.accept(chunk)

    def close(self) -> list[track.Segment]:
        """Ends the call: the segments still open (the audio held back, the last block
        padded; a run still open ends at the call's end). The next `accept` starts a
        new call."""
        return self._stream.close()

    def _start(self):
        """A new call's (front end, `track.CallStream`)."""
        call = track.CallStream(self._model, None, self._present, self.smoothing_frames)
        return self._model.feature_stream(), call


def _check_options(smoothing_frames, block_ms, text) -> None:
    """The arguments `Tracker` takes, in the ranges the command line takes them."""
    if smoothing_frames is not None:
        checks.require_int("smoothing_frames", smoothing_frames, at_least=1)
    if block_ms is not None:
        checks.require_number("block_ms", block_ms, above=0, at_most=stream_inputs.MAX_BLOCK_MS)
    if text not in TEXT_CHOICES:
        raise ValueError(
            f"text: expected None or 'none' (text marked missing), got {text!r}; the API "
            "builds no text: stj-track builds it from a recording (--asr, --words, "
            "--posteriors)"
        )


def _present(model: track.StreamModel, text: str | None) -> np.ndarray:
    """present bool [1, 2] (audio, text) for `model` with `text`, as stj-track sets it
    without text; a ValueError for a model that reads text without text="none", or
    that reads text only. Warns where the model never learnt to go without its text."""
    if not model.reads_text:
        return np.ones((1, 2), bool)
    modalities = "+".join(model.config.modalities)
    if model.config.modalities == ("text",):
        raise ValueError(f"model: reads text only ({modalities}); the API streams audio only")
    if text != "none":
        raise ValueError(
            f"text: the model reads text ({modalities}) and the API builds none: pass "
            "text='none' (text marked missing, as stj-track --no-text), or run stj-track, "
            "which builds it from the recording (--asr ctc, --asr pocketsphinx, --words, "
            "--posteriors)"
        )
    if model.config.modality_dropout == 0:
        warnings.warn(
            "text='none': the model was trained without modality dropout; its outputs "
            "without text are outside what it learnt",
            stacklevel=3,
        )
    return np.array([[True, False]])
