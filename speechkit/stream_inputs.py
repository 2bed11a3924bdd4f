"""The inputs of the streaming command lines (`python -m multiqt_jax.track` and
`python -m cskws_jax.detect`): audio files, folders, standard input and a microphone,
read, checked and cut into chunks the way a live source delivers them.

    for item in expand_paths(["calls/", "one.flac", "-"]):  # paths, or InputErrors
        chunks = input_chunks(item, features, size, args)    # file, stdin or --mic
        for chunk in chunks: ...                             # mono at the front end's rate
        chunks.check()                                       # long enough, not silent

Files (`speechkit.audio_io.AUDIO_SUFFIXES`, any rate and channel count) are mixed to mono
and resampled block by block (bounded memory, the samples those of the whole file), a
silent one refused before it streams; folders are searched recursively (links to
subfolders named, not followed); `-` is raw 16-bit little-endian mono PCM at 16 kHz (a
file's header there refused); `--mic` a live input device (`microphone_chunks`). Every
problem is an `InputError` or a `speechkit.audio_io.AudioFileError` naming the input.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from speechkit import audio_io, errors, frontend

AUDIO_SUFFIXES = audio_io.AUDIO_SUFFIXES
STDIN = "-"
STDIN_RATE = 16_000  # Hz: raw PCM on standard input is 16-bit little-endian mono at this rate
SILENCE = 1 / 32768  # peak below one 16-bit step: silent
MAX_BLOCK_MS = 60_000.0  # a longer block is no longer a stream (and its buffers grow with it)


class InputError(errors.InvalidInput):
    """An input that cannot be used; the message names it."""


def expand_paths(paths) -> Iterator[str | InputError]:
    """Each path as given, a folder as its audio files (sorted, recursive), `-` as is;
    a folder without audio files, and a link to a folder inside one (not followed), as
    an InputError (yielded, not raised). An entry with an audio suffix that is not a
    regular file (a dangling or looping link, a FIFO) is yielded like a file: reading it
    names what is wrong, as for the same path given directly."""
    for path in paths:
        if path == STDIN or not Path(path).is_dir():
            yield path
            continue
        found = sorted(_folder_entries(path), key=str)  # an error's text starts with its path
        if not any(isinstance(entry, str) for entry in found):
            yield InputError(f"{path}: a folder without audio files ({', '.join(AUDIO_SUFFIXES)})")
        yield from found


def _folder_entries(folder: str) -> Iterator[str | InputError]:
    """The audio-suffixed entries under `folder` (links to folders not followed: each an
    InputError naming it)."""
    for parent, folders, names in os.walk(folder):
        for name in folders:
            if os.path.islink(os.path.join(parent, name)):
                yield InputError(
                    f"{os.path.join(parent, name)}: a link to a folder, not searched (name "
                    "the folder itself)"
                )
        for name in names:
            if name.lower().endswith(AUDIO_SUFFIXES):
                yield os.path.join(parent, name)


def read_samples(path: str, features: frontend.FeatureConfig) -> np.ndarray:
    """A file's samples, mono float32 [n] at the front end's rate, checked for use."""
    samples, _ = audio_io.read_audio(
        path, target_rate=features.sample_rate, channels=None, mix_to_mono=True
    )
    check_samples(path, samples, features)
    return samples


def check_samples(name: str, samples: np.ndarray, features: frontend.FeatureConfig) -> None:
    """Enough samples for one feature window, not silent (InputError naming `name`)."""
    _check_length(name, len(samples), features)
    if np.max(np.abs(samples)) < SILENCE:
        raise InputError(f"{name}: silent (every sample below one 16-bit step)")


def file_chunks(samples, size: int, rate: int, realtime: bool) -> Iterator:
    """Samples (an array, or an iterable of blocks of any sizes) in chunks of `size`
    (the last one shorter); with `realtime`, each one when it would have arrived from a
    live source (paced by the wall clock)."""
    blocks = [samples] if isinstance(samples, np.ndarray) else samples
    started, sent = time.monotonic(), 0
    pending = np.zeros(0, np.float32)
    for block in blocks:
        pending = np.concatenate([pending, block])
        while len(pending) >= size:
            chunk, pending = pending[:size], pending[size:]
            sent += size
            if realtime:
                time.sleep(max(0.0, started + sent / rate - time.monotonic()))
            yield chunk
    if len(pending):
        if realtime:
            time.sleep(max(0.0, started + (sent + len(pending)) / rate - time.monotonic()))
        yield pending


def file_checked_chunks(
    path: str, features: frontend.FeatureConfig, size: int, realtime: bool
) -> CheckedChunks:
    """A file's samples, mono at the front end's rate, as `CheckedChunks` of `size`
    samples, read from the file block by block as they are consumed. A silent file is
    refused before anything is streamed (a first pass over its samples), so that it
    gives no output before its error."""
    require_sound(path)
    blocks = audio_io.read_audio_blocks(path, target_rate=features.sample_rate)
    return CheckedChunks(file_chunks(blocks, size, features.sample_rate, realtime), path, features)


def require_sound(path: str) -> None:
    """An InputError when every sample of the file (mixed to mono, at its own rate) is
    below one 16-bit step; read block by block, in bounded memory."""
    for block in audio_io.read_audio_blocks(path):
        if np.max(np.abs(block), initial=0.0) >= SILENCE:
            return
    raise InputError(f"{path}: silent (every sample below one 16-bit step)")


def stdin_chunks(stream, size: int) -> Iterator[np.ndarray]:
    """Raw 16-bit little-endian PCM from a binary stream, as float32 chunks of up to
    `size` samples, each as soon as it is complete (a trailing odd byte is dropped)."""
    first = True
    while True:
        data = stream.read(2 * size)
        if not data:
            return
        if first:
            _refuse_file_header(data)
            first = False
        while len(data) < 2 * size:  # a pipe may return less than asked
            more = stream.read(2 * size - len(data))
            if not more:
                break
            data += more
        data = data[: len(data) // 2 * 2]
        if data:
            yield np.frombuffer(data, "<i2").astype(np.float32) / 32768


def stdin_checked_chunks(features: frontend.FeatureConfig, size: int) -> CheckedChunks:
    """Standard input's raw PCM as `CheckedChunks` of up to `size` samples; an
    InputError when the front end's rate is not the PCM's."""
    rate = features.sample_rate
    if rate != STDIN_RATE:
        raise InputError(f"{STDIN}: raw PCM is read at {STDIN_RATE} Hz; the model wants {rate} Hz")
    return CheckedChunks(stdin_chunks(sys.stdin.buffer, size), STDIN, features)


FILE_HEADERS = {b"RIFF": "WAV", b"RIFX": "WAV", b"RF64": "WAV", b"fLaC": "FLAC", b"OggS": "Ogg"}
FILE_HEADERS |= {b"ID3": "MP3", b"FORM": "AIFF"}
"""The first bytes of the audio files soundfile reads, by what they start: a file piped
to standard input, which takes raw samples."""


def _refuse_file_header(data: bytes) -> None:
    """An InputError when standard input's first bytes are an audio file's header."""
    for magic, kind in FILE_HEADERS.items():
        if data.startswith(magic):
            raise InputError(
                f"{STDIN}: starts with a {kind} file header; standard input takes raw 16-bit "
                f"{STDIN_RATE // 1000} kHz mono PCM: name the file instead, or strip the "
                f"header (sox FILE -t raw -r {STDIN_RATE} -e signed -b 16 -c 1 -)"
            )


MIC = "mic"
"""The input name of a microphone stream (`--mic`) in the output's `file` column."""


def _sounddevice():
    """The sounddevice module, or an InputError saying what to install."""
    try:
        import sounddevice
    except OSError as err:  # the package is there, the PortAudio library is not
        raise InputError(
            f"--mic: sounddevice cannot load the PortAudio library ({err}); on Linux install "
            "it (apt install libportaudio2); sounddevice's wheels carry it on Windows and macOS"
        ) from None
    except ImportError:
        raise InputError("--mic: needs the sounddevice package (pip install sounddevice)") from None
    return sounddevice


def list_devices() -> str:
    """The audio devices sounddevice sees, as it prints them (`--list-devices`); an
    InputError when PortAudio finds none."""
    devices = _sounddevice().query_devices()
    if len(devices) == 0:
        raise InputError(
            "--list-devices: PortAudio finds no audio device (none connected, or, in a "
            "container or a remote session, none passed through)"
        )
    return str(devices)


def device(text: str | None):
    """`--mic`'s value -> sounddevice's device: None (the default input), an index, or a
    name (or a part of one)."""
    if not text:
        return None
    return int(text) if text.isdigit() else text


def microphone_chunks(size: int, rate: int, device=None) -> Iterator[np.ndarray]:
    """A live input device's samples, mono float32 chunks of `size` samples at `rate` Hz,
    each as soon as it is recorded; the stream ends at Ctrl-C (KeyboardInterrupt), so the
    caller can flush what it holds. An InputError when the device cannot record so."""
    sd = _sounddevice()
    try:
        stream = sd.InputStream(
            samplerate=rate, channels=1, dtype="float32", blocksize=size, device=device
        )
    except (sd.PortAudioError, ValueError) as err:
        raise InputError(
            f"--mic {device if device is not None else '(default device)'}: cannot record "
            f"{rate} Hz mono ({err}); --list-devices lists the devices"
        ) from None
    stop = {"asked": False}
    with stream, _ctrl_c_ends(stop):
        try:
            while not stop["asked"]:
                block, _ = stream.read(size)  # overflows: samples lost, not delayed
                yield np.asarray(block, np.float32).reshape(-1)
        except KeyboardInterrupt:  # while waiting for the device
            return


@contextlib.contextmanager
def _ctrl_c_ends(stop: dict):
    """While open, Ctrl-C (SIGINT) sets `stop["asked"]` instead of interrupting, so a
    stream ends after the block being processed and its caller can flush (main thread
    only; elsewhere Ctrl-C interrupts as usual)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda *_: stop.update(asked=True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def input_chunks(name: str, features: frontend.FeatureConfig, size: int, args) -> CheckedChunks:
    """The `CheckedChunks` of one input of a streaming command line: the microphone
    (`args.mic` set, `name` is `MIC`), standard input (`-`) or a file, read block by
    block (paced with `args.realtime`)."""
    if getattr(args, "mic", None) is not None:
        rate = features.sample_rate
        return CheckedChunks(microphone_chunks(size, rate, device(args.mic)), MIC, features)
    if name == STDIN:
        return stdin_checked_chunks(features, size)
    return file_checked_chunks(name, features, size, args.realtime)


class CheckedChunks:
    """Chunks passed through, their length and peak recorded, for the checks of a
    stream whose end is not known in advance (`check`, once it has ended)."""

    def __init__(self, chunks, name: str = STDIN, features: frontend.FeatureConfig | None = None):
        self.chunks, self.name, self.features = chunks, name, features
        self.samples, self.peak = 0, 0.0

    def __iter__(self):
        advance = _ADVANCE.get()
        rate = self.features.sample_rate if self.features is not None else None
        for chunk in self.chunks:
            self.samples += len(chunk)
            self.peak = max(self.peak, float(np.max(np.abs(chunk), initial=0.0)))
            if advance is not None and rate:
                advance(len(chunk) / rate)
            yield chunk

    def check(self) -> None:
        """InputError naming the stream when it held no samples, fewer than one feature
        window (with `features`) or only silence."""
        if self.samples == 0:
            raise InputError(f"{self.name}: holds no samples")
        if self.features is not None:
            _check_length(self.name, self.samples, self.features)
        if self.peak < SILENCE:
            raise InputError(f"{self.name}: silent (every sample below one 16-bit step)")


def _check_length(name: str, samples: int, features: frontend.FeatureConfig) -> None:
    if samples < features.window_samples:
        raise InputError(
            f"{name}: too short: {samples} samples at {features.sample_rate} Hz, expected "
            f"at least one {features.window_ms:g} ms window ({features.window_samples})"
        )


_ADVANCE: contextvars.ContextVar[Callable[[float], object] | None] = contextvars.ContextVar(
    "stream_inputs_advance", default=None
)
"""While `speechkit.stream_cli.run_inputs` runs an input: what `CheckedChunks` calls
with the seconds of audio of each chunk it passes on (the bar's update)."""
