"""Signal primitives for mono waveforms (NumPy, SciPy): checking, power and gain, noises,
polyphase resampling (whole or streamed), mu-law companding and telephone lines.

The bottom of speechkit's audio modules: `audio_io`, `rooms` and `channel` build on it,
it imports none of them. Waveforms are float32 [samples] in [-1, 1]; rates are in Hz.
Every random choice comes from the `np.random.Generator` passed in.

    >>> import numpy as np
    >>> from speechkit import dsp
    >>> tone = np.sin(np.arange(16_000) / 5).astype(np.float32)
    >>> dsp.resample(tone, 16_000, 8_000).shape, dsp.telephone(tone, 16_000).shape
    ((8000,), (16000,))
    >>> noisy = dsp.add_noise(tone, dsp.pink_noise(np.random.default_rng(0), 100), 20.0)
    >>> round(float(10 * np.log10(dsp.power(tone) / dsp.power(noisy - tone))), 6)
    20.0
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction

import numpy as np

TELEPHONE_RATE = 8_000  # Hz
TELEPHONE_BAND = (300.0, 3400.0)  # Hz
WIDEBAND_RATE = 16_000  # Hz: "HD voice" (G.722-like) calls
WIDEBAND_BAND = (50.0, 7000.0)  # Hz


def _scipy_signal():
    """scipy.signal, imported on first use: it takes over a second, and reading audio at
    the model's rate (most files) needs none of it."""
    from scipy import signal

    return signal


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


MAX_RATIO_TERM = 1 << 14
"""The largest up or down factor `resample` filters with: its filter has about 20 x
max(up, down) taps, so a ratio in lowest terms with a larger term (a file at 44,101 Hz,
or one whose header claims 1,000,003 Hz) is approximated by the nearest ratio whose
terms are at most this; see `resample_ratio`."""


def resample_ratio(from_rate: int, to_rate: int) -> Fraction:
    """to_rate / from_rate in lowest terms when both terms are at most MAX_RATIO_TERM
    (every common rate: 44,100 -> 16,000 is 160 / 441), else the closest fraction whose
    terms are: off by less than 1 / MAX_RATIO_TERM relative (at most 0.22 s an hour of
    output; the rates in use are exact)."""
    if from_rate <= 0 or to_rate <= 0:
        raise ValueError(f"resample: rates must be > 0, got {from_rate} -> {to_rate}")
    ratio = Fraction(to_rate, from_rate)
    if max(ratio.numerator, ratio.denominator) <= MAX_RATIO_TERM:
        return ratio
    if ratio < 1:
        return ratio.limit_denominator(MAX_RATIO_TERM)
    return 1 / (1 / ratio).limit_denominator(MAX_RATIO_TERM)


def resample(waveform, from_rate: int, to_rate: int) -> np.ndarray:
    """Polyphase resampling between integer rates, by `resample_ratio` (exact for
    every ratio whose terms are at most MAX_RATIO_TERM)."""
    waveform = as_waveform("waveform", waveform)
    ratio = resample_ratio(from_rate, to_rate)
    if ratio == 1:
        return waveform
    out = _scipy_signal().resample_poly(waveform, ratio.numerator, ratio.denominator)
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
    sample, while memory holds a few pieces of ~65,536 input samples, whatever the length
    (`StreamResampler`)."""
    resampler = StreamResampler(from_rate, to_rate)
    for block in blocks:
        out = resampler.push(block)
        if len(out):
            yield out
    tail = resampler.flush()
    if len(tail):
        yield tail


class StreamResampler:
    """`resample` of a signal that arrives in pieces, computed as it arrives.

    `push(samples)` returns the output samples that the input so far determines and
    `flush()` the rest once the signal has ended; over any partition of a signal into
    pushes, their concatenation equals `resample` of the whole signal, sample for sample.
    The filter is zero-phase (scipy's `resample_poly`): an output sample needs input up
    to the filter's half length after it, so a push holds back at most `held_back`
    input samples (`margin`, the half length rounded up to a multiple of `down`, plus up
    to down - 1 to reach a whole step). Each piece is resampled with `margin` input
    samples of context either side, so only the signal's true ends see zero padding, as
    in one call; pieces hold at most ~65,536 input samples.

        resampler = StreamResampler(44_100, 16_000)
        out = [resampler.push(chunk) for chunk in chunks] + [resampler.flush()]
    """

    PIECE = 1 << 16  # input samples per piece at most (rounded up to a multiple of down)

    def __init__(self, from_rate: int, to_rate: int):
        ratio = resample_ratio(from_rate, to_rate)
        self.up, self.down = ratio.numerator, ratio.denominator
        self.identity = ratio == 1
        self.margin = 0 if self.identity else _resample_margin(self.up, self.down)
        self._step = self.down * max(1, -(-self.PIECE // self.down))
        self.reset()

    @property
    def held_back(self) -> int:
        """The most input samples a push leaves unresampled until more input (or
        `flush`) comes: 0 when the rates are equal."""
        return 0 if self.identity else self.margin + self.down - 1

    def reset(self) -> None:
        """Forgets the signal so far: the next push starts a new one."""
        self._pending = np.zeros(0, np.float32)  # input from `_offset` on (global index)
        self._offset = 0
        self._begin = 0  # the next piece's first input sample, a multiple of down

    def push(self, samples) -> np.ndarray:
        """samples float [n] (the signal's next ones) -> float32 [m]: the output samples
        they complete."""
        samples = as_waveform("samples", samples)
        if self.identity:
            return samples
        self._pending = np.concatenate([self._pending, samples])
        total = self._offset + len(self._pending)
        return self._output_until((total - self.margin) // self.down * self.down)

    def flush(self) -> np.ndarray:
        """float32 [m]: the output samples left at the signal's end; then `reset`."""
        total = self._offset + len(self._pending)
        out = self._piece(total) if not self.identity and total > self._begin else None
        self.reset()
        return np.zeros(0, np.float32) if out is None else out

    def _output_until(self, end: int) -> np.ndarray:
        """The output of the input before `end` (a multiple of down) not yet returned."""
        pieces = [np.zeros(0, np.float32)]
        while self._begin < end:
            stop = min(end, self._begin + self._step)
            pieces.append(self._piece(stop))
            self._begin = stop
            unused = self._begin - self.margin - self._offset  # before any piece's context
            if unused > 0:
                self._pending, self._offset = self._pending[unused:], self._offset + unused
        return np.concatenate(pieces)

    def _piece(self, end: int) -> np.ndarray:
        """The output of input samples [`_begin`, `end`), with `margin` of context."""
        up, down, begin = self.up, self.down, self._begin
        first = max(0, begin - self.margin)
        window = self._pending[first - self._offset : end + self.margin - self._offset]
        out = _scipy_signal().resample_poly(window, up, down).astype(np.float32)
        skip = begin * up // down - first * up // down
        return out[skip : skip + -(-end * up // down) - begin * up // down]


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
    sos = _scipy_signal().butter(
        4, TELEPHONE_BAND, btype="bandpass", fs=TELEPHONE_RATE, output="sos"
    )
    filtered = _scipy_signal().sosfilt(sos, narrow)
    line = mu_law_decode(mu_law_encode(filtered))
    return resample(line, TELEPHONE_RATE, output_rate or sample_rate)


def wideband_telephone(waveform, sample_rate: int, output_rate: int | None = None) -> np.ndarray:
    """A wide-band ("HD voice", G.722-like) line: 16 kHz, 50-7000 Hz band-pass
    (4th-order Butterworth), 14-bit quantisation, then to `output_rate`."""
    wide = resample(waveform, sample_rate, WIDEBAND_RATE)
    sos = _scipy_signal().butter(4, WIDEBAND_BAND, btype="bandpass", fs=WIDEBAND_RATE, output="sos")
    levels = 2**13
    line = np.round(np.clip(_scipy_signal().sosfilt(sos, wide), -1.0, 1.0) * levels) / levels
    return resample(line.astype(np.float32), WIDEBAND_RATE, output_rate or sample_rate)
