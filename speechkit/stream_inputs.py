"""The inputs of the streaming command lines (`python -m multiqt_jax.track` and
`python -m cskws_jax.detect`): audio files, folders and standard input, read, checked
and cut into chunks the way a live source delivers them.

    for item in expand_paths(["calls/", "one.flac", "-"]):  # paths, or InputErrors
        samples = read_samples(item, features)               # mono at the front end's rate
        for chunk in file_chunks(samples, size, rate, realtime=False): ...
    for chunk in stdin_chunks(sys.stdin.buffer, size): ...   # raw 16-bit PCM

Files: WAV, FLAC, OGG, any sample rate and channel count (mixed to mono and resampled
to the front end's rate); folders are searched recursively for those suffixes; `-` is
raw 16-bit little-endian mono PCM at 16 kHz on standard input. Every problem is an
`InputError` or a `speechkit.audio_io.AudioFileError` whose message names the input.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from speechkit import audio_io, frontend

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")
STDIN = "-"
STDIN_RATE = 16_000  # Hz: raw PCM on standard input is 16-bit little-endian mono at this rate
SILENCE = 1 / 32768  # peak below one 16-bit step: silent


class InputError(ValueError):
    """An input that cannot be used; the message names it."""


def expand_paths(paths) -> Iterator[str | InputError]:
    """Each path as given, a folder as its audio files (sorted, recursive), `-` as is;
    a folder without audio files as an InputError (yielded, not raised)."""
    for path in paths:
        folder = Path(path)
        if path == STDIN or not folder.is_dir():
            yield path
            continue
        found = sorted(
            str(p) for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES
        )
        if not found:
            yield InputError(f"{path}: a folder without audio files ({', '.join(AUDIO_SUFFIXES)})")
        yield from found


def read_samples(path: str, features: frontend.FeatureConfig) -> np.ndarray:
    """A file's samples, mono float32 [n] at the front end's rate, checked for use."""
    samples, _ = audio_io.read_audio(
        path, target_rate=features.sample_rate, channels=None, mix_to_mono=True
    )
    check_samples(path, samples, features)
    return samples


def check_samples(name: str, samples: np.ndarray, features: frontend.FeatureConfig) -> None:
    """Enough samples for one feature window, not silent (InputError naming `name`)."""
    if len(samples) < features.window_samples:
        raise InputError(
            f"{name}: too short: {len(samples)} samples at {features.sample_rate} Hz, expected "
            f"at least one {features.window_ms:g} ms window ({features.window_samples})"
        )
    if np.max(np.abs(samples)) < SILENCE:
        raise InputError(f"{name}: silent (every sample below one 16-bit step)")


def file_chunks(samples: np.ndarray, size: int, rate: int, realtime: bool) -> Iterator:
    """The samples in chunks of `size`; with `realtime`, each one when it would have
    arrived from a live source (paced by the wall clock)."""
    started = time.monotonic()
    for begin in range(0, len(samples), size):
        chunk = samples[begin : begin + size]
        if realtime:
            time.sleep(max(0.0, started + (begin + len(chunk)) / rate - time.monotonic()))
        yield chunk


def stdin_chunks(stream, size: int) -> Iterator[np.ndarray]:
    """Raw 16-bit little-endian PCM from a binary stream, as float32 chunks of up to
    `size` samples, each as soon as it is complete (a trailing odd byte is dropped)."""
    while True:
        data = stream.read(2 * size)
        if not data:
            return
        while len(data) < 2 * size:  # a pipe may return less than asked
            more = stream.read(2 * size - len(data))
            if not more:
                break
            data += more
        data = data[: len(data) // 2 * 2]
        if data:
            yield np.frombuffer(data, "<i2").astype(np.float32) / 32768


class CheckedChunks:
    """Chunks passed through, their length and peak recorded, for the checks of a
    stream whose end is not known in advance (`check`, once it has ended)."""

    def __init__(self, chunks, name: str = STDIN):
        self.chunks, self.name, self.samples, self.peak = chunks, name, 0, 0.0

    def __iter__(self):
        for chunk in self.chunks:
            self.samples += len(chunk)
            self.peak = max(self.peak, float(np.max(np.abs(chunk), initial=0.0)))
            yield chunk

    def check(self) -> None:
        """InputError naming the stream when it held no samples or only silence."""
        if self.samples == 0:
            raise InputError(f"{self.name}: holds no samples")
        if self.peak < SILENCE:
            raise InputError(f"{self.name}: silent (every sample zero)")


def block_outputs(block_ms: float, hop_s: float) -> int:
    """Output frames per block for `--block-ms` (a whole number of output hops of
    `hop_s` seconds)."""
    count = block_ms / (hop_s * 1000)
    if count < 1 or not math.isclose(count, round(count), abs_tol=1e-6):
        raise InputError(
            f"--block-ms: {block_ms:g} ms is not a whole number of the model's {hop_s * 1000:g} ms "
            "output hops"
        )
    return round(count)


def main_in_pipe(main: Callable[[], int]) -> int:
    """`main()`, ending quietly when the reader of standard output goes away (`| head`)."""
    try:
        return main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
