"""Acoustic channel simulation for synthetic speech (NumPy, seeded).

A room (reverberation, `rooms.reverberate`) and a device's microphone response
(`rooms.microphone_colour`) on the clean speech, noise at a target SNR (white, pink,
babble from other voices), a narrow-band telephone channel (8 kHz, 300-3400 Hz
band-pass, 8-bit mu-law), a wide-band ("HD voice") one (16 kHz, 50-7000 Hz, 14-bit) and
gain. `degrade` puts a clean waveform through all of them as a `ChannelConfig` says,
drawing the room, the colouring, the noise kind, SNR and gain per waveform. Every random
choice comes from the `np.random.Generator` passed in, so a seed reproduces the audio
exactly. Waveforms are float32 [samples] in [-1, 1].

    >>> import numpy as np
    >>> from speechkit import channel
    >>> config = channel.ChannelConfig(
    ...     snr_db=(10.0, 20.0), telephone="narrowband", reverb_probability=1.0
    ... )
    >>> clean = np.sin(np.arange(16_000) / 5).astype(np.float32)
    >>> degraded = channel.degrade(clean, np.random.default_rng(0), config, 16_000)
    >>> degraded.waveform.shape, degraded.noise in config.noise_kinds, degraded.coloured
    ((16000,), True, False)
    >>> degraded.room.startswith("simulated rt60=")
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from fractions import Fraction

import numpy as np
from scipy import signal as scipy_signal

from speechkit import checks, rooms

TELEPHONE_RATE = 8_000  # Hz
TELEPHONE_BAND = (300.0, 3400.0)  # Hz
WIDEBAND_RATE = 16_000  # Hz: "HD voice" (G.722-like) calls
WIDEBAND_BAND = (50.0, 7000.0)  # Hz
NOISE_KINDS = ("pink", "white", "babble")
TELEPHONE_LINES = ("none", "wideband", "narrowband")


def as_waveform(name: str, waveform) -> np.ndarray:
    """The waveform as float32 [samples], or a ValueError naming `name` (not mono, NaN)."""
    waveform = np.asarray(waveform)
    if waveform.ndim != 1:
        raise ValueError(f"{name}: expected a mono waveform [samples], got shape {waveform.shape}")
    if not np.all(np.isfinite(waveform)):
        raise ValueError(f"{name}: contains NaN or infinite samples")
    return waveform.astype(np.float32)


def power(waveform) -> float:
    """Mean square of a waveform."""
    waveform = np.asarray(waveform, np.float64)
    return float(np.mean(waveform**2)) if waveform.size else 0.0


def gain(waveform, decibels: float) -> np.ndarray:
    """The waveform scaled by `decibels` dB (amplitude)."""
    return (as_waveform("waveform", waveform) * 10 ** (decibels / 20)).astype(np.float32)


def white_noise(rng: np.random.Generator, samples: int) -> np.ndarray:
    """Unit-power Gaussian white noise, float32 [samples]."""
    return rng.standard_normal(samples).astype(np.float32)


def pink_noise(rng: np.random.Generator, samples: int) -> np.ndarray:
    """Unit-power 1/f noise (white noise shaped in the frequency domain), float32."""
    if samples == 0:
        return np.zeros(0, np.float32)
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    frequency = np.arange(spectrum.size, dtype=np.float64)
    frequency[0] = 1.0  # keep DC finite; it is removed below
    spectrum /= np.sqrt(frequency)
    spectrum[0] = 0.0
    noise = np.fft.irfft(spectrum, n=samples)
    return (noise / np.sqrt(max(power(noise), 1e-20))).astype(np.float32)


def babble(
    rng: np.random.Generator, voices: Sequence[np.ndarray], samples: int, talkers: int = 6
) -> np.ndarray:
    """Unit-power babble: `talkers` random stretches of the given speech, summed.

    voices: waveforms of other speakers (at the target rate), each looped as needed.
    """
    if not voices:
        raise ValueError("babble: needs at least one voice waveform")
    mix = np.zeros(samples, np.float64)
    for _ in range(talkers):
        voice = as_waveform("voices[i]", voices[int(rng.integers(len(voices)))])
        if voice.size == 0:
            raise ValueError("babble: a voice waveform is empty")
        start = int(rng.integers(voice.size))
        looped = np.resize(np.roll(voice, -start), samples)
        mix += looped / np.sqrt(max(power(looped), 1e-20))
    return (mix / np.sqrt(max(power(mix), 1e-20))).astype(np.float32)


def add_noise(waveform, noise, snr_db: float) -> np.ndarray:
    """waveform + noise scaled so that power(waveform) / power(scaled noise) = snr_db.

    noise is looped or cut to the waveform's length. A silent waveform gets no noise
    (its SNR is undefined); a silent noise is an error.
    """
    waveform = as_waveform("waveform", waveform)
    noise = as_waveform("noise", noise)
    if noise.size == 0 or power(noise) == 0.0:
        raise ValueError("noise: is silent, so no SNR can be reached")
    noise = np.resize(noise, waveform.size)
    scale = np.sqrt(power(waveform) / (power(noise) * 10 ** (snr_db / 10)))
    return (waveform + scale * noise).astype(np.float32)


def resample(waveform, from_rate: int, to_rate: int) -> np.ndarray:
    """Polyphase resampling between integer rates (exact rational ratio)."""
    waveform = as_waveform("waveform", waveform)
    if from_rate <= 0 or to_rate <= 0:
        raise ValueError(f"resample: rates must be > 0, got {from_rate} -> {to_rate}")
    if from_rate == to_rate:
        return waveform
    ratio = Fraction(to_rate, from_rate)
    out = scipy_signal.resample_poly(waveform, ratio.numerator, ratio.denominator)
    return out.astype(np.float32)


def _resample_margin(up: int, down: int) -> int:
    """Input samples of context either side of a piece that make `resample_poly` on the
    piece equal the whole signal's result there: its filter's half length (10 taps per
    rate step, scipy's default) in input samples, rounded up to a multiple of `down` so
    that every piece starts on an output sample."""
    reach = -(-10 * max(up, down) // up) + 1
    return -(-reach // down) * down


def resample_stream(blocks: Iterable[np.ndarray], from_rate: int, to_rate: int) -> Iterator:
    """`resample` of a signal that arrives in blocks (float32 [n] each, any sizes), as
    float32 blocks: their concatenation equals `resample` of the whole signal, sample for
    sample, while memory holds a few pieces of ~65,536 input samples, whatever the length.

    Each piece is resampled with `margin` input samples of context either side (the
    filter's reach), so only the signal's true ends see zero padding, as in one call.
    """
    if from_rate <= 0 or to_rate <= 0:
        raise ValueError(f"resample: rates must be > 0, got {from_rate} -> {to_rate}")
    if from_rate == to_rate:
        yield from (as_waveform("block", block) for block in blocks)
        return
    ratio = Fraction(to_rate, from_rate)
    up, down = ratio.numerator, ratio.denominator
    margin = _resample_margin(up, down)
    step = down * max(1, -(-(1 << 16) // down))  # input samples per piece, a multiple of down
    pending = np.zeros(0, np.float32)  # input from `offset` on (global sample index)
    offset = begin = 0  # begin: the next piece's first input sample, a multiple of down

    def piece(end: int) -> np.ndarray:
        first = max(0, begin - margin)
        window = pending[first - offset : end + margin - offset]
        out = scipy_signal.resample_poly(window, up, down).astype(np.float32)
        skip = begin * up // down - first * up // down
        return out[skip : skip + -(-end * up // down) - begin * up // down]

    for block in blocks:
        pending = np.concatenate([pending, as_waveform("block", block)])
        while offset + len(pending) >= begin + step + margin:
            yield piece(begin + step)
            begin += step
            keep = begin - margin - offset
            if keep > 0:
                pending, offset = pending[keep:], offset + keep
    total = offset + len(pending)
    if total > begin:
        yield piece(total)


def mu_law_encode(waveform, bits: int = 8) -> np.ndarray:
    """Mu-law companding and quantisation to 2**bits levels; int codes [samples]."""
    mu = 2**bits - 1
    clipped = np.clip(np.asarray(waveform, np.float64), -1.0, 1.0)
    companded = np.sign(clipped) * np.log1p(mu * np.abs(clipped)) / np.log1p(mu)
    return np.round((companded + 1) / 2 * mu).astype(np.int32)


def mu_law_decode(codes, bits: int = 8) -> np.ndarray:
    """Inverse of `mu_law_encode`, float32 [samples] in [-1, 1]."""
    mu = 2**bits - 1
    companded = 2 * np.asarray(codes, np.float64) / mu - 1
    return (np.sign(companded) * ((1 + mu) ** np.abs(companded) - 1) / mu).astype(np.float32)


def telephone(waveform, sample_rate: int, output_rate: int | None = None) -> np.ndarray:
    """A narrow-band telephone line: down to 8 kHz, 300-3400 Hz band-pass (4th-order
    Butterworth), 8-bit mu-law, then to `output_rate` (default: the input rate).

    Samples beyond [-1, 1] clip in the mu-law coder, as on a real line.
    """
    narrow = resample(waveform, sample_rate, TELEPHONE_RATE)
    sos = scipy_signal.butter(4, TELEPHONE_BAND, btype="bandpass", fs=TELEPHONE_RATE, output="sos")
    filtered = scipy_signal.sosfilt(sos, narrow)
    line = mu_law_decode(mu_law_encode(filtered))
    return resample(line, TELEPHONE_RATE, output_rate or sample_rate)


def wideband_telephone(waveform, sample_rate: int, output_rate: int | None = None) -> np.ndarray:
    """A wide-band ("HD voice", G.722-like) line: 16 kHz, 50-7000 Hz band-pass
    (4th-order Butterworth), 14-bit quantisation, then to `output_rate`."""
    wide = resample(waveform, sample_rate, WIDEBAND_RATE)
    sos = scipy_signal.butter(4, WIDEBAND_BAND, btype="bandpass", fs=WIDEBAND_RATE, output="sos")
    levels = 2**13
    line = np.round(np.clip(scipy_signal.sosfilt(sos, wide), -1.0, 1.0) * levels) / levels
    return resample(line.astype(np.float32), WIDEBAND_RATE, output_rate or sample_rate)


@dataclasses.dataclass(frozen=True)
class ChannelConfig:
    """What `degrade` does to a clean waveform; every field is an experiment setting."""

    snr_db: tuple[float, float] = (15.0, 30.0)  # noise level, drawn uniformly per waveform
    noise_kinds: tuple[str, ...] = ("pink", "white")  # some of NOISE_KINDS, one drawn
    # One of TELEPHONE_LINES: "wideband" (50-7000 Hz), "narrowband" (300-3400 Hz, mu-law)
    # or "none"; the audio comes back at its own rate either way.
    telephone: str = "none"
    gain_db: tuple[float, float] | None = None  # drawn after the line; None: no gain, no draw
    babble_talkers: int = 6  # voices summed into one babble noise
    # The clean speech is reverberated in a room drawn from `room` with this probability,
    # then coloured by a drawn microphone response with `colour_probability`. Both 0:
    # no draws at all, so corpora built before these settings existed stay bit-identical.
    reverb_probability: float = 0.0
    room: rooms.RoomConfig = rooms.RoomConfig()
    colour_probability: float = 0.0

    def __post_init__(self):
        checks.require_subset("ChannelConfig.noise_kinds", self.noise_kinds, NOISE_KINDS)
        checks.require_choice("ChannelConfig.telephone", self.telephone, TELEPHONE_LINES)
        checks.require_interval("ChannelConfig.snr_db", self.snr_db)
        if self.gain_db is not None:
            checks.require_interval("ChannelConfig.gain_db", self.gain_db)
        checks.require_int("ChannelConfig.babble_talkers", self.babble_talkers, at_least=1)
        for name in ("reverb_probability", "colour_probability"):
            checks.require_number(
                f"ChannelConfig.{name}", getattr(self, name), at_least=0, at_most=1
            )
        if not isinstance(self.room, rooms.RoomConfig):
            raise TypeError(f"ChannelConfig.room: expected a rooms.RoomConfig, got {self.room!r}")


@dataclasses.dataclass(frozen=True)
class Degraded:
    """A waveform after `degrade`, with what was drawn for it."""

    waveform: np.ndarray  # float32 [samples] in [-1, 1], the clean one's length and rate
    noise: str  # the noise kind, one of ChannelConfig.noise_kinds
    snr_db: float
    gain_db: float  # 0.0 when ChannelConfig.gain_db is None
    room: str = "none"  # "none", or the drawn room's `rooms.Room.name`
    coloured: bool = False  # whether a microphone response was applied


BabbleVoices = Callable[[np.random.Generator], Sequence[np.ndarray]]
"""Draws other speakers' waveforms (at the clean waveform's rate) for a babble noise."""


def make_noise(
    rng: np.random.Generator,
    kind: str,
    samples: int,
    babble_voices: BabbleVoices | None = None,
    talkers: int = 6,
) -> np.ndarray:
    """Unit-power noise of `kind` (one of NOISE_KINDS), float32 [samples].

    babble_voices: called with `rng` (only for "babble") before the talkers are drawn.
    """
    if kind == "white":
        return white_noise(rng, samples)
    if kind == "pink":
        return pink_noise(rng, samples)
    if kind == "babble":
        if babble_voices is None:
            raise ValueError("make_noise: 'babble' needs babble_voices")
        return babble(rng, babble_voices(rng), samples, talkers)
    raise ValueError(f"kind: expected one of {', '.join(NOISE_KINDS)}, got {kind!r}")


def through_line(waveform, line: str, sample_rate: int) -> np.ndarray:
    """The waveform through a telephone line (one of TELEPHONE_LINES), at its own rate."""
    if line == "wideband":
        return wideband_telephone(waveform, sample_rate)
    if line == "narrowband":
        return telephone(waveform, sample_rate)
    if line == "none":
        return as_waveform("waveform", waveform)
    raise ValueError(f"line: expected one of {list(TELEPHONE_LINES)}, got {line!r}")


def acoustics(
    waveform, rng: np.random.Generator, config: ChannelConfig, sample_rate: int
) -> tuple[np.ndarray, str, bool]:
    """The clean waveform in a room and through a microphone, as `config` says:
    (float32 [samples], room name or "none", coloured).

    Draws from `rng`: one seed when `config.reverb_probability` or
    `config.colour_probability` is > 0, nothing otherwise (the waveform comes back as it
    is). Two generators spawned from that seed draw the room (whether, which) and the
    colouring (whether, which), so the parent always advances by one draw and switching
    one effect does not change the other's draws.
    """
    if config.reverb_probability == 0 and config.colour_probability == 0:
        return waveform, "none", False
    room_rng, colour_rng = np.random.default_rng(int(rng.integers(2**63))).spawn(2)
    room = "none"
    if room_rng.random() < config.reverb_probability:
        drawn = rooms.draw_room(room_rng, config.room, sample_rate)
        waveform, room = rooms.reverberate(waveform, drawn.rir), drawn.name
    coloured = bool(colour_rng.random() < config.colour_probability)
    if coloured:
        waveform = rooms.microphone_colour(colour_rng, waveform, sample_rate)
    return as_waveform("waveform", waveform), room, coloured


def degrade(
    waveform,
    rng: np.random.Generator,
    config: ChannelConfig,
    sample_rate: int,
    *,
    babble_voices: BabbleVoices | None = None,
    noise_before_snr: bool = False,
) -> Degraded:
    """A drawn room and microphone (`acoustics`), noise at a drawn SNR (against the
    reverberant, coloured speech), the telephone line, a drawn gain, then clipping to
    [-1, 1].

    Draws from `rng` in this order: the noise kind; the SNR; the noise itself (with any
    babble voices); the gain (only when `config.gain_db` is set); the room and
    microphone seed (only when a probability of them is > 0). `noise_before_snr` draws
    the noise before the SNR instead: corpora first built in that order keep
    reproducing bit for bit, as do those built before rooms and microphones existed.

    Args:
      waveform: the clean float32 [samples] at `sample_rate` Hz.
      babble_voices: required when "babble" is one of `config.noise_kinds`.
    """
    if "babble" in config.noise_kinds and babble_voices is None:
        raise ValueError("degrade: noise_kinds include 'babble', so babble_voices is needed")
    kind = config.noise_kinds[int(rng.integers(len(config.noise_kinds)))]
    noise_args = (kind, np.size(waveform), babble_voices, config.babble_talkers)
    if noise_before_snr:
        noise = make_noise(rng, *noise_args)
        snr_db = float(rng.uniform(*config.snr_db))
    else:
        snr_db = float(rng.uniform(*config.snr_db))
        noise = make_noise(rng, *noise_args)
    gain_db = 0.0 if config.gain_db is None else float(rng.uniform(*config.gain_db))
    speech, room, coloured = acoustics(waveform, rng, config, sample_rate)
    degraded = through_line(add_noise(speech, noise, snr_db), config.telephone, sample_rate)
    if config.gain_db is not None:
        degraded = gain(degraded, gain_db)
    return Degraded(np.clip(degraded, -1.0, 1.0), kind, snr_db, gain_db, room, coloured)
