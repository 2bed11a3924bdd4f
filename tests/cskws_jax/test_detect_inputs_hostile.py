"""What a detection run is given that could hurt it (issue 31, items 6, 7, 9 and 10):
long files read in bounded memory, a finite but huge sample, labels that would forge
table rows, truncated WAVs, a few samples on stdin. Each error names the input and
what is wrong, with the commands' exit status 1 (a bad input)."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import soundfile

from cskws_jax import bundle, detect
from speechkit import audio_io, dsp, stream_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, tiny_afkws):
    net, params = tiny_afkws
    root = tmp_path_factory.mktemp("hostile")
    bundle.save(root / "bundle", net, params, ("alpha", "beta", "gamma"), None, "random")
    return root


def _noise_wav(path: Path, seconds: float, rate: int = 16_000, channels: int = 1, **kw):
    """White noise at 0.1 rms, written block by block (no whole-file array here)."""
    rng = np.random.default_rng(0)
    with soundfile.SoundFile(path, "w", rate, channels, **kw) as out:
        left = round(seconds * rate)
        while left:
            n = min(left, 1 << 18)
            out.write((0.1 * rng.standard_normal((n, channels))).astype(np.float32))
            left -= n
    return path


def _detect(*args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cskws_jax.detect", *map(str, args)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        timeout=300,
    )


@pytest.mark.parametrize("rate, channels", [(44_100, 2), (48_000, 1), (8_000, 1), (16_000, 2)])
def test_blocks_give_the_whole_file_sample_for_sample(tmp_path, rate, channels):
    wav = _noise_wav(tmp_path / "a.wav", 3.3, rate, channels, subtype="FLOAT")
    whole, _ = audio_io.read_audio(wav, target_rate=16_000, channels=None, mix_to_mono=True)
    for block_frames in (1000, 4410, 1 << 16):
        blocks = audio_io.read_audio_blocks(wav, target_rate=16_000, block_frames=block_frames)
        np.testing.assert_array_equal(np.concatenate(list(blocks)), whole)


def test_resample_stream_equals_one_call_on_random_partitions():
    rng = np.random.default_rng(3)
    rates = [(44_100, 16_000), (22_050, 16_000), (8_000, 16_000), (32_000, 16_000)]
    for from_rate, to_rate in rates:
        for length in (1, 300, 70_001, 150_000):
            signal = rng.standard_normal(length).astype(np.float32)
            parts = np.split(signal, np.sort(rng.integers(0, length + 1, 6)))
            streamed = list(dsp.resample_stream(parts, from_rate, to_rate))
            np.testing.assert_array_equal(
                np.concatenate(streamed), dsp.resample(signal, from_rate, to_rate)
            )


# VmHWM, not ru_maxrss: the latter keeps the forking process's peak across exec.
_PEAK = textwrap.dedent(
    """
    import sys
    from cskws_jax import detect
    code = detect.main(sys.argv[1:])
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    print(peak, code)
    """
)


def _peak_kib(*args) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    peak, code = done.stdout.split()[-2:]
    assert code == "0", done.stderr
    return int(peak)


def test_memory_does_not_grow_with_the_file(folder, tmp_path):
    """A 10-minute 48 kHz stereo file against a 1-minute one (read whole, the long one
    alone would take 230 MB of float32 samples before resampling; the parent of the
    block-reading change grew by 312 MB). A process's peak varies by up to ~65 MB from
    run to run whatever the file (allocator arenas of XLA's threads), so the long file's
    peak is the lower of two runs and the bound leaves that margin."""
    short = _noise_wav(tmp_path / "short.wav", 60, 48_000, 2, subtype="PCM_16")
    long = _noise_wav(tmp_path / "long.wav", 600, 48_000, 2, subtype="PCM_16")
    args = (folder / "bundle", "--quiet", "--format=csv", "--min-score", "0.99")
    peak_long = min(_peak_kib(*args, long), _peak_kib(*args, long))
    peak_short = _peak_kib(*args, short)
    print(f"peak {peak_short / 1024:.0f} MB (1 minute), {peak_long / 1024:.0f} MB (10 minutes)")
    grown = peak_long - peak_short
    assert grown < 150 * 1024, f"peak memory grew by {grown / 1024:.0f} MB"


def test_a_huge_finite_sample_is_refused_at_its_time(folder, tmp_path):
    wav = tmp_path / "loud.wav"
    samples = 0.1 * np.random.default_rng(1).standard_normal(48_000).astype(np.float32)
    samples[int(1.5 * 16_000)] = 1e30
    soundfile.write(wav, samples, 16_000, subtype="FLOAT")
    done = _detect(folder / "bundle", wav)
    assert done.returncode == 1
    assert b"loud.wav: non-finite features from 1.500 s" in done.stderr, done.stderr


def test_a_truncated_wav_is_refused(folder, tmp_path):
    whole = _noise_wav(tmp_path / "whole.wav", 2.0, subtype="PCM_16")
    cut = tmp_path / "cut.wav"
    cut.write_bytes(whole.read_bytes()[: 44 + 2 * 496])
    done = _detect(folder / "bundle", cut)
    assert done.returncode == 1
    assert (
        b"cut.wav: truncated: its WAV header promises 32000 samples (2.000 s), the file holds "
        b"496 (0.031 s)" in done.stderr
    ), done.stderr


def test_stdin_needs_a_window_like_a_file(folder):
    pcm = (np.full(50, 3000, np.int16)).tobytes()
    done = _detect(folder / "bundle", "-", stdin=pcm)
    assert done.returncode == 1
    assert b"-: too short: 50 samples at 16000 Hz" in done.stderr, done.stderr


def test_labels_cannot_forge_table_rows():
    out = io.StringIO()
    table = detect.output("table", out)
    forged = "al\npha     9.99  9.99  0.999  9.99  forged.wav"
    table.write("x\n.wav", detect.Detection(forged, 0, 1.0, 1.5, 0.9, 1.6))
    table.write("y.wav", detect.Detection("be\x1b[31mta", 1, 2.0, 2.5, 0.8, 2.6))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("al\\npha") and lines[0].endswith("x\\n.wav")
    assert lines[1].startswith("be\\x1b[31mta")
    assert stream_cli.printable("plain é") == "plain é"


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("--block-ms", "nan", "a finite number in (0, 60000]"),
        ("--block-ms", "1e300", "a finite number in (0, 60000]"),
        ("--block-ms", "inf", "a finite number in (0, 60000]"),
        ("--min-score", "5", "a finite number in [0, 1]"),
        ("--min-score", "nan", "a finite number in [0, 1]"),
        ("--refractory-s", "nan", "a finite number in [0, inf)"),
        ("--fa-per-hour", "0", "a finite number in (0, inf)"),
    ],
)
def test_numeric_options_are_checked(option, value, expected, capsys):
    with pytest.raises(SystemExit) as stop:
        detect.parser().parse_args(["bundle", "a.wav", option, value])
    assert stop.value.code == 2
    assert f"argument {option}: {value!r}: expected {expected}" in capsys.readouterr().err


def test_a_link_loop_is_named_as_one(tmp_path):
    loop = tmp_path / "loop.wav"
    loop.symlink_to(loop)
    with pytest.raises(audio_io.AudioFileError, match="loop.wav: a symbolic link that leads to no"):
        list(audio_io.read_audio_blocks(loop))
    with pytest.raises(audio_io.AudioFileError, match="missing.wav: no such file"):
        audio_io.read_audio(tmp_path / "missing.wav")
