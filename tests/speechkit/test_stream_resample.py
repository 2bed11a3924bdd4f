"""speechkit.dsp.StreamResampler and speechkit.stream_resample: chunks of any size, rate,
channel count and sample type in; out, over any partition, the samples the command lines
read from a file of the same audio, cut as they cut them."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from speechkit import audio_io, dsp, frontend, stream_inputs
from speechkit.stream_resample import ChunkBlocks, ItemStream, check_sample_rate, mono_samples

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RATES = (8_000, 11_025, 16_000, 22_050, 32_000, 44_100, 48_000, 96_000)


def _partition(rng: np.random.Generator, signal: np.ndarray, cuts: int) -> list[np.ndarray]:
    """`signal` split at `cuts` random places (empty pieces and single samples included)."""
    return np.split(signal, np.sort(rng.integers(0, len(signal) + 1, cuts)))


@SETTINGS
@given(
    rate=st.sampled_from(RATES),
    length=st.integers(0, 12_000),
    cuts=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_pushes_equal_the_whole_signal_resampled_for_any_partition(rate, length, cuts, seed):
    """Sample for sample; and after every push at most `held_back` input samples lack
    their output."""
    rng = np.random.default_rng(seed)
    signal = rng.uniform(-1, 1, length).astype(np.float32)
    resampler = dsp.StreamResampler(rate, 16_000)
    out, pushed = [], 0
    for piece in _partition(rng, signal, cuts):
        out.append(resampler.push(piece))
        pushed += len(piece)
        emitted = sum(map(len, out))
        assert emitted * resampler.down >= (pushed - resampler.held_back) * resampler.up
    out.append(resampler.flush())
    np.testing.assert_array_equal(np.concatenate(out), dsp.resample(signal, rate, 16_000))


def test_flush_starts_a_new_signal_and_reset_drops_one():
    rng = np.random.default_rng(0)
    first, second = (rng.uniform(-1, 1, 5_000).astype(np.float32) for _ in range(2))
    resampler = dsp.StreamResampler(44_100, 16_000)
    resampler.push(first)
    resampler.flush()
    again = np.concatenate([resampler.push(second), resampler.flush()])
    np.testing.assert_array_equal(again, dsp.resample(second, 44_100, 16_000))
    resampler.push(first)
    resampler.reset()
    again = np.concatenate([resampler.push(second), resampler.flush()])
    np.testing.assert_array_equal(again, dsp.resample(second, 44_100, 16_000))


def test_held_back_is_the_filter_reach_plus_a_step():
    assert dsp.StreamResampler(16_000, 16_000).held_back == 0
    assert dsp.StreamResampler(48_000, 16_000).held_back == 35  # 33 + 3 - 1
    assert dsp.StreamResampler(44_100, 16_000).held_back == 881  # 441 + 441 - 1: 20 ms


@pytest.mark.parametrize(
    ("rate", "channels", "dtype"),
    [(44_100, 2, "int16"), (8_000, 1, "float32"), (16_000, 3, "float64")],
)
def test_chunk_blocks_are_the_commands_chunks_of_the_file(tmp_path, rate, channels, dtype):
    """The blocks of a recording pushed in random chunks equal, block for block,
    what the command lines stream from the file (`file_checked_chunks`)."""
    rng = np.random.default_rng(rate)
    audio = 0.3 * rng.standard_normal((int(1.3 * rate), channels))
    path = tmp_path / "a.wav"
    soundfile.write(path, audio, rate, subtype="PCM_16")
    data, _ = soundfile.read(path, dtype=dtype, always_2d=channels > 1)
    features = frontend.FeatureConfig()
    expected = list(stream_inputs.file_checked_chunks(str(path), features, 3_200, False))
    blocks = ChunkBlocks(rate, 16_000, 3_200)
    found = []
    for piece in _partition(rng, data, 40):
        found += blocks.push(piece)
    found += blocks.close()
    assert [len(block) for block in found] == [len(block) for block in expected]
    for block, wanted in zip(found, expected, strict=True):
        np.testing.assert_array_equal(block, wanted)


def test_close_leaves_the_blocks_ready_for_a_new_stream():
    blocks = ChunkBlocks(16_000, 16_000, 100)
    assert [len(b) for b in blocks.push(np.zeros(250, np.float32))] == [100, 100]
    assert [len(b) for b in blocks.close()] == [50]
    assert blocks.close() == []
    assert [len(b) for b in blocks.push(np.zeros(120, np.float32))] == [100]


def test_mono_samples_scale_pcm_and_average_channels():
    pcm = np.array([[-32768, 16384], [32767, 0]], np.int16)
    np.testing.assert_array_equal(mono_samples(pcm), np.float32([-0.25, 32767 / 65536]))
    np.testing.assert_array_equal(mono_samples(np.int32([1 << 30])), np.float32([0.5]))
    np.testing.assert_array_equal(mono_samples([0.5, -1.0]), np.float32([0.5, -1.0]))
    assert mono_samples(np.zeros((0, 2))).shape == (0,)


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        (np.zeros((2, 3, 4)), r"expected samples \[n\] \(mono\) or \[n, channels\], got shape"),
        (np.float32(0.5), r"got shape \(\)"),
        (np.zeros((2, 1000)), r"1 to 64 channels, got shape \(2, 1000\).*chunk\.T"),
        (np.zeros((10, 0)), "1 to 64 channels"),
        (np.array([0.1, np.nan]), "NaN or infinite"),
        (np.array([1e300]), "NaN or infinite samples \\(as float32\\)"),
        (np.array([1, 2], np.uint8), "signed integer PCM.*got dtype uint8"),
        (np.array(["a"]), "got dtype <U1"),
        (np.array([True]), "got dtype bool"),
    ],
)
def test_bad_chunks_are_named(chunk, message):
    with pytest.raises(ValueError, match=f"^chunk: .*{message}"):
        mono_samples(chunk)


def test_sample_rates_outside_the_files_range_are_refused():
    low, high = audio_io.RATE_RANGE
    assert check_sample_rate("sample_rate", 44_100.0) == 44_100
    for rate in (low - 1, high + 1, 16_000.5, 0, -16_000):
        with pytest.raises(
            ValueError, match=f"sample_rate: expected a whole number of Hz from {low} to {high}"
        ):
            check_sample_rate("sample_rate", rate)
    for rate in ("16000", None, True):
        with pytest.raises(TypeError, match="sample_rate: expected a sample rate in Hz"):
            check_sample_rate("sample_rate", rate)


class _Frames:
    """A front end giving one frame per 10 samples, the frames' values the samples'."""

    config = frontend.FeatureConfig(sample_rate=1_000, window_ms=20, hop_ms=10)

    def push(self, samples):
        return np.asarray(samples, np.float32)[::10, None]


class _Items:
    """An item stream listing the frames it got, then 'end' at close."""

    def push(self, frames):
        return frames[:, 0].tolist()

    def close(self):
        return ["end"]


def test_item_stream_runs_blocks_through_and_names_non_finite_features():
    stream = ItemStream(ChunkBlocks(16_000, 16_000, 20), lambda: (_Frames(), _Items()))
    assert stream.accept(np.arange(30, dtype=np.float32)) == [0.0, 10.0]
    assert stream.close() == [20.0, "end"]
    assert stream.accept(np.arange(20, dtype=np.float32)) == [0.0, 10.0]  # a new stream
    huge = np.full(20, np.inf, np.float32)
    with pytest.raises(ValueError, match=r"^chunk: non-finite features from 0\.020 s"):
        stream._run([huge])
