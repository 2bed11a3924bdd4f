"""Reading, validating and writing audio files (soundfile), with resampling.

Every problem with a file is an `AudioFileError` that names the file and says what was
expected: missing, empty, not audio or corrupt, truncated (a WAV holding less than its
header says), a sample rate outside `RATE_RANGE`, an unexpected channel count,
non-finite samples. `read_audio_blocks` reads
a file of any length in bounded memory, for the streaming commands. Writes are atomic
(a temporary file renamed into place), so an interrupted run never leaves half a file
behind.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile

from speechkit import dsp, errors, files

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3")
"""The audio files folders are searched for (the commands' inputs, the manual-folder
corpora): what the libsndfile bundled with soundfile reads (1.2: MP3 and Ogg Opus too)."""


RATE_RANGE = (4_000, 384_000)
"""Hz: the sample rates a file may have (telephone-band 4 kHz to 384 kHz studio audio);
outside them, a header's rate is refused rather than trusted to size a resampler."""


class AudioFileError(errors.InvalidInput):
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
    with _open(path) as sound:
        rate = sound.samplerate
        try:
            data = sound.read(dtype="float32", always_2d=True)
        except (soundfile.LibsndfileError, RuntimeError) as err:
            raise AudioFileError(f"{path}: not a readable audio file ({err})") from None
    if data.shape[0] == 0:
        raise AudioFileError(f"{path}: holds no samples")
    if channels is not None and data.shape[1] != channels:
        raise AudioFileError(f"{path}: has {data.shape[1]} channel(s), expected {channels}")
    _check_finite(path, data, rate)
    if mix_to_mono or data.shape[1] == 1:
        data = data.mean(axis=1) if mix_to_mono else data[:, 0]
    if target_rate is not None and target_rate != rate:
        if data.ndim == 2:
            data = np.stack([dsp.resample(c, rate, target_rate) for c in data.T], axis=1)
        else:
            data = dsp.resample(data, rate, target_rate)
        rate = target_rate
    return np.ascontiguousarray(data, np.float32), int(rate)


def read_audio_blocks(
    path: str | os.PathLike, *, target_rate: int | None = None, block_frames: int = 1 << 16
) -> Iterator[np.ndarray]:
    """A file's samples mixed to mono, as float32 blocks at `target_rate` (None: the
    file's rate), read `block_frames` at a time: memory stays bounded for any length.

    The blocks concatenate to `read_audio(path, target_rate=..., channels=None,
    mix_to_mono=True)[0]` exactly (`dsp.resample_stream`). The checks are those of
    `read_audio`, made as the file is read: a non-finite sample raises when its block is
    reached, a file without samples at the end.
    """
    path = Path(path)
    with _open(path) as sound:
        rate = sound.samplerate

        def mono_blocks():
            start = 0
            while True:
                try:
                    data = sound.read(block_frames, dtype="float32", always_2d=True)
                except (soundfile.LibsndfileError, RuntimeError) as err:
                    raise AudioFileError(f"{path}: not a readable audio file ({err})") from None
                if len(data) == 0:
                    break
                _check_finite(path, data, rate, start)
                start += len(data)
                yield data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
            if start == 0:
                raise AudioFileError(f"{path}: holds no samples")

        blocks = mono_blocks()
        if target_rate is not None and target_rate != rate:
            blocks = dsp.resample_stream(blocks, rate, target_rate)
        for block in blocks:
            yield np.ascontiguousarray(block, np.float32)


def _open(path: Path) -> soundfile.SoundFile:
    """The file opened for reading, or an AudioFileError naming it."""
    if not path.exists():
        if path.is_symlink():
            raise AudioFileError(
                f"{path}: a symbolic link that leads to no file (its target is missing, or "
                "the links loop)"
            )
        raise AudioFileError(f"{path}: no such file")
    if path.is_dir():
        raise AudioFileError(f"{path}: is a folder, expected an audio file")
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise AudioFileError(
            f"{path}: not a regular file (a {files.file_kind(mode)}), expected an audio file"
        )
    if path.stat().st_size == 0:
        raise AudioFileError(f"{path}: is empty (0 bytes)")
    try:
        sound = soundfile.SoundFile(path)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as err:
        raise AudioFileError(f"{path}: not a readable audio file ({err})") from None
    low, high = RATE_RANGE
    if not low <= sound.samplerate <= high:
        sound.close()
        raise AudioFileError(
            f"{path}: sample rate {sound.samplerate} Hz, expected {low} to {high} Hz"
        )
    promised = _wav_header_frames(path)
    if promised is not None and promised > sound.frames:
        sound.close()
        raise AudioFileError(
            f"{path}: truncated: its WAV header promises {promised} samples "
            f"({promised / sound.samplerate:.3f} s), the file holds {sound.frames} "
            f"({sound.frames / sound.samplerate:.3f} s)"
        )
    return sound


def _wav_header_frames(path: Path) -> int | None:
    """The sample frames a RIFF/WAVE header declares (its `data` chunk size over the
    `fmt ` block align); None for other formats and for the size placeholders of
    writers that did not know the length (0 and 0xFFFFFFFF)."""
    with open(path, "rb") as source:
        if source.read(12)[8:] != b"WAVE":
            return None
        align = None
        for _ in range(64):  # chunks before `data`; real files have a handful
            header = source.read(8)
            if len(header) < 8:
                return None
            name, size = header[:4], struct.unpack("<I", header[4:])[0]
            if name == b"data":
                if align is None or size in (0, 0xFFFFFFFF):
                    return None
                return size // align
            body = source.read(min(size, 64)) if name == b"fmt " else b""
            if name == b"fmt " and len(body) >= 14:
                align = struct.unpack("<H", body[12:14])[0] or None
            source.seek(size + (size & 1) - len(body), os.SEEK_CUR)
    return None


def _check_finite(path: Path, data: np.ndarray, rate: int, start: int | None = None) -> None:
    """An AudioFileError naming the file and the time of the first non-finite sample of
    `data`: the whole file's frames, or (`start`) one block's, from sample `start` on."""
    bad = ~np.isfinite(data)
    if bad.any():
        first = (start or 0) + int(np.argwhere(bad)[0][0])
        count = f"{int(bad.sum())} " if start is None else ""
        raise AudioFileError(
            f"{path}: {count}non-finite sample(s), the first at {first / rate:.3f} s"
        )


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
