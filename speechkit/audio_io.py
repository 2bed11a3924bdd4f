"""Reading, validating and writing audio files (soundfile), with resampling.

Every problem with a file is an `AudioFileError` that names the file and says what was
expected: missing, empty, not audio or corrupt, an unexpected channel count, non-finite
samples. Writes are atomic (a temporary file renamed into place), so an interrupted run
never leaves half a file behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import soundfile

from speechkit import files
from speechkit.channel import resample


class AudioFileError(ValueError):
    """An audio file that cannot be used; the message names the file."""


def read_audio(
    path: str | os.PathLike,
    *,
    target_rate: int | None = None,
    channels: int | None = 1,
    mix_to_mono: bool = False,
) -> tuple[np.ndarray, int]:
    """Loads an audio file as float32 samples in [-1, 1].

    Args:
      path: any format libsndfile reads (WAV, FLAC, OGG, ...).
      target_rate: resample to this rate (Hz); None keeps the file's rate.
      channels: the channel count the file must have; None accepts any.
      mix_to_mono: average the channels into one (after the channel check).

    Returns:
      (samples, rate): float32 [samples] when mono or mixed, else [samples, channels].
    """
    path = Path(path)
    if not path.exists():
        raise AudioFileError(f"{path}: no such file")
    if path.is_dir():
        raise AudioFileError(f"{path}: is a folder, expected an audio file")
    if path.stat().st_size == 0:
        raise AudioFileError(f"{path}: is empty (0 bytes)")
    try:
        data, rate = soundfile.read(path, dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as err:
        raise AudioFileError(f"{path}: not a readable audio file ({err})") from None
    if data.shape[0] == 0:
        raise AudioFileError(f"{path}: holds no samples")
    if channels is not None and data.shape[1] != channels:
        raise AudioFileError(f"{path}: has {data.shape[1]} channel(s), expected {channels}")
    bad = ~np.isfinite(data)
    if bad.any():
        first = int(np.argwhere(bad)[0][0])
        raise AudioFileError(
            f"{path}: {int(bad.sum())} non-finite sample(s), the first at {first / rate:.3f} s"
        )
    if mix_to_mono or data.shape[1] == 1:
        data = data.mean(axis=1) if mix_to_mono else data[:, 0]
    if target_rate is not None and target_rate != rate:
        if data.ndim == 2:
            data = np.stack([resample(c, rate, target_rate) for c in data.T], axis=1)
        else:
            data = resample(data, rate, target_rate)
        rate = target_rate
    return np.ascontiguousarray(data, np.float32), int(rate)


def write_audio(path: str | os.PathLike, samples, rate: int, subtype: str = "PCM_16") -> Path:
    """Writes a WAV/FLAC file atomically; samples float [samples] or [samples, channels]."""
    path = Path(path)
    samples = np.asarray(samples, np.float32)
    if samples.ndim not in (1, 2) or samples.shape[0] == 0:
        raise ValueError(f"{path}: expected samples [n] or [n, channels], got {samples.shape}")
    if not np.all(np.isfinite(samples)):
        raise ValueError(f"{path}: refusing to write non-finite samples")
    file_format = path.suffix.lstrip(".").upper() or "WAV"
    with files.atomic_path(path) as temporary:
        soundfile.write(temporary, samples, rate, subtype=subtype, format=file_format)
    return path
