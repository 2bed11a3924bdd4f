"""speechkit.rooms: simulated and measured impulse responses, aligned reverberation,
microphone colouring, and config errors that name the field."""

import re

import numpy as np
import pyroomacoustics as pra
import pytest
import soundfile
from scipy import signal as scipy_signal

from speechkit import audio_io, rooms

RATE = 16_000


def _noise(seconds=1.0, seed=0):
    return (0.1 * np.random.default_rng(seed).standard_normal(int(RATE * seconds))).astype(
        np.float32
    )


def _power(x):
    return float(np.mean(np.square(x, dtype=np.float64)))


def test_simulated_rir_is_normalised_and_seeded():
    config = rooms.RoomConfig()
    room = rooms.draw_room(np.random.default_rng(0), config, RATE)
    rir = room.rir
    assert rir.ndim == 1 and rir.dtype == np.float32 and rir.size > 1000
    assert rir[rooms.direct_path(rir)] == 1.0 and np.abs(rir).max() == 1.0
    assert re.fullmatch(
        r"simulated rt60=0\.\d\ds size=\d\.\dx\d\.\dx\d\.\dm distance=\d\.\d\dm", room.name
    )
    again = rooms.room_impulse_response(np.random.default_rng(0), config, RATE)
    np.testing.assert_array_equal(rir, again)
    other = rooms.room_impulse_response(np.random.default_rng(1), config, RATE)
    assert other.shape != rir.shape or not np.array_equal(other, rir)


def test_the_direct_path_arrives_after_the_drawn_distance():
    config = rooms.RoomConfig(distance_m=(1.5, 1.5), size_m=((6, 6), (5, 5), (3, 3)))
    for seed in range(3):
        room = rooms.draw_room(np.random.default_rng(seed), config, RATE)
        assert room.name.endswith("distance=1.50m")  # never clipped in this room
        delay = pra.constants.get("frac_delay_length") // 2 + 1.5 / rooms.SPEED_OF_SOUND * RATE
        assert rooms.direct_path(room.rir) == pytest.approx(delay, abs=1.0)


@pytest.mark.parametrize("rt60", [0.3, 0.6])
def test_simulated_rt60_is_roughly_the_drawn_one(rt60):
    config = rooms.RoomConfig(rt60_s=(rt60, rt60), size_m=((6, 6), (5, 5), (3, 3)))
    rir = rooms.room_impulse_response(np.random.default_rng(2), config, RATE)
    measured = pra.experimental.measure_rt60(rir, fs=RATE, decay_db=30)
    assert 0.6 * rt60 < measured < 1.6 * rt60  # Sabine's formula is only a guide


def test_reverberate_keeps_timing_length_and_power():
    waveform = np.zeros(20, np.float32)
    waveform[10] = 0.5
    rir = np.array([0.1, 0.0, 1.0, 0.5], np.float32)  # pre-ringing, peak, tail
    out = rooms.reverberate(waveform, rir)
    assert out.shape == (20,) and out.dtype == np.float32
    scale = 0.5 / np.sqrt(0.1**2 + 1 + 0.5**2)  # the output keeps the input's power
    expected = np.zeros(20)
    expected[[8, 10, 11]] = [0.1 * scale, scale, 0.5 * scale]
    np.testing.assert_allclose(out, expected, atol=1e-7)
    assert _power(out) == pytest.approx(_power(waveform), rel=1e-6)


def test_reverberate_with_a_simulated_room():
    rir = rooms.room_impulse_response(np.random.default_rng(3), rooms.RoomConfig(), RATE)
    impulse = np.zeros(RATE, np.float32)
    impulse[4000] = 0.8
    wet = rooms.reverberate(impulse, rir)
    assert wet.shape == impulse.shape and int(np.argmax(np.abs(wet))) == 4000
    speech = _noise()
    assert _power(rooms.reverberate(speech, rir)) == pytest.approx(_power(speech), rel=1e-5)
    silent = rooms.reverberate(np.zeros(100, np.float32), rir)
    assert silent.shape == (100,) and not silent.any()
    assert rooms.reverberate(np.zeros(0, np.float32), rir).shape == (0,)
    with pytest.raises(ValueError, match="rir: expected a non-zero impulse response"):
        rooms.reverberate(speech, np.zeros(8))
    with pytest.raises(ValueError, match="waveform: expected a mono waveform"):
        rooms.reverberate(np.zeros((2, 8)), rir)


def _impulse(rate, seconds, at_s, amplitude=0.5):
    samples = np.zeros(int(rate * seconds), np.float32)
    samples[int(rate * at_s)] = amplitude
    samples[int(rate * at_s) + 1 :] += 0.05 * np.exp(
        -np.arange(samples.size - 1 - int(rate * at_s)) / 500
    )
    return samples


def test_measured_impulse_responses(tmp_path):
    # 48 kHz stereo: the first channel's peak at 10 ms, the second's at 50 ms.
    stereo = np.stack([_impulse(48_000, 0.1, 0.01), -_impulse(48_000, 0.1, 0.05, 0.9)], axis=1)
    soundfile.write(tmp_path / "hall.wav", stereo, 48_000, subtype="FLOAT")
    (tmp_path / "sub").mkdir()
    soundfile.write(tmp_path / "sub" / "booth.WAV", _impulse(8_000, 0.2, 0.02), 8_000)
    (tmp_path / "README.txt").write_text("not an impulse response")
    config = rooms.RoomConfig(impulse_dir=str(tmp_path))
    drawn = {}
    for seed in range(8):
        room = rooms.draw_room(np.random.default_rng(seed), config, RATE)
        drawn[room.name] = room.rir
        again = rooms.room_impulse_response(np.random.default_rng(seed), config, RATE)
        np.testing.assert_array_equal(room.rir, again)
    assert sorted(drawn) == ["hall.wav", "sub/booth.WAV"]
    hall, booth = drawn["hall.wav"], drawn["sub/booth.WAV"]
    assert hall.shape == (1600,) and booth.shape == (3200,)  # resampled to 16 kHz
    assert rooms.direct_path(hall) == pytest.approx(160, abs=1)  # the first channel's
    assert rooms.direct_path(booth) == pytest.approx(320, abs=1)
    assert hall[rooms.direct_path(hall)] == 1.0 and booth[rooms.direct_path(booth)] == 1.0


def test_impulse_dir_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no audio here")
    with pytest.raises(ValueError, match=r"RoomConfig.impulse_dir: .*empty holds no .wav files"):
        rooms.draw_room(np.random.default_rng(0), rooms.RoomConfig(impulse_dir=str(empty)), RATE)
    missing = rooms.RoomConfig(impulse_dir=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match=r"RoomConfig.impulse_dir: .*missing is not a folder"):
        rooms.draw_room(np.random.default_rng(0), missing, RATE)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad.wav").write_bytes(b"RIFF, but not really a wave file")
    with pytest.raises(audio_io.AudioFileError, match=r"bad.wav: not a readable audio file"):
        rooms.draw_room(np.random.default_rng(0), rooms.RoomConfig(impulse_dir=str(broken)), RATE)
    silent = tmp_path / "silent"
    silent.mkdir()
    soundfile.write(silent / "quiet.wav", np.zeros(100, np.float32), RATE)
    with pytest.raises(audio_io.AudioFileError, match=r"quiet.wav: is silent"):
        rooms.draw_room(np.random.default_rng(0), rooms.RoomConfig(impulse_dir=str(silent)), RATE)


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(rt60_s=(0.8, 0.2)), ValueError, r"RoomConfig.rt60_s: expected \(low, high\)"),
        (dict(rt60_s=(0.0, 0.5)), ValueError, r"RoomConfig.rt60_s: expected > 0"),
        (dict(rt60_s=(0.05, 0.5)), ValueError, r"RoomConfig.rt60_s: 0.05 s is too short"),
        (dict(size_m=((3, 8), (3, 6))), ValueError, r"RoomConfig.size_m: expected 3"),
        (dict(size_m="big"), TypeError, r"RoomConfig.size_m: expected 3"),
        (
            dict(size_m=((0.3, 8), (3, 6), (2, 3))),
            ValueError,
            r"RoomConfig.size_m\[0\]: expected > 0.4",
        ),
        (
            dict(size_m=((3, 8), (6, 3), (2, 3))),
            ValueError,
            r"RoomConfig.size_m\[1\]: expected \(low",
        ),
        (dict(distance_m=(0.0, 1.0)), ValueError, r"RoomConfig.distance_m: expected > 0"),
        (dict(max_order=-1), ValueError, r"RoomConfig.max_order: expected an int >= 0"),
        (dict(max_order=2.5), TypeError, r"RoomConfig.max_order: expected an int"),
        (dict(impulse_dir=3), TypeError, r"RoomConfig.impulse_dir: expected a folder path"),
        (dict(impulse_dir=""), TypeError, r"RoomConfig.impulse_dir: expected a folder path"),
    ],
)
def test_room_config_names_the_bad_field(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        rooms.RoomConfig(**kwargs)


def _db(sos, hz):
    _, response = scipy_signal.sosfreqz(sos, worN=[hz], fs=RATE)
    return float(20 * np.log10(np.abs(response[0])))


@pytest.mark.parametrize(
    "kind, low_db, centre_db, high_db",
    [("peak", 0.0, 6.0, 0.0), ("low_shelf", 6.0, 3.0, 0.0), ("high_shelf", 0.0, 3.0, 6.0)],
)
def test_biquads_follow_the_cookbook(kind, low_db, centre_db, high_db):
    sos = rooms._biquad(kind, 1000.0, 6.0, 1 / np.sqrt(2), RATE)[None]
    assert _db(sos, 1.0) == pytest.approx(low_db, abs=0.05)
    assert _db(sos, 1000.0) == pytest.approx(centre_db, abs=0.05)
    assert _db(sos, RATE / 2 - 1) == pytest.approx(high_db, abs=0.05)


def test_microphone_colour_keeps_the_level_and_changes_the_spectrum():
    noise = _noise(2.0)
    coloured = rooms.microphone_colour(np.random.default_rng(4), noise, RATE)
    assert coloured.shape == noise.shape and coloured.dtype == np.float32
    assert _power(coloured) == pytest.approx(_power(noise), rel=1e-5)
    freqs, before = scipy_signal.welch(noise, fs=RATE, nperseg=1024)
    _, after = scipy_signal.welch(coloured, fs=RATE, nperseg=1024)
    change_db = 10 * np.log10(after[1:] / before[1:])
    assert np.ptp(change_db[freqs[1:] > 400]) > 2.0  # not a flat gain
    assert change_db[freqs[1:] < 40].max() < change_db.max() - 6  # the high-pass
    again = rooms.microphone_colour(np.random.default_rng(4), noise, RATE)
    np.testing.assert_array_equal(coloured, again)
    sos = rooms.microphone_response(np.random.default_rng(4), RATE)
    assert sos.shape[1] == 6 and sos.shape[0] in (3, 4)
    assert not rooms.microphone_colour(np.random.default_rng(0), np.zeros(50), RATE).any()
    assert rooms.microphone_colour(np.random.default_rng(0), np.zeros(0), RATE).shape == (0,)
    assert rooms.microphone_colour(np.random.default_rng(0), noise[:8000], 8_000).shape == (8000,)
    with pytest.raises(ValueError, match="sample_rate: expected an int >= 8000"):
        rooms.microphone_colour(np.random.default_rng(0), noise, 4_000)


def test_docstring_example():
    import doctest

    assert doctest.testmod(rooms).failed == 0
