"""Keyword detection from Python, on audio that arrives in chunks.

    detector = cskws_jax.Detector("afkws-top20", sample_rate=44_100)
    for chunk in chunks:                    # any sizes; float or int16; mono or [n, channels]
        for hit in detector.accept(chunk):  # `cskws_jax.detect.Detection`s, as decided
            print(hit.keyword, hit.start, hit.end, hit.score, hit.emitted)
    for hit in detector.close(): ...        # the end of the stream: what is still undecided

`Detector` is `python -m cskws_jax.detect` (stj-detect) as a push API: the same models
and options, and for the same audio the same detections, whatever the chunks
(tests/test_api.py). It runs in the light install on export folders.
Specification (arguments, chunks, resampling, latency, backends):
docs/api.md#cskws_jaxdetector.
"""

from __future__ import annotations

from cskws_jax import detect, models
from speechkit import checks, stream_inputs
from speechkit.stream_resample import (
    ChunkBlocks,
    ChunkedStreamer,
    ItemStream,
    arguments_named,
    model_folder,
)

OPTIONS = {
    "--block-ms": "block_ms",
    "--min-score": "min_score",
    "--fa-per-hour": "fa_per_hour",
    "--backend": "backend",
}
"""The command line's options -> the `Detector` arguments they are, for error messages."""


class Detector(ChunkedStreamer):
    """An AF-KWS keyword detector over one stream of audio at a time, fed chunk by chunk.

    Args:
      model: a shipped model's name (`cskws_jax.models.CATALOGUE`, e.g. "afkws-top20"),
        or a bundle folder or an export folder (as `cskws_jax.detect.load` takes them).
      sample_rate: the chunks' sample rate in Hz (within
        `speechkit.audio_io.RATE_RANGE`); other than the model's, they are resampled.
      backend: "jax" (a bundle's model, or an export's StableHLO step) or "onnx" (an
        export's ONNX modules in onnxruntime; a shipped name runs its export).
      fa_per_hour: keep a detection only at or above its keyword's threshold at the
        model's stored operating point for this many false alarms per hour (None: its
        middle operating point, `PeakDecodingConfig.default_point`, as stj-detect).
      all_peaks: every decided peak instead (raw scores, no operating point).
      min_score: the peak threshold in [0, 1] (None: the model's; fixed in an ONNX
        export).
      refractory_s: drop a keyword's detection whose centre is within this many
        seconds of its last kept one (0: keep all).
      block_ms: the audio per model step, ms (None: 200, or an export's own block).

    A bad argument or model folder is a ValueError (TypeError for a non-number) that
    names it; a bad chunk a ValueError naming what was expected (`accept`).
    """

    def __init__(
        self,
        model,
        *,
        sample_rate: int = 16_000,
        backend: str = "jax",
        fa_per_hour: float | None = None,
        all_peaks: bool = False,
        min_score: float | None = None,
        refractory_s: float = 0.0,
        block_ms: float | None = None,
    ):
        _check_options(fa_per_hour, min_score, refractory_s, block_ms)
        if all_peaks and fa_per_hour is not None:
            raise ValueError("all_peaks: every decided peak, or fa_per_hour's point: not both")
        self.model, self.backend = model_folder(model, models.CATALOGUE, backend), backend
        with arguments_named(OPTIONS):
            self._detector, self._info = detect.load(self.model, block_ms, min_score, backend)
            self.operating_point = detect.operating_point(self._info, fa_per_hour, all_peaks)
        self._thresholds = None if self.operating_point is None else self.operating_point.thresholds
        self.refractory_s = refractory_s
        blocks = ChunkBlocks(
            sample_rate,
            self._info.features.sample_rate,
            detect.block_samples(self._detector, self._info),
        )
        self._stream = ItemStream(blocks, self._start)

    @property
    def keywords(self) -> tuple[str, ...]:
        """The keywords it detects; `Detection.label` indexes them."""
        return tuple(self._info.labels)

    @property
    def block_s(self) -> float:
        """Audio per model step, seconds: a decision waits for its block's end."""
        return self._detector.block_outputs * self._detector.spec.output_hop_s

    @property
    def latency_s(self) -> float:
        """The longest a detection waits, in seconds of audio after the start of the
        output frame where its score peaks: the model's look-ahead and the peak
        decision's radius (the frame itself included), the rest of its block, and the
        audio resampling holds back (0 at the model's rate)."""
        spec = self._detector.spec
        algorithmic = (spec.output_latency + 1) * spec.output_hop_s
        return algorithmic + self.block_s - spec.output_hop_s + self._stream.blocks.held_back_s

    def accept(self, chunk) -> list[detect.Detection]:
        """The detections decided once `chunk` has arrived, in the order decided.

        chunk: the stream's next samples at `sample_rate`: float [n] or [n, channels]
        (channels averaged), floats in [-1, 1] or signed integer PCM (int16); any n,
        0 included. Times in a `Detection` are seconds from the stream's start: start
        and end of the keyword, `emitted` the audio consumed when it was decided.
        """
        return self._stream.accept(chunk)

    def close(self) -> list[detect.Detection]:
        """Ends the stream: the detections still undecided (the audio held back, the
        last block padded, the decision's look-ahead flushed). The next `accept` starts
        a new stream."""
        return self._stream.close()

    def _start(self):
        """A new stream's (front end, `detect.KeywordStream`)."""
        keywords = detect.KeywordStream(
            self._detector, self._info.labels, self.refractory_s, self._thresholds
        )
        return detect.feature_stream(self._detector, self._info), keywords


def _check_options(fa_per_hour, min_score, refractory_s, block_ms) -> None:
    """The numbers `Detector` takes, in the ranges the command line takes them."""
    if fa_per_hour is not None:
        checks.require_number("fa_per_hour", fa_per_hour, above=0)
    if min_score is not None:
        checks.require_number("min_score", min_score, at_least=0, at_most=1)
    checks.require_number("refractory_s", refractory_s, at_least=0)
    if block_ms is not None:
        checks.require_number("block_ms", block_ms, above=0, at_most=stream_inputs.MAX_BLOCK_MS)
