"""speechkit.channel: the configuration, the seeded chain of `degrade`, rooms and lines."""

import dataclasses
import hashlib

import numpy as np
import pytest
import soundfile

from speechkit import channel, dsp, rooms

RATE = 16_000


def _tone(hz, seconds=1.0, amplitude=0.5):
    t = np.arange(int(RATE * seconds)) / RATE
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


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
        (
            dict(reverb_probability=1.5),
            r"ChannelConfig.reverb_probability: expected a value in \[0, 1\], got 1.5",
        ),
        (dict(colour_probability=-0.1), r"ChannelConfig.colour_probability: expected a value in"),
    ],
)
def test_channel_config_names_the_bad_field(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        channel.ChannelConfig(**kwargs)


def test_channel_config_type_errors_name_the_field():
    with pytest.raises(TypeError, match="ChannelConfig.reverb_probability: expected a number"):
        channel.ChannelConfig(reverb_probability="often")
    with pytest.raises(TypeError, match="ChannelConfig.room: expected a rooms.RoomConfig"):
        channel.ChannelConfig(room=(0.2, 0.8))


def test_degrade_reaches_the_drawn_snr_and_gain():
    speech = _tone(440, amplitude=0.1)
    config = channel.ChannelConfig(snr_db=(12.0, 12.0), noise_kinds=("white",))
    degraded = channel.degrade(speech, np.random.default_rng(0), config, RATE)
    assert degraded.snr_db == 12.0 and degraded.noise == "white" and degraded.gain_db == 0.0
    measured = 10 * np.log10(dsp.power(speech) / dsp.power(degraded.waveform - speech))
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
    line = dsp.wideband_telephone(dsp.add_noise(speech, noise, snr_db), RATE)
    expected = np.clip(dsp.gain(line, float(rng.uniform(-6, 3))), -1.0, 1.0)
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
    assert dsp.power(degraded.waveform - speech) > 0


def test_through_line():
    tone = _tone(1000)
    np.testing.assert_array_equal(channel.through_line(tone, "none", RATE), tone)
    np.testing.assert_array_equal(
        channel.through_line(tone, "narrowband", RATE), dsp.telephone(tone, RATE)
    )
    with pytest.raises(ValueError, match="line: expected one of"):
        channel.through_line(tone, "tin-can", RATE)
    with pytest.raises(ValueError, match="kind: expected one of"):
        channel.make_noise(np.random.default_rng(0), "thunder", 10)


def test_docstring_example():
    import doctest

    assert doctest.testmod(channel).failed == 0


def _speech():
    t = np.arange(RATE) / RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)


# Recorded with `degrade` as it was before rooms and microphones existed: sha256 (first 16
# hex digits) of the waveform's bytes, noise, SNR, gain, then the rng's next integers(2**31).
BEFORE_ROOMS = [
    (
        dict(snr_db=(5.0, 25.0), noise_kinds=("white",), telephone="narrowband", gain_db=(-6, 6)),
        False,
        0,
        ("68223ffc6e476639", "white", 17.739233746429086, -1.375431410388975, 1628270365),
    ),
    (
        dict(snr_db=(5.0, 25.0), noise_kinds=("white",), telephone="narrowband", gain_db=(-6, 6)),
        False,
        7,
        ("efa99e26c338e96d", "white", 17.50190933209334, 0.9955248159903292, 1338605603),
    ),
    (
        dict(snr_db=(0.0, 10.0), noise_kinds=("white",), telephone="wideband"),
        False,
        0,
        ("9e26acdaee164fe3", "white", 6.369616873214543, 0.0, 1876935982),
    ),
    (dict(), False, 0, ("fb4ddad0c751db0a", "white", 19.046800706458054, 0.0, 1367864807)),
    (dict(), False, 7, ("afb2e43e41178441", "white", 28.458207014543632, 0.0, 1342382292)),
    (
        dict(noise_kinds=("pink",), gain_db=(-3.0, 3.0)),
        False,
        3,
        ("0dd2cee8b40b9c2c", "pink", 16.284737507154365, -2.773363988491635, 1004701185),
    ),
    (
        dict(noise_kinds=("pink",), gain_db=(-3.0, 3.0)),
        True,
        3,
        ("f6742a8ecafc8829", "pink", 27.319755955126507, -2.773363988491635, 1004701185),
    ),
]


@pytest.mark.parametrize("kwargs, noise_before_snr, seed, expected", BEFORE_ROOMS)
def test_defaults_reproduce_corpora_built_before_rooms(kwargs, noise_before_snr, seed, expected):
    """Without rooms and microphones (the defaults) `degrade` gives the same bytes and
    draws the same numbers as before they existed."""
    rng = np.random.default_rng(seed)
    config = channel.ChannelConfig(**kwargs)
    degraded = channel.degrade(_speech(), rng, config, RATE, noise_before_snr=noise_before_snr)
    digest = hashlib.sha256(degraded.waveform.tobytes()).hexdigest()[:16]
    found = (digest, degraded.noise, degraded.snr_db, degraded.gain_db, int(rng.integers(2**31)))
    assert found == expected
    assert (degraded.room, degraded.coloured) == ("none", False)


def test_degrade_in_a_room_and_through_a_microphone():
    speech = _speech()
    config = channel.ChannelConfig(
        snr_db=(12.0, 12.0),
        noise_kinds=("white",),
        gain_db=(-3.0, 0.0),
        reverb_probability=1.0,
        colour_probability=1.0,
    )
    rng = np.random.default_rng(5)
    degraded = channel.degrade(speech, rng, config, RATE)
    assert degraded.room.startswith("simulated rt60=") and degraded.coloured
    again = channel.degrade(speech, np.random.default_rng(5), config, RATE)
    np.testing.assert_array_equal(degraded.waveform, again.waveform)
    assert degraded == dataclasses.replace(again, waveform=degraded.waveform)
    assert degraded.waveform.shape == speech.shape and degraded.waveform.dtype == np.float32

    # The documented order: kind, SNR, noise, gain, then one seed for room and microphone;
    # the SNR holds against the reverberant, coloured speech.
    reference = np.random.default_rng(5)
    assert config.noise_kinds[int(reference.integers(1))] == degraded.noise
    assert float(reference.uniform(12.0, 12.0)) == degraded.snr_db
    noise = dsp.white_noise(reference, speech.size)
    assert float(reference.uniform(-3.0, 0.0)) == degraded.gain_db
    wet, room, coloured = channel.acoustics(speech, reference, config, RATE)
    assert (room, coloured) == (degraded.room, True)
    assert reference.integers(2**31) == rng.integers(2**31)  # the parent: one draw more
    mix = dsp.add_noise(wet, noise, 12.0)
    expected = np.clip(dsp.gain(mix, degraded.gain_db), -1.0, 1.0)
    np.testing.assert_array_equal(degraded.waveform, expected)
    measured = 10 * np.log10(dsp.power(wet) / dsp.power(mix - wet))
    assert measured == pytest.approx(12.0, abs=1e-3)
    assert dsp.power(wet) == pytest.approx(dsp.power(speech), rel=1e-5)
    assert not np.allclose(wet, speech, atol=1e-3)


def test_acoustics_draws_each_effect_with_its_probability():
    speech = _speech()[:4000]
    half = channel.ChannelConfig(reverb_probability=0.5, colour_probability=0.5)
    colour_only = dataclasses.replace(half, reverb_probability=0.0)
    drawn, colour_alone = [], []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        drawn.append(channel.acoustics(speech, rng, half, RATE)[1:])
        colour_alone.append(
            channel.acoustics(speech, np.random.default_rng(seed), colour_only, RATE)[2]
        )
    reverberant = sum(room != "none" for room, _ in drawn)
    coloured = sum(flag for _, flag in drawn)
    assert 10 <= reverberant <= 30 and 10 <= coloured <= 30
    # The colouring draws do not depend on whether a room was drawn.
    assert colour_alone == [flag for _, flag in drawn]


def test_acoustics_advances_the_rng_by_one_draw():
    speech = _speech()[:4000]
    for config in (
        channel.ChannelConfig(reverb_probability=1.0),
        channel.ChannelConfig(colour_probability=0.3),
        channel.ChannelConfig(),
    ):
        rng, reference = np.random.default_rng(1), np.random.default_rng(1)
        channel.acoustics(speech, rng, config, RATE)
        if config.reverb_probability or config.colour_probability:
            reference.integers(2**63)
        assert rng.integers(2**31) == reference.integers(2**31)


def test_degrade_with_measured_rooms(tmp_path):
    impulse = np.zeros(800, np.float32)
    impulse[[40, 300]] = [0.7, 0.2]
    soundfile.write(tmp_path / "office.wav", impulse, 8_000)
    config = channel.ChannelConfig(
        reverb_probability=1.0, room=rooms.RoomConfig(impulse_dir=str(tmp_path))
    )
    degraded = channel.degrade(_speech(), np.random.default_rng(0), config, RATE)
    assert degraded.room == "office.wav" and not degraded.coloured
