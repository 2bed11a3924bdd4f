"""speechkit.dsp: SNR, spectra of the noises, the telephone bands, mu-law, resampling."""

import numpy as np
import pytest
from scipy import signal as scipy_signal

from speechkit import dsp

RATE = 16_000


def _tone(hz, seconds=1.0, amplitude=0.5):
    t = np.arange(int(RATE * seconds)) / RATE
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.mark.parametrize("snr_db", [-5.0, 0.0, 10.0, 30.0])
def test_add_noise_reaches_the_snr(snr_db):
    rng = np.random.default_rng(0)
    speech = _tone(440)
    noisy = dsp.add_noise(speech, dsp.white_noise(rng, 5000), snr_db)
    measured = 10 * np.log10(dsp.power(speech) / dsp.power(noisy - speech))
    assert measured == pytest.approx(snr_db, abs=1e-3)


def test_noises_are_seeded_and_unit_power():
    for make in (dsp.white_noise, dsp.pink_noise):
        a = make(np.random.default_rng(3), 20_000)
        b = make(np.random.default_rng(3), 20_000)
        np.testing.assert_array_equal(a, b)
        assert dsp.power(a) == pytest.approx(1.0, rel=0.05)


def test_pink_noise_falls_3db_per_octave():
    noise = dsp.pink_noise(np.random.default_rng(1), 2**18)
    freqs, density = scipy_signal.welch(noise, fs=RATE, nperseg=4096)
    low = density[(freqs > 200) & (freqs < 400)].mean()
    high = density[(freqs > 3200) & (freqs < 6400)].mean()
    # 4 octaves up: 1/f power drops by a factor 16 (12 dB).
    assert 10 * np.log10(low / high) == pytest.approx(12.0, abs=1.5)


def test_babble_mixes_the_voices():
    rng = np.random.default_rng(2)
    voices = [_tone(300), _tone(700), _tone(1100)]
    mix = dsp.babble(rng, voices, RATE, talkers=8)
    assert mix.shape == (RATE,) and dsp.power(mix) == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(ValueError, match="at least one voice"):
        dsp.babble(rng, [], 10)


def test_telephone_keeps_the_band_and_drops_the_rest():
    rate_out = RATE
    inside = dsp.telephone(_tone(1000), RATE)
    below = dsp.telephone(_tone(100), RATE)
    above = dsp.telephone(_tone(5000), RATE)
    assert inside.shape == (RATE,) and inside.dtype == np.float32
    level = dsp.power(inside[rate_out // 10 :])
    assert level == pytest.approx(dsp.power(_tone(1000)), rel=0.1)
    assert dsp.power(below[rate_out // 10 :]) < 0.05 * level
    assert dsp.power(above[rate_out // 10 :]) < 1e-3 * level
    assert dsp.telephone(_tone(1000), RATE, output_rate=8000).shape == (8000,)


def test_mu_law_round_trip_error_is_small_and_clips():
    x = np.linspace(-1, 1, 1001).astype(np.float32)
    y = dsp.mu_law_decode(dsp.mu_law_encode(x))
    # Mu-law keeps the error roughly proportional to the amplitude (8 bits: ~3 %).
    assert np.all(np.abs(y - x) <= 0.03 * np.abs(x) + 1e-3)
    assert dsp.mu_law_encode(np.array([2.0, -2.0])).tolist() == [255, 0]


def test_gain_and_resample():
    tone = _tone(440, amplitude=0.1)
    assert dsp.power(dsp.gain(tone, 20.0)) == pytest.approx(100 * dsp.power(tone))
    assert dsp.resample(tone, RATE, 8000).shape == (8000,)
    assert dsp.resample(tone, RATE, 44_100).shape == (44_100,)


def test_bad_input():
    with pytest.raises(
        ValueError, match=r"waveform: expected a mono waveform \[samples\], got shape \(2, 3\)"
    ):
        dsp.gain(np.zeros((2, 3)), 1.0)
    with pytest.raises(ValueError, match="waveform: contains NaN"):
        dsp.add_noise(np.array([0.0, np.nan]), np.ones(2), 10.0)
    with pytest.raises(ValueError, match="noise: is silent"):
        dsp.add_noise(np.ones(4), np.zeros(4), 10.0)


def test_wideband_telephone_keeps_speech_band():
    inside = dsp.wideband_telephone(_tone(5000), RATE)
    below = dsp.wideband_telephone(_tone(20), RATE)
    assert inside.shape == (RATE,)
    level = dsp.power(inside[RATE // 10 :])
    assert level == pytest.approx(dsp.power(_tone(5000)), rel=0.1)
    assert dsp.power(below[RATE // 10 :]) < 0.1 * level


def test_docstring_example():
    import doctest

    assert doctest.testmod(dsp).failed == 0
