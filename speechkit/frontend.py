"""Speech front ends in jax.numpy: framing, STFT magnitude and log-mel features.

Jittable, batched, length-masked. Framing is causal: frame f covers the window that ends
at sample (f + 1) * hop, zero-padded on the left, so a stream of n samples yields
exactly n // hop frames, frame f only sees audio up to time (f + 1) * hop, and labels at
the hop rate line up frame for frame. Each task defines its own `FeatureConfig` (its
feature width and frame rate); the default one is 40 log-mel bands, 20 ms window, 10 ms
hop at 16 kHz.

    >>> import jax.numpy as jnp
    >>> from speechkit import frontend
    >>> audio = jnp.zeros((2, 16000)); lengths = jnp.array([16000, 8000])
    >>> features, mask = frontend.log_mel(audio, lengths, frontend.FeatureConfig())
    >>> features.shape, mask.sum(axis=1).tolist()
    ((2, 100, 40), [100, 50])
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from speechkit import checks


@dataclasses.dataclass(frozen=True)
class FeatureConfig:
    """A front end's settings; hashable, so it can be a static argument of `jit`."""

    sample_rate: int = 16_000  # Hz
    window_ms: float = 20.0
    hop_ms: float = 10.0
    num_mels: int = 40
    fft_size: int | None = None  # default: the next power of two >= the window
    lower_hz: float = 20.0
    upper_hz: float | None = None  # default: sample_rate / 2
    log_floor: float = 1e-6  # added to the mel energies before the log

    def __post_init__(self):
        field = "FeatureConfig.{}".format
        rate = checks.require_int(field("sample_rate"), self.sample_rate, at_least=1)
        checks.require_memory(field("sample_rate"), 4 * rate, "one second of float32 audio")
        most_ms = checks.MAX_CONTEXT_S * 1000  # one window spans at most MAX_CONTEXT_S
        checks.require_number(field("window_ms"), self.window_ms, above=0, at_most=most_ms)
        checks.require_number(field("hop_ms"), self.hop_ms, above=0)
        checks.require_at_most(field("hop_ms"), self.hop_ms, "window_ms", self.window_ms)
        if self.window_samples < 2:
            raise ValueError(
                f"{field('window_ms')}: expected at least 2 samples, got {self.window_ms} ms "
                f"({self.window_samples} samples)"
            )
        if self.hop_samples < 1:
            raise ValueError(
                f"{field('hop_ms')}: expected at least 1 sample ({1000 / rate:g} ms at "
                f"{rate} Hz), got {self.hop_ms} ms ({self.hop_samples} samples)"
            )
        if self.fft_size is not None:
            checks.require_int(field("fft_size"), self.fft_size, at_least=self.window_samples)
            checks.require_context(field("fft_size"), self.fft_size, 1 / rate, "one FFT", "samples")
        if self.upper_hz is not None:  # at most Nyquist
            checks.require_number(field("upper_hz"), self.upper_hz, at_most=rate / 2)
        checks.require_number(field("lower_hz"), self.lower_hz, at_least=0, below=self.upper)
        checks.require_int(field("num_mels"), self.num_mels, at_least=1)
        # A floor at or above the energy a full-scale sine puts in one FFT bin,
        # (window_samples / 2) ** 2 (the Hann window's gain is window_samples / 2), flattens
        # every feature; at or below 0 the log of a silent frame is -inf or NaN.
        full_scale = (self.window_samples / 2) ** 2
        checks.require_number(field("log_floor"), self.log_floor, above=0, below=full_scale)
        bins = self.fft // 2 + 1  # the filterbank is built as float64 [bins, num_mels] arrays
        blame = "num_mels" if self.num_mels > bins else "fft_size"
        checks.require_memory(
            field(blame),
            3 * 8 * bins * self.num_mels,
            f"the mel filterbank ({bins} x "
            f"{self.num_mels}, three float64 arrays while it is built)",
        )
        frames = rate // self.hop_samples  # one second framed, windowed and transformed
        checks.require_memory(
            field("hop_ms"),
            frames * (4 * self.fft + 8 * bins),
            f"one second of audio as {frames} frames of {self.fft} samples and their spectra",
        )

    @property
    def window_samples(self) -> int:
        return int(round(self.sample_rate * self.window_ms / 1000))

    @property
    def hop_samples(self) -> int:
        return int(round(self.sample_rate * self.hop_ms / 1000))

    @property
    def hop_s(self) -> float:
        """Seconds per frame (the hop in whole samples): the frame rate is 1 / hop_s."""
        return self.hop_samples / self.sample_rate

    @property
    def fft(self) -> int:
        return self.fft_size or 1 << (self.window_samples - 1).bit_length()

    @property
    def upper(self) -> float:
        return self.sample_rate / 2 if self.upper_hz is None else self.upper_hz


def hz_to_mel(hz):
    """HTK mel scale."""
    return 2595.0 * np.log10(1.0 + np.asarray(hz, np.float64) / 700.0)


def mel_to_hz(mel):
    return 700.0 * (10.0 ** (np.asarray(mel, np.float64) / 2595.0) - 1.0)


@functools.lru_cache(maxsize=32)
def mel_filterbank(config: FeatureConfig) -> np.ndarray:
    """Triangular HTK mel filters, float32 [fft // 2 + 1, num_mels] (NumPy, made once)."""
    bins_hz = np.arange(config.fft // 2 + 1) * config.sample_rate / config.fft
    edges = mel_to_hz(
        np.linspace(hz_to_mel(config.lower_hz), hz_to_mel(config.upper), config.num_mels + 2)
    )
    lower, centre, upper = edges[:-2], edges[1:-1], edges[2:]
    rising = (bins_hz[:, None] - lower) / (centre - lower)
    falling = (upper - bins_hz[:, None]) / (upper - centre)
    return np.maximum(0.0, np.minimum(rising, falling)).astype(np.float32)


def num_frames(num_samples, config: FeatureConfig):
    """Frames for `num_samples` samples: one per complete hop (works on arrays too)."""
    return num_samples // config.hop_samples


def frame_mask(lengths, max_frames: int, config: FeatureConfig) -> jax.Array:
    """bool [B, max_frames]: True for frames inside each example's length (samples)."""
    return jnp.arange(max_frames)[None, :] < num_frames(jnp.asarray(lengths), config)[:, None]


def _check_audio(audio, lengths) -> None:
    if jnp.ndim(audio) != 2:
        raise ValueError(f"audio: expected shape [B, samples], got {jnp.shape(audio)}")
    if jnp.shape(lengths) != jnp.shape(audio)[:1]:
        raise ValueError(
            f"lengths: expected shape ({jnp.shape(audio)[0]},), got {jnp.shape(lengths)}"
        )
    if not jnp.issubdtype(jnp.result_type(audio), jnp.floating):
        raise TypeError(f"audio: expected a floating dtype, got {jnp.result_type(audio)}")


def frames(audio, config: FeatureConfig) -> jax.Array:
    """Causal windows of the audio, float32 [B, n // hop, window] (not yet weighted)."""
    audio = jnp.asarray(audio, jnp.float32)
    window, hop = config.window_samples, config.hop_samples
    count = audio.shape[1] // hop
    padded = jnp.pad(audio[:, : count * hop], ((0, 0), (window - hop, 0)))
    starts = jnp.arange(count)[:, None] * hop + jnp.arange(window)[None, :]
    return padded[:, starts]


def stft_magnitude(audio, lengths, config: FeatureConfig) -> tuple[jax.Array, jax.Array]:
    """|STFT| with a periodic Hann window.

    Args:
      audio: float [B, samples] in [-1, 1] (samples past each length are ignored).
      lengths: int [B] valid samples per example.
      config: static front-end settings.

    Returns:
      magnitude float32 [B, frames, fft // 2 + 1] (zero on padding frames) and the
      frame mask bool [B, frames].
    """
    _check_audio(audio, lengths)
    audio = jnp.asarray(audio, jnp.float32)
    valid_samples = jnp.arange(audio.shape[1])[None, :] < jnp.asarray(lengths)[:, None]
    windowed = frames(jnp.where(valid_samples, audio, 0.0), config) * _hann(config)
    magnitude = jnp.abs(jnp.fft.rfft(windowed, n=config.fft, axis=-1))
    mask = frame_mask(lengths, magnitude.shape[1], config)
    return jnp.where(mask[..., None], magnitude, 0.0), mask


def log_mel(audio, lengths, config: FeatureConfig = FeatureConfig()):
    """Log mel energies: log(|STFT|^2 @ mel filters + floor).

    Returns features float32 [B, frames, num_mels] (zero on padding frames) and the frame
    mask bool [B, frames]; frames = samples // hop.
    """
    magnitude, mask = stft_magnitude(audio, lengths, config)
    energies = jnp.matmul(magnitude**2, mel_filterbank(config), precision=jax.lax.Precision.HIGHEST)
    features = jnp.log(energies + config.log_floor)
    return jnp.where(mask[..., None], features, 0.0), mask


_jitted_log_mel = jax.jit(log_mel, static_argnums=2)


def waveform_log_mel(waveform: np.ndarray, config: FeatureConfig = FeatureConfig()) -> np.ndarray:
    """float32 [samples // hop, num_mels] log-mel of one NumPy waveform at config's rate.

    For corpus builders: padding to whole 5 s blocks bounds the number of shapes `jit`
    compiles for, and the causal framing makes the padding invisible to the kept frames.
    """
    block = 5 * config.sample_rate
    padded = np.pad(np.asarray(waveform, np.float32), (0, -np.size(waveform) % block))[None]
    features, mask = _jitted_log_mel(padded, np.array([np.size(waveform)]), config)
    # Sliced in NumPy: slicing the device array compiles a program for every new length.
    return np.asarray(features)[0, : int(np.asarray(mask).sum())]


def _hann(config: FeatureConfig) -> np.ndarray:
    n = np.arange(config.window_samples)
    return (0.5 - 0.5 * np.cos(2 * np.pi * n / config.window_samples)).astype(np.float32)


class FeatureStream:
    """The causal log-mel front end over samples that arrive in pieces of any size.

    `push(samples)` returns the frames float32 [frames, num_mels] completed by them: one
    per whole hop, equal to `speechkit.frontend.waveform_log_mel` of the whole stream
    (frame f needs the samples up to (f + 1) * hop only, so each piece is framed with
    the last window - hop samples before it, rounded up to whole hops, as left context).
    Pieces are computed in chunks of at most `chunk_frames` hops, one compiled shape.
    """

    def __init__(self, config: FeatureConfig, chunk_frames: int, log_mel=None):
        """`log_mel(audio float32 [1, context + chunk], lengths int32 [1])` -> features
        [1, frames, num_mels]: another implementation of `log_mel` for that one shape
        (an ONNX front end, `speechkit.onnx_export.lower_frontend`); None: `log_mel`."""
        self.config, self.hop = config, config.hop_samples
        self._log_mel = log_mel or (
            lambda audio, lengths: _jitted_log_mel(audio, lengths, config)[0]
        )
        self.context = -(-(config.window_samples - self.hop) // self.hop) * self.hop
        self.chunk = chunk_frames * self.hop
        self._history = np.zeros(self.context, np.float32)  # the stream's left padding
        self._pending = np.zeros(0, np.float32)  # samples short of a whole hop

    def push(self, samples) -> np.ndarray:
        """samples float [n] -> the completed frames float32 [frames, num_mels]."""
        self._pending = np.concatenate([self._pending, np.asarray(samples, np.float32)])
        pieces = [np.zeros((0, self.config.num_mels), np.float32)]
        while len(self._pending) >= self.hop:
            take = min(self.chunk, len(self._pending) // self.hop * self.hop)
            piece, self._pending = self._pending[:take], self._pending[take:]
            pieces.append(self._frames(piece))
        return np.concatenate(pieces)

    def _frames(self, piece: np.ndarray) -> np.ndarray:
        """A piece of whole hops -> its frames, framed with the history before it."""
        audio = np.concatenate([self._history, piece])
        padded = np.pad(audio, (0, self.context + self.chunk - len(audio)))
        features = self._log_mel(padded[None], np.array([len(audio)], np.int32))
        skip = self.context // self.hop
        self._history = audio[len(audio) - self.context :]
        return np.asarray(features[0, skip : skip + len(piece) // self.hop])


@functools.lru_cache(maxsize=8)
def envelope_matrix(bands: int, keep: int) -> np.ndarray:
    """float32 [bands, bands]: log-mel frames (as rows) @ it keeps their first `keep`
    orthonormal DCT-II coefficients (the cepstrum's low quefrencies: the spectral
    envelope) and transforms back to `bands` bands, dropping the finer structure
    (harmonics of the pitch, a synthesiser's ripple). keep == bands is the identity."""
    checks.require_int("keep", keep, at_least=1)
    if keep > bands:
        raise ValueError(f"keep: at most the {bands} bands, got {keep}")
    n = np.arange(bands)
    dct = np.sqrt(2.0 / bands) * np.cos(np.pi * (n[None, :] + 0.5) * n[:, None] / bands)
    dct[0] /= np.sqrt(2.0)  # orthonormal: dct @ dct.T == I
    kept = dct[:keep]
    return (kept.T @ kept).astype(np.float32)
