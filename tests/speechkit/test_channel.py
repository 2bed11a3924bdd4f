"""speechkit.channel: SNR, spectra of the noises, the telephone band, determinism."""

import numpy as np
import pytest
from scipy import signal as scipy_signal

from speechkit import channel

RATE = 16_000


def _tone(hz, seconds=1.0, amplitude=0.5):
    t = np.arange(int(RATE * seconds)) / RATE
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.mark.parametrize("snr_db", [-5.0, 0.0, 10.0, 30.0])
def test_add_noise_reaches_the_snr(snr_db):
    rng = np.random.default_rng(0)
    speech = _tone(440)
    noisy = channel.add_noise(speech, channel.white_noise(rng, 5000), snr_db)
    measured = 10 * np.log10(channel.power(speech) / channel.power(noisy - speech))
    assert measured == pytest.approx(snr_db, abs=1e-3)


def test_noises_are_seeded_and_unit_power():
    for make in (channel.white_noise, channel.pink_noise):
        a = make(np.random.default_rng(3), 20_000)
        b = make(np.random.default_rng(3), 20_000)
        np.testing.assert_array_equal(a, b)
        assert channel.power(a) == pytest.approx(1.0, rel=0.05)


def test_pink_noise_falls_3db_per_octave():
    noise = channel.pink_noise(np.random.default_rng(1), 2**18)
    freqs, density = scipy_signal.welch(noise, fs=RATE, nperseg=4096)
    low = density[(freqs > 200) & (freqs < 400)].mean()
    high = density[(freqs > 3200) & (freqs < 6400)].mean()
    # 4 octaves up: 1/f power drops by a factor 16 (12 dB).
    assert 10 * np.log10(low / high) == pytest.approx(12.0, abs=1.5)


def test_babble_mixes_the_voices():
    rng = np.random.default_rng(2)
    voices = [_tone(300), _tone(700), _tone(1100)]
    mix = channel.babble(rng, voices, RATE, talkers=8)
    assert mix.shape == (RATE,) and channel.power(mix) == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(ValueError, match="at least one voice"):
        channel.babble(rng, [], 10)


def test_telephone_keeps_the_band_and_drops_the_rest():
    rate_out = RATE
    inside = channel.telephone(_tone(1000), RATE)
    below = channel.telephone(_tone(100), RATE)
    above = channel.telephone(_tone(5000), RATE)
    assert inside.shape == (RATE,) and inside.dtype == np.float32
    level = channel.power(inside[rate_out // 10 :])
    assert level == pytest.approx(channel.power(_tone(1000)), rel=0.1)
    assert channel.power(below[rate_out // 10 :]) < 0.05 * level
    assert channel.power(above[rate_out // 10 :]) < 1e-3 * level
    assert channel.telephone(_tone(1000), RATE, output_rate=8000).shape == (8000,)


def test_mu_law_round_trip_error_is_small_and_clips():
    x = np.linspace(-1, 1, 1001).astype(np.float32)
    y = channel.mu_law_decode(channel.mu_law_encode(x))
    # Mu-law keeps the error roughly proportional to the amplitude (8 bits: ~3 %).
    assert np.all(np.abs(y - x) <= 0.03 * np.abs(x) + 1e-3)
    assert channel.mu_law_encode(np.array([2.0, -2.0])).tolist() == [255, 0]


def test_gain_and_resample():
    tone = _tone(440, amplitude=0.1)
    assert channel.power(channel.gain(tone, 20.0)) == pytest.approx(100 * channel.power(tone))
    assert channel.resample(tone, RATE, 8000).shape == (8000,)
    assert channel.resample(tone, RATE, 44_100).shape == (44_100,)


def test_bad_input():
    with pytest.raises(
        ValueError, match=r"waveform: expected a mono waveform \[samples\], got shape \(2, 3\)"
    ):
        channel.gain(np.zeros((2, 3)), 1.0)
    with pytest.raises(ValueError, match="waveform: contains NaN"):
        channel.add_noise(np.array([0.0, np.nan]), np.ones(2), 10.0)
    with pytest.raises(ValueError, match="noise: is silent"):
        channel.add_noise(np.ones(4), np.zeros(4), 10.0)


def test_wideband_telephone_keeps_speech_band():
    inside = channel.wideband_telephone(_tone(5000), RATE)
    below = channel.wideband_telephone(_tone(20), RATE)
    assert inside.shape == (RATE,)
    level = channel.power(inside[RATE // 10 :])
    assert level == pytest.approx(channel.power(_tone(5000)), rel=0.1)
    assert channel.power(below[RATE // 10 :]) < 0.1 * level
