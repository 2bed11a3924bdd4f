"""Audio chunks as an application delivers them (any size, sample rate, channel count,
float or integer PCM) -> a streaming model's items (detections, segments), pushed
rather than pulled: the streaming APIs' audio path (`cskws_jax.api.Detector`,
`multiqt_jax.api.Tracker`).

    blocks = ChunkBlocks(sample_rate=44_100, target_rate=16_000, block_samples=3_200)
    for chunk in chunks:                      # float32 [n] or [n, channels], int16 PCM ...
        for block in blocks.push(chunk): ...  # float32 [3200]: mono, at 16 kHz
    for block in blocks.close(): ...          # the rest: whole blocks, a shorter last one

Over any partition into chunks, the blocks are those the command lines cut from a file
of the same audio, so the items (`ItemStream`) are the commands' items. The chunks and
resampling: docs/api.md, "Chunks and sample rates"; `ItemStream`, `model_folder` and
`arguments_named`: docs/speechkit.md, "stream_resample".
"""

from __future__ import annotations

import contextlib
import numbers
import os
from collections.abc import Callable, Mapping

import numpy as np

from speechkit import audio_io, dsp, errors

BACKENDS = ("jax", "onnx")

MAX_CHANNELS = 64
"""The most channels a chunk [samples, channels] may have: more is taken for a
[channels, samples] array (transposed by mistake), and refused."""


def check_sample_rate(name: str, rate) -> int:
    """A sample rate in Hz, a whole number within `speechkit.audio_io.RATE_RANGE`, as an
    int; else a TypeError or ValueError naming `name` and what was expected."""
    low, high = audio_io.RATE_RANGE
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise TypeError(f"{name}: expected a sample rate in Hz (a number), got {rate!r}")
    if not float(rate).is_integer() or not low <= rate <= high:
        raise ValueError(
            f"{name}: expected a whole number of Hz from {low} to {high}, got {rate!r}"
        )
    return int(rate)


def mono_samples(chunk, name: str = "chunk") -> np.ndarray:
    """A chunk of audio -> float32 [n], mono.

    chunk: [n] (mono) or [n, channels] (averaged, in float32, as files are mixed), of
    floats (in [-1, 1] for full scale) or signed integer PCM (int16: divided by 32,768;
    intN by 2 ** (N - 1)). Anything else (another rank, unsigned or non-numeric
    samples, NaN or infinities, a [channels, n] array) is a ValueError naming `name`.
    """
    array = np.asarray(chunk)
    _check_layout(name, array)
    if array.dtype.kind == "i":
        samples = array.astype(np.float32) / np.float32(2 ** (8 * array.dtype.itemsize - 1))
    elif array.dtype.kind == "f":
        with np.errstate(over="ignore"):  # beyond float32: infinite, refused below
            samples = array.astype(np.float32)
    else:
        raise ValueError(
            f"{name}: expected float samples or signed integer PCM (e.g. int16), got dtype "
            f"{array.dtype}"
        )
    if not np.all(np.isfinite(samples)):
        raise ValueError(f"{name}: contains NaN or infinite samples (as float32)")
    if samples.ndim == 2:
        samples = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
    return np.ascontiguousarray(samples, np.float32)


def _check_layout(name: str, array: np.ndarray) -> None:
    """A ValueError unless `array` is [n] or [n, channels] with 1 to MAX_CHANNELS channels."""
    if array.ndim not in (1, 2):
        raise ValueError(
            f"{name}: expected samples [n] (mono) or [n, channels], got shape {array.shape}"
        )
    if array.ndim == 2 and not 1 <= array.shape[1] <= MAX_CHANNELS:
        raise ValueError(
            f"{name}: expected samples [n, channels] with 1 to {MAX_CHANNELS} channels, got "
            f"shape {array.shape} (a [channels, n] array needs transposing: chunk.T)"
        )


class ChunkBlocks:
    """Chunks at `sample_rate` in, mono float32 blocks of `block_samples` samples at
    `target_rate` out (module docstring). `push` returns the blocks a chunk completes;
    `close` ends the stream: the resampler's held-back samples, then the last, shorter
    block; after it (or `reset`) the next push starts a new stream."""

    def __init__(self, sample_rate: int, target_rate: int, block_samples: int):
        self.sample_rate = check_sample_rate("sample_rate", sample_rate)
        self.target_rate, self.block_samples = target_rate, block_samples
        self._resampler = dsp.StreamResampler(self.sample_rate, target_rate)
        self.reset()

    @property
    def held_back_s(self) -> float:
        """The most input, in seconds, that resampling holds back until more arrives."""
        return self._resampler.held_back / self.sample_rate

    def reset(self) -> None:
        """Forgets the stream so far."""
        self._resampler.reset()
        self._pending = np.zeros(0, np.float32)  # resampled, short of a whole block

    def push(self, chunk) -> list[np.ndarray]:
        """chunk (`mono_samples`) -> the blocks float32 [block_samples] it completes."""
        return self._cut(self._resampler.push(mono_samples(chunk)))

    def close(self) -> list[np.ndarray]:
        """The rest of the stream: whole blocks, then the last one (shorter; none when
        the stream ended on a block's end); then `reset`."""
        blocks = self._cut(self._resampler.flush())
        if len(self._pending):
            blocks.append(self._pending)
        self.reset()
        return blocks

    def _cut(self, samples: np.ndarray) -> list[np.ndarray]:
        """The whole blocks of the pending samples and `samples`; the rest kept."""
        pending = np.concatenate([self._pending, samples])
        whole = len(pending) // self.block_samples * self.block_samples
        self._pending = pending[whole:]
        return list(pending[:whole].reshape(-1, self.block_samples))


class ItemStream:
    """Chunks in, items out as they are decided: the push-style twin of
    `speechkit.stream_cli.stream_items`. `start()` returns a new stream's front end
    (`push(samples)` -> frames float32 [n, F], e.g. `speechkit.frontend.FeatureStream`)
    and item stream (`push(frames)` and `close()` -> lists of items); `accept` passes a
    chunk's blocks (`ChunkBlocks`) through both, `close` flushes them and starts a new
    stream. Features that are not finite (a finite sample too large for float32
    arithmetic) are a ValueError naming their time; the stream is then broken: `reset`
    before the next chunk."""

    def __init__(self, blocks: ChunkBlocks, start: Callable[[], tuple[object, object]]):
        self.blocks, self._start = blocks, start
        self.reset()

    def reset(self) -> None:
        """Drops the stream so far, undecided items with it; the next chunk starts anew."""
        self.blocks.reset()
        self._features, self._items = self._start()
        self.frames = 0  # feature frames the front end has given

    def accept(self, chunk) -> list:
        """The items decided once `chunk` (`mono_samples`) has arrived."""
        return self._run(self.blocks.push(chunk))

    def close(self) -> list:
        """Ends the stream: the items still undecided; then `reset`."""
        items = self._run(self.blocks.close()) + list(self._items.close())
        self.reset()
        return items

    def _run(self, blocks: list[np.ndarray]) -> list:
        items = []
        for block in blocks:
            frames = self._features.push(block)
            bad = ~np.isfinite(frames).all(axis=1)
            if bad.any():
                at = (self.frames + int(np.argmax(bad))) * self._features.config.hop_s
                raise ValueError(
                    f"chunk: non-finite features from {at:.3f} s (samples too large for "
                    "float32 arithmetic? full scale is 1.0)"
                )
            self.frames += len(frames)
            items += self._items.push(frames)
        return items


# ------------------------------------------------------------------------ the models


class ChunkedStreamer:
    """What `cskws_jax.Detector` and `multiqt_jax.Tracker` share: their stream of
    chunks (`ItemStream`, in `_stream`), its rate, and dropping it."""

    _stream: ItemStream

    @property
    def sample_rate(self) -> int:
        """The chunks' sample rate, Hz."""
        return self._stream.blocks.sample_rate

    def reset(self) -> None:
        """Drops the stream without deciding the rest; the next `accept` starts anew."""
        self._stream.reset()


def model_folder(model, catalogue, backend: str) -> str:
    """The folder a streaming API runs: `model` itself when it is a folder (a bundle or
    an export), else the shipped model of that name in `catalogue`
    (`speechkit.shipped.Catalogue.runnable`: its bundle, or its export for ONNX or in
    the light install); a ValueError naming the shipped models otherwise."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if isinstance(model, str | os.PathLike) and os.path.isdir(model):
        return os.fspath(model)
    if isinstance(model, str) and model in catalogue.names():
        return catalogue.runnable(model, backend)
    raise ValueError(
        f"model: expected a shipped {catalogue.kind} model "
        f"({', '.join(catalogue.names()) or 'none'}) or a bundle or export folder, got "
        f"{model!r}" + (" (not a folder)" if isinstance(model, str | os.PathLike) else "")
    )


@contextlib.contextmanager
def arguments_named(options: Mapping[str, str]):
    """Within it, a `speechkit.errors.InvalidInput` whose message starts with a command
    line option of `options` (e.g. "--block-ms: ...") is raised again, of the same type,
    with the API's argument instead ("block_ms: ...")."""
    try:
        yield
    except errors.InvalidInput as err:
        message = str(err)
        for option, argument in options.items():
            if message.startswith(option):
                raise type(err)(argument + message[len(option) :]) from None
        raise
