"""speechkit.channel: SNR, spectra of the noises, the telephone band, determinism."""

import dataclasses

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


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (
            dict(noise_kinds=("thunder",)),
            r"ChannelConfig.noise_kinds: expected some of \('pink', 'white', 'babble'\)",
        ),
        (dict(noise_kinds=()), "noise_kinds"),
        (dict(telephone="tin-can"), "ChannelConfig.telephone: expected one of"),
        (dict(snr_db=(30.0, 5.0)), r"snr_db: expected \(low, high\) with low <= high"),
        (dict(gain_db=(3.0, -6.0)), "gain_db: expected"),
        (dict(babble_talkers=0), "ChannelConfig.babble_talkers: expected an int >= 1"),
    ],
)
def test_channel_config_names_the_bad_field(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        channel.ChannelConfig(**kwargs)


def test_degrade_reaches_the_drawn_snr_and_gain():
    speech = _tone(440, amplitude=0.1)
    config = channel.ChannelConfig(snr_db=(12.0, 12.0), noise_kinds=("white",))
    degraded = channel.degrade(speech, np.random.default_rng(0), config, RATE)
    assert degraded.snr_db == 12.0 and degraded.noise == "white" and degraded.gain_db == 0.0
    measured = 10 * np.log10(channel.power(speech) / channel.power(degraded.waveform - speech))
    assert measured == pytest.approx(12.0, abs=1e-3)
    louder = dataclasses.replace(config, gain_db=(6.0, 6.0))
    amplified = channel.degrade(speech, np.random.default_rng(0), louder, RATE)
    assert amplified.gain_db == 6.0
    np.testing.assert_allclose(amplified.waveform, degraded.waveform * 10 ** (6 / 20), rtol=1e-5)


def test_degrade_is_seeded_and_clipped():
    speech = _tone(440, amplitude=0.9)
    config = channel.ChannelConfig(snr_db=(0.0, 5.0), telephone="narrowband", gain_db=(3.0, 6.0))
    a = channel.degrade(speech, np.random.default_rng(4), config, RATE)
    b = channel.degrade(speech, np.random.default_rng(4), config, RATE)
    c = channel.degrade(speech, np.random.default_rng(5), config, RATE)
    np.testing.assert_array_equal(a.waveform, b.waveform)
    assert a == dataclasses.replace(b, waveform=a.waveform)
    assert not np.array_equal(a.waveform, c.waveform)
    assert a.waveform.shape == speech.shape and a.waveform.dtype == np.float32
    assert np.abs(a.waveform).max() <= 1.0


@pytest.mark.parametrize("noise_before_snr", [False, True])
def test_degrade_draws_in_the_documented_order(noise_before_snr):
    """Kind, SNR, noise (or kind, noise, SNR), line, gain: corpora depend on this order."""
    speech = _tone(300, amplitude=0.2)
    config = channel.ChannelConfig(
        snr_db=(5.0, 25.0), noise_kinds=("pink", "white"), telephone="wideband", gain_db=(-6, 3)
    )
    degraded = channel.degrade(
        speech, np.random.default_rng(9), config, RATE, noise_before_snr=noise_before_snr
    )
    rng = np.random.default_rng(9)
    kind = config.noise_kinds[int(rng.integers(2))]
    if noise_before_snr:
        noise = channel.make_noise(rng, kind, speech.size)
        snr_db = float(rng.uniform(5.0, 25.0))
    else:
        snr_db = float(rng.uniform(5.0, 25.0))
        noise = channel.make_noise(rng, kind, speech.size)
    line = channel.wideband_telephone(channel.add_noise(speech, noise, snr_db), RATE)
    expected = np.clip(channel.gain(line, float(rng.uniform(-6, 3))), -1.0, 1.0)
    assert (degraded.noise, degraded.snr_db) == (kind, snr_db)
    np.testing.assert_array_equal(degraded.waveform, expected)


def test_babble_needs_voices_and_draws_them_from_the_rng():
    speech = _tone(440)
    config = channel.ChannelConfig(noise_kinds=("babble",), babble_talkers=3)
    with pytest.raises(ValueError, match="babble_voices"):
        channel.degrade(speech, np.random.default_rng(0), config, RATE)
    calls = []

    def voices(rng):
        calls.append(rng)
        return [_tone(200 + 100 * int(rng.integers(5)))]

    rng = np.random.default_rng(0)
    degraded = channel.degrade(speech, rng, config, RATE, babble_voices=voices)
    assert degraded.noise == "babble" and calls == [rng]
    assert channel.power(degraded.waveform - speech) > 0


def test_through_line():
    tone = _tone(1000)
    np.testing.assert_array_equal(channel.through_line(tone, "none", RATE), tone)
    np.testing.assert_array_equal(
        channel.through_line(tone, "narrowband", RATE), channel.telephone(tone, RATE)
    )
    with pytest.raises(ValueError, match="line: expected one of"):
        channel.through_line(tone, "tin-can", RATE)
    with pytest.raises(ValueError, match="kind: expected one of"):
        channel.make_noise(np.random.default_rng(0), "thunder", 10)


def test_docstring_example():
    import doctest

    assert doctest.testmod(channel).failed == 0
