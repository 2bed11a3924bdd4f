"""Rooms and microphones for synthetic speech: reverberation and colouring (NumPy, seeded).

`draw_room` draws a simulated shoebox or a measured impulse response as a `RoomConfig`
says, `reverberate` puts a waveform through it without shifting it in time, and
`microphone_colour` gives a waveform a random device's frequency response. Every random
choice comes from the `np.random.Generator` passed in; waveforms are float32 [samples]
in [-1, 1]. Details: docs/speechkit.md, "rooms".

    >>> import numpy as np
    >>> from speechkit import rooms
    >>> rir = rooms.room_impulse_response(np.random.default_rng(0), rooms.RoomConfig(), 16_000)
    >>> float(rir[rooms.direct_path(rir)])
    1.0
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
from scipy import signal as scipy_signal

from speechkit import audio_io, checks, dsp

SPEED_OF_SOUND = 343.0  # m/s, as pyroomacoustics assumes
WALL_MARGIN_M = 0.2  # talker and microphone stay this far from every wall
MAX_ELEVATION_RAD = math.pi / 6  # the talker is within 30 degrees of the mic's height
HIGH_PASS_HZ = (50.0, 300.0)  # microphone_colour: cut-off of the device's high-pass
EQ_BAND_HZ = (150.0, 6000.0)  # centre frequencies of its peaks and shelves (log-uniform)
EQ_GAIN_DB = 6.0  # their gains, uniform in +-EQ_GAIN_DB
EQ_KINDS = ("peak", "low_shelf", "high_shelf")
MIN_RATE = 8_000  # Hz: microphone_colour needs this much band


@dataclasses.dataclass(frozen=True)
class RoomConfig:
    """The rooms `draw_room` draws from; every field is an experiment setting."""

    rt60_s: tuple[float, float] = (0.2, 0.8)  # reverberation time, drawn uniformly
    # Shoebox length, width and height ranges, each drawn uniformly.
    size_m: tuple[tuple[float, float], tuple[float, float], tuple[float, float]] = (
        (3.0, 8.0),
        (3.0, 6.0),
        (2.4, 3.2),
    )
    distance_m: tuple[float, float] = (0.3, 2.5)  # talker to microphone, before wall clipping
    # Image-source order cap: the cost grows as its cube (40: ~0.03 s a room on one core).
    # Long RT60s in small rooms need more to reach their full tail.
    max_order: int = 40
    # A folder of measured impulse responses (.wav, searched recursively); when set, a
    # drawn room is one of its files instead of a simulated one.
    impulse_dir: str | None = None

    def __post_init__(self):
        rt60 = checks.require_interval("RoomConfig.rt60_s", self.rt60_s)
        checks.require_number("RoomConfig.rt60_s", rt60[0], above=0)
        _check_size(self.size_m)
        distance = checks.require_interval("RoomConfig.distance_m", self.distance_m)
        checks.require_number("RoomConfig.distance_m", distance[0], above=0)
        checks.require_int("RoomConfig.max_order", self.max_order, at_least=0)
        if self.impulse_dir is not None and (
            not isinstance(self.impulse_dir, str) or not self.impulse_dir
        ):
            raise TypeError(
                f"RoomConfig.impulse_dir: expected a folder path (str) or None, "
                f"got {self.impulse_dir!r}"
            )
        largest = [high for _, high in self.size_m]
        absorption = sabine_absorption(rt60[0], largest)
        if absorption > 1.0:
            raise ValueError(
                f"RoomConfig.rt60_s: {rt60[0]!r} s is too short for the largest room "
                f"({' x '.join(f'{side:g}' for side in largest)} m): its walls would need "
                f"an absorption of {absorption:.2f} > 1"
            )


def _check_size(size_m) -> None:
    if isinstance(size_m, (str, bytes)) or not isinstance(size_m, (tuple, list)):
        raise TypeError(f"RoomConfig.size_m: expected 3 (low, high) pairs, got {size_m!r}")
    if len(size_m) != 3:
        raise ValueError(f"RoomConfig.size_m: expected 3 (low, high) pairs, got {size_m!r}")
    for axis, pair in enumerate(size_m):
        name = f"RoomConfig.size_m[{axis}]"
        low, _ = checks.require_interval(name, pair)
        checks.require_number(name, low, above=2 * WALL_MARGIN_M)


def sabine_absorption(rt60_s: float, size_m) -> float:
    """The wall energy absorption a shoebox of sides `size_m` [3] (m) needs for an RT60
    of `rt60_s` seconds by Sabine's formula, as `pyroomacoustics.inverse_sabine` has it
    (> 1: not reachable)."""
    a, b, c = size_m
    volume, surface = a * b * c, 2 * (a * b + b * c + c * a)
    return 24 * math.log(10) * volume / (SPEED_OF_SOUND * surface * rt60_s)


@dataclasses.dataclass(frozen=True)
class Room:
    """A drawn room: its impulse response and what it is."""

    rir: np.ndarray  # float32 [taps], the direct-path peak (`direct_path`) is 1.0
    # "simulated rt60=0.43s size=5.1x4.2x2.8m distance=1.20m", or the measured file's
    # path relative to RoomConfig.impulse_dir
    name: str


def draw_room(rng: np.random.Generator, config: RoomConfig, sample_rate: int) -> Room:
    """A room drawn as `config` says, its impulse response at `sample_rate` Hz.

    Draws from `rng`: for a simulated room the RT60, the three sides, the distance, the
    microphone position (3) and the talker's direction (azimuth, elevation); for
    measured ones (`config.impulse_dir` set) only which file.
    """
    checks.require_int("sample_rate", sample_rate, at_least=1)
    if config.impulse_dir is not None:
        return _measured_room(rng, Path(config.impulse_dir), sample_rate)
    return _simulated_room(rng, config, sample_rate)


def room_impulse_response(
    rng: np.random.Generator, config: RoomConfig, sample_rate: int
) -> np.ndarray:
    """The impulse response of a room drawn by `draw_room`, float32 [taps] at
    `sample_rate` Hz, its direct-path peak 1.0."""
    return draw_room(rng, config, sample_rate).rir


def direct_path(rir) -> int:
    """The index of the direct path's peak in an impulse response: its largest tap (in
    magnitude). A ValueError for an empty or all-zero one."""
    rir = np.asarray(rir)
    if rir.ndim != 1 or rir.size == 0 or not np.any(rir):
        raise ValueError(f"rir: expected a non-zero impulse response [taps], got shape {rir.shape}")
    return int(np.argmax(np.abs(rir)))


def _normalised(rir) -> np.ndarray:
    """float32 rir scaled so that its direct-path peak is +1."""
    rir = np.asarray(rir, np.float64)
    return (rir / rir[direct_path(rir)]).astype(np.float32)


def _positions(rng: np.random.Generator, size: np.ndarray, distance: float):
    """(microphone, talker) positions [3] in m: the mic uniform in the room, the talker
    `distance` away in a drawn direction. An offset that would cross a wall turns
    towards the farther wall on that axis, then is clipped to stay inside."""
    low, high = WALL_MARGIN_M, size - WALL_MARGIN_M
    mic = rng.uniform(low, high)
    azimuth = rng.uniform(0.0, 2 * math.pi)
    elevation = rng.uniform(-MAX_ELEVATION_RAD, MAX_ELEVATION_RAD)
    offset = distance * np.array(
        [
            math.cos(elevation) * math.cos(azimuth),
            math.cos(elevation) * math.sin(azimuth),
            math.sin(elevation),
        ]
    )
    outside = (mic + offset < low) | (mic + offset > high)
    offset = np.where(outside, np.copysign(offset, (low + high) / 2 - mic), offset)
    return mic, np.clip(mic + offset, low, high)


def _simulated_room(rng: np.random.Generator, config: RoomConfig, sample_rate: int) -> Room:
    import pyroomacoustics as pra  # here, not at the top: it takes ~0.5 s to import

    rt60 = float(rng.uniform(*config.rt60_s))
    size = rng.uniform([low for low, _ in config.size_m], [high for _, high in config.size_m])
    distance = float(rng.uniform(*config.distance_m))
    mic, talker = _positions(rng, size, distance)
    absorption, order = pra.inverse_sabine(rt60, size, c=SPEED_OF_SOUND)
    room = pra.ShoeBox(
        size,
        fs=sample_rate,
        materials=pra.Material(absorption),
        max_order=min(order, config.max_order),
    )
    room.add_source(talker)
    room.add_microphone(mic)
    room.compute_rir()
    name = (
        f"simulated rt60={rt60:.2f}s size={'x'.join(f'{side:.1f}' for side in size)}m "
        f"distance={float(np.linalg.norm(talker - mic)):.2f}m"
    )
    return Room(_normalised(room.rir[0][0]), name)


def impulse_files(folder: Path) -> list[Path]:
    """The .wav files under `folder` (recursively, any case of the suffix), sorted; a
    ValueError naming the folder when it is missing or holds none."""
    if not folder.is_dir():
        raise ValueError(f"RoomConfig.impulse_dir: {folder} is not a folder")
    found = sorted(p for p in folder.rglob("*") if p.suffix.lower() == ".wav" and p.is_file())
    if not found:
        raise ValueError(f"RoomConfig.impulse_dir: {folder} holds no .wav files")
    return found


def _measured_room(rng: np.random.Generator, folder: Path, sample_rate: int) -> Room:
    candidates = impulse_files(folder)
    path = candidates[int(rng.integers(len(candidates)))]
    samples, rate = audio_io.read_audio(path, channels=None)
    first = samples if samples.ndim == 1 else samples[:, 0]
    if not np.any(first):
        raise audio_io.AudioFileError(f"{path}: is silent, not an impulse response")
    rir = dsp.resample(first, rate, sample_rate)
    return Room(_normalised(rir), path.relative_to(folder).as_posix())


def _at_level(out: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """`out` scaled to the power of `reference`, float32 (silence stays silence)."""
    out_power = dsp.power(out)
    if out_power == 0.0:
        return out.astype(np.float32)
    return (out * math.sqrt(dsp.power(reference) / out_power)).astype(np.float32)


def reverberate(waveform, rir) -> np.ndarray:
    """The waveform in a room: convolved with `rir` [taps], float32 [samples].

    Aligned: the rir's direct-path peak (`direct_path`) lands on the dry sample, so
    nothing moves in time (word timings hold); the taps before it act as the filter's
    pre-ringing. The output has the input's length (the tail past the end is cut) and
    its power (a silent input stays silent).
    """
    waveform = dsp.as_waveform("waveform", waveform).astype(np.float64)
    rir = dsp.as_waveform("rir", rir).astype(np.float64)
    peak = direct_path(rir)
    wet = scipy_signal.fftconvolve(waveform, rir)[peak : peak + waveform.size]
    return _at_level(wet, waveform)


def _biquad(kind: str, hz: float, gain_db: float, q: float, sample_rate: int) -> np.ndarray:
    """One second-order section [6] (b0, b1, b2, 1, a1, a2) of the audio EQ cookbook
    (R. Bristow-Johnson): a "peak", "low_shelf" or "high_shelf" at `hz`."""
    amp = 10 ** (gain_db / 40)
    w0 = 2 * math.pi * hz / sample_rate
    cos, alpha = math.cos(w0), math.sin(w0) / (2 * q)
    if kind == "peak":
        b = [1 + alpha * amp, -2 * cos, 1 - alpha * amp]
        a = [1 + alpha / amp, -2 * cos, 1 - alpha / amp]
    else:
        root = 2 * math.sqrt(amp) * alpha
        sign = 1 if kind == "low_shelf" else -1  # a high shelf mirrors the low one
        b = [
            amp * ((amp + 1) - sign * (amp - 1) * cos + root),
            sign * 2 * amp * ((amp - 1) - sign * (amp + 1) * cos),
            amp * ((amp + 1) - sign * (amp - 1) * cos - root),
        ]
        a = [
            (amp + 1) + sign * (amp - 1) * cos + root,
            -sign * 2 * ((amp - 1) + sign * (amp + 1) * cos),
            (amp + 1) + sign * (amp - 1) * cos - root,
        ]
    return np.array(b + a) / a[0]


def microphone_response(rng: np.random.Generator, sample_rate: int) -> np.ndarray:
    """A random device's frequency response as second-order sections [sections, 6]
    (`scipy.signal.sosfilt`'s layout): a 2nd-order Butterworth high-pass at a drawn
    HIGH_PASS_HZ cut-off, then 2 or 3 biquads, each of a drawn EQ_KINDS kind, centre
    (log-uniform in EQ_BAND_HZ, below 0.45 `sample_rate`) and gain (+-EQ_GAIN_DB dB);
    peaks get a drawn Q in [0.7, 2], shelves Q = 1/sqrt(2).

    Draws from `rng`: the cut-off, the band count, then per band kind, centre, gain, Q.
    """
    checks.require_int("sample_rate", sample_rate, at_least=MIN_RATE)
    cutoff = float(rng.uniform(*HIGH_PASS_HZ))
    sections = [scipy_signal.butter(2, cutoff, btype="highpass", fs=sample_rate, output="sos")]
    low, high = math.log(EQ_BAND_HZ[0]), math.log(min(EQ_BAND_HZ[1], 0.45 * sample_rate))
    for _ in range(int(rng.integers(2, 4))):
        kind = EQ_KINDS[int(rng.integers(len(EQ_KINDS)))]
        hz = math.exp(rng.uniform(low, high))
        gain_db = float(rng.uniform(-EQ_GAIN_DB, EQ_GAIN_DB))
        q = float(rng.uniform(0.7, 2.0)) if kind == "peak" else 1 / math.sqrt(2)
        sections.append(_biquad(kind, hz, gain_db, q, sample_rate)[None])
    return np.concatenate(sections)


def microphone_colour(rng: np.random.Generator, waveform, sample_rate: int) -> np.ndarray:
    """The waveform through a random device's response (`microphone_response`, drawn
    from `rng`), float32 [samples] at its own level (power)."""
    waveform = dsp.as_waveform("waveform", waveform).astype(np.float64)
    sos = microphone_response(rng, sample_rate)  # drawn even for an empty waveform
    coloured = scipy_signal.sosfilt(sos, waveform) if waveform.size else waveform
    return _at_level(coloured, waveform)
