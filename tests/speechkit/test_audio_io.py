"""speechkit.audio_io: round trips, resampling, and a clear error for every bad file."""

import numpy as np
import pytest
import soundfile

from speechkit import audio_io


def _tone(rate=16_000, seconds=0.5):
    t = np.arange(int(rate * seconds)) / rate
    return (0.25 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def test_round_trip_and_resample(tmp_path):
    path = audio_io.write_audio(tmp_path / "a" / "tone.wav", _tone(), 16_000)
    samples, rate = audio_io.read_audio(path)
    assert rate == 16_000 and samples.shape == (8000,) and samples.dtype == np.float32
    np.testing.assert_allclose(samples, _tone(), atol=1 / 2**15)
    samples, rate = audio_io.read_audio(path, target_rate=8000)
    assert rate == 8000 and samples.shape == (4000,)
    assert not list(tmp_path.glob("a/*.tmp*"))


def test_stereo_needs_consent(tmp_path):
    stereo = np.stack([_tone(), -_tone()], axis=1)
    path = audio_io.write_audio(tmp_path / "stereo.flac", stereo, 16_000)
    with pytest.raises(
        audio_io.AudioFileError, match=r"stereo.flac: has 2 channel\(s\), expected 1"
    ):
        audio_io.read_audio(path)
    mixed, _ = audio_io.read_audio(path, channels=2, mix_to_mono=True)
    assert np.abs(mixed).max() < 1e-4  # the two channels cancel
    both, _ = audio_io.read_audio(path, channels=None)
    assert both.shape == (8000, 2)


def test_every_bad_file_names_itself(tmp_path):
    with pytest.raises(audio_io.AudioFileError, match="missing.wav: no such file"):
        audio_io.read_audio(tmp_path / "missing.wav")
    (tmp_path / "empty.wav").write_bytes(b"")
    with pytest.raises(audio_io.AudioFileError, match=r"empty.wav: is empty \(0 bytes\)"):
        audio_io.read_audio(tmp_path / "empty.wav")
    (tmp_path / "notes.wav").write_text("this is not audio")
    with pytest.raises(audio_io.AudioFileError, match="notes.wav: not a readable audio file"):
        audio_io.read_audio(tmp_path / "notes.wav")
    good = audio_io.write_audio(tmp_path / "cut.wav", _tone(), 16_000).read_bytes()
    (tmp_path / "cut.wav").write_bytes(good[:30])  # header cut in half
    with pytest.raises(audio_io.AudioFileError, match="cut.wav: not a readable audio file"):
        audio_io.read_audio(tmp_path / "cut.wav")
    with pytest.raises(audio_io.AudioFileError, match="is a folder"):
        audio_io.read_audio(tmp_path)
    soundfile.write(tmp_path / "silent.wav", np.zeros((0, 1), np.float32), 16_000)
    with pytest.raises(
        audio_io.AudioFileError, match="silent.wav: (holds no samples|not a readable)"
    ):
        audio_io.read_audio(tmp_path / "silent.wav")


def test_nan_samples_are_an_error(tmp_path):
    samples = _tone()
    samples[4000] = np.nan
    soundfile.write(tmp_path / "nan.wav", samples, 16_000, subtype="FLOAT")
    with pytest.raises(
        audio_io.AudioFileError, match=r"nan.wav: 1 non-finite sample\(s\), the first at 0.250 s"
    ):
        audio_io.read_audio(tmp_path / "nan.wav")
    with pytest.raises(ValueError, match="refusing to write non-finite samples"):
        audio_io.write_audio(tmp_path / "out.wav", samples, 16_000)
    assert not (tmp_path / "out.wav").exists()
