"""speechkit.frontend against a NumPy/SciPy loop reference, plus causality and masks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.signal import get_window

from speechkit import frontend

CONFIG = frontend.FeatureConfig()  # 40 bands, 20 ms window, 10 ms hop
WIDE_FFT = frontend.FeatureConfig(window_ms=25.0, hop_ms=10.0, num_mels=64, fft_size=512)


def _reference_filterbank(config):
    """Triangular HTK mel filters, built filter by filter from the textbook formula."""

    def mel(hz):
        return 2595.0 * np.log10(1.0 + hz / 700.0)

    def hz(m):
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    lo, hi = mel(config.lower_hz), mel(config.upper)
    points = [hz(lo + (hi - lo) * i / (config.num_mels + 1)) for i in range(config.num_mels + 2)]
    bins = config.fft // 2 + 1
    bank = np.zeros((bins, config.num_mels))
    for m in range(config.num_mels):
        left, centre, right = points[m], points[m + 1], points[m + 2]
        for k in range(bins):
            f = k * config.sample_rate / config.fft
            if left < f <= centre:
                bank[k, m] = (f - left) / (centre - left)
            elif centre < f < right:
                bank[k, m] = (right - f) / (right - centre)
    return bank


def _reference_log_mel(signal, length, config):
    window, hop = config.window_samples, config.hop_samples
    hann = get_window("hann", window)  # periodic
    signal = np.asarray(signal[:length], np.float64)
    out = []
    for f in range(length // hop):
        end = (f + 1) * hop
        segment = signal[max(0, end - window) : end]
        segment = np.concatenate([np.zeros(window - len(segment)), segment])
        power = np.abs(np.fft.rfft(segment * hann, n=config.fft)) ** 2
        out.append(np.log(power @ _reference_filterbank(config) + config.log_floor))
    return np.array(out).reshape(-1, config.num_mels)


def _speechlike(rng, samples, rate=16000):
    t = np.arange(samples) / rate
    tone = 0.3 * np.sin(2 * np.pi * (200 + 100 * np.sin(2 * np.pi * 3 * t)) * t)
    return (tone + 0.05 * rng.standard_normal(samples)).astype(np.float32)


def test_filterbank_matches_the_formula():
    np.testing.assert_allclose(
        frontend.mel_filterbank(CONFIG), _reference_filterbank(CONFIG), atol=1e-6
    )


@pytest.mark.parametrize("config", [CONFIG, WIDE_FFT])
def test_log_mel_matches_reference(config):
    rng = np.random.default_rng(0)
    audio = np.stack([_speechlike(rng, 8000), _speechlike(rng, 8000)])
    lengths = np.array([8000, 5555])
    features, mask = jax.jit(frontend.log_mel, static_argnums=2)(audio, lengths, config)
    assert features.shape == (2, 8000 // config.hop_samples, config.num_mels)
    assert mask.sum(axis=1).tolist() == [8000 // config.hop_samples, 5555 // config.hop_samples]
    for b in range(2):
        expected = _reference_log_mel(audio[b], lengths[b], config)
        np.testing.assert_allclose(features[b, : len(expected)], expected, atol=1e-4, rtol=1e-4)
        assert not np.any(features[b, len(expected) :])


def test_frames_are_causal_and_batch_independent():
    rng = np.random.default_rng(1)
    audio = _speechlike(rng, 4000)
    changed = audio.copy()
    changed[2000:] = rng.standard_normal(2000)  # only the future of frame 2000 // hop - 1
    a, _ = frontend.log_mel(audio[None], np.array([4000]))
    b, _ = frontend.log_mel(changed[None], np.array([4000]))
    cut = 2000 // CONFIG.hop_samples
    np.testing.assert_array_equal(a[0, :cut], b[0, :cut])
    assert np.abs(a[0, cut:] - b[0, cut:]).max() > 0.1
    together, _ = frontend.log_mel(np.stack([audio, changed]), np.array([4000, 4000]))
    np.testing.assert_allclose(together[0], a[0], atol=1e-5)


def test_stft_magnitude_of_a_tone_peaks_at_its_bin():
    rate, fft = CONFIG.sample_rate, CONFIG.fft
    tone = np.sin(2 * np.pi * 1000.0 * np.arange(3200) / rate).astype(np.float32)
    magnitude, mask = frontend.stft_magnitude(tone[None], np.array([3200]), CONFIG)
    assert mask.all()
    peak_bins = np.argmax(np.asarray(magnitude[0, 2:]), axis=-1)
    assert set(peak_bins.tolist()) == {round(1000.0 * fft / rate)}


@pytest.mark.parametrize(
    "kwargs, hop_samples, hop_s",
    [(dict(), 160, 0.01), (dict(sample_rate=8000, hop_ms=12.5, window_ms=25.0), 100, 0.0125)],
)
def test_hop_in_samples_and_seconds(kwargs, hop_samples, hop_s):
    config = frontend.FeatureConfig(**kwargs)
    assert config.hop_samples == hop_samples and config.hop_s == hop_s
    # One frame per hop: a second of audio has 1 / hop_s frames.
    assert frontend.num_frames(config.sample_rate, config) == round(1 / hop_s)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(hop_ms=30.0), "hop_ms"),
        (dict(fft_size=64), "fft_size"),
        (dict(upper_hz=9000.0), r"FeatureConfig.upper_hz: expected <= 8000.0"),
        (dict(num_mels=0), "num_mels"),
    ],
)
def test_bad_config(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        frontend.FeatureConfig(**kwargs)


def test_bad_audio():
    with pytest.raises(ValueError, match=r"audio: expected shape \[B, samples\]"):
        frontend.log_mel(np.zeros(100, np.float32), np.array([100]))
    with pytest.raises(ValueError, match=r"lengths: expected shape \(2,\)"):
        frontend.log_mel(np.zeros((2, 100), np.float32), np.array([100]))
    with pytest.raises(TypeError, match="audio: expected a floating dtype"):
        frontend.log_mel(jnp.zeros((1, 100), jnp.int32), np.array([100]))


def test_docstring_example():
    import doctest

    assert doctest.testmod(frontend).failed == 0


def test_feature_stream_equals_the_whole_file_front_end():
    samples = np.random.default_rng(2).normal(size=16000 + 77).astype(np.float32) * 0.1
    stream = frontend.FeatureStream(WIDE_FFT, chunk_frames=20)
    sizes = [1, 159, 3000, 161, 5000, 8000]
    pieces, begin = [], 0
    for size in [*sizes, len(samples)]:
        pieces.append(stream.push(samples[begin : begin + size]))
        begin += size
    whole = frontend.waveform_log_mel(samples, WIDE_FFT)
    np.testing.assert_allclose(np.concatenate(pieces), whole, atol=2e-5)


def test_the_envelope_keeps_slow_shapes_and_drops_ripple():
    full = frontend.envelope_matrix(64, 64)
    np.testing.assert_allclose(full, np.eye(64), atol=1e-5)
    smooth = frontend.envelope_matrix(64, 12)
    np.testing.assert_allclose(smooth @ smooth, smooth, atol=1e-5)  # a projection
    bands = np.arange(64)
    tilt = -0.05 * bands + np.cos(np.pi * (bands + 0.5) * 3 / 64)  # a slow shape
    ripple = 0.5 * np.cos(np.pi * (bands + 0.5) * 40 / 64)  # harmonics' fine structure
    np.testing.assert_allclose((tilt + ripple) @ smooth, tilt, atol=0.05)
    with pytest.raises(ValueError, match="keep"):
        frontend.envelope_matrix(64, 65)


def test_a_corpus_of_new_lengths_compiles_one_program_per_block():
    from speechkit import compilation

    rng = np.random.default_rng(3)
    frontend.waveform_log_mel(np.zeros(16000, np.float32), WIDE_FFT)  # the 5 s block's program
    with compilation.Counter() as counted:
        for frames in (130, 270, 410):  # new lengths inside the same block
            samples = rng.normal(size=frames * 160).astype(np.float32)
            features = frontend.waveform_log_mel(samples, WIDE_FFT)
            assert features.shape == (frames, WIDE_FFT.num_mels)
    assert counted.programs == 0, counted.summary()
