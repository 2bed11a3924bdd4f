"""A header's sample rate must not set memory (issue 59, item 2): rates outside
`audio_io.RATE_RANGE` are refused by name, and an awkward ratio inside it is resampled
with a bounded filter (`dsp.resample_ratio`)."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from speechkit import audio_io, dsp

ROOT = Path(__file__).resolve().parents[2]


def claimed_rate_wav(path: Path, rate: int, samples: int = 16_000) -> Path:
    """A 16-bit mono WAV of `samples` noise samples whose header claims `rate` Hz."""
    data = (np.random.default_rng(0).standard_normal(samples) * 3000).astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, rate, (rate * 2) & 0xFFFFFFFF, 2, 16)
    body = b"WAVEfmt " + struct.pack("<I", 16) + fmt + b"data"
    body += struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


@pytest.mark.parametrize("rate", [1, 3_999, 384_001, 1_000_003, 4_000_001, 2**31 - 1])
def test_rates_outside_the_range_are_refused_by_name(tmp_path, rate):
    wav = claimed_rate_wav(tmp_path / "claims.wav", rate)
    expected = rf"claims\.wav: sample rate {rate} Hz, expected 4000 to 384000 Hz"
    with pytest.raises(audio_io.AudioFileError, match=expected):
        audio_io.read_audio(wav, target_rate=16_000)
    with pytest.raises(audio_io.AudioFileError, match=expected):
        next(audio_io.read_audio_blocks(wav, target_rate=16_000))


def test_detect_refuses_a_1_hz_wav_with_exit_1(tmp_path):
    wav = claimed_rate_wav(tmp_path / "one-hertz.wav", 1)
    model = ROOT / "cskws_jax" / "models" / "afkws-top20"
    run = subprocess.run(
        [sys.executable, "-m", "cskws_jax.detect", str(model), str(wav)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr
    assert "one-hertz.wav: sample rate 1 Hz" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout.count("\n") <= 1


_PEAK = textwrap.dedent(
    """
    import sys
    import numpy as np
    from speechkit import audio_io
    blocks = audio_io.read_audio_blocks(sys.argv[1], target_rate=16_000)
    print(sum(len(block) for block in blocks))
    status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
    print(int(status) * 1024)
    """
)


@pytest.mark.parametrize("rate", [383_999, 44_101, 4_001])
def test_awkward_ratios_resample_in_bounded_memory(tmp_path, rate):
    """Before, a rate with a large term (1,000,003 Hz) sized a 20-million-tap filter
    (1.3 GB); in range, the worst ratios now stay small."""
    wav = claimed_rate_wav(tmp_path / "awkward.wav", rate, samples=3 * rate)
    run = subprocess.run(
        [sys.executable, "-c", _PEAK, str(wav)], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    samples, peak = map(int, run.stdout.split())
    assert abs(samples - 48_000) <= 2
    assert peak < 400 << 20


def test_common_ratios_stay_exact():
    for rate in (8_000, 11_025, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 96_000, 384_000):
        assert dsp.resample_ratio(rate, 16_000) == Fraction(16_000, rate)
        assert dsp.resample_ratio(16_000, rate) == Fraction(rate, 16_000)


@given(
    st.integers(*audio_io.RATE_RANGE),
    st.sampled_from([8_000, 16_000, 22_050, 44_100, 48_000]),
)
def test_the_ratio_has_bounded_terms_and_is_close(from_rate, to_rate):
    ratio = dsp.resample_ratio(from_rate, to_rate)
    assert max(ratio.numerator, ratio.denominator) <= dsp.MAX_RATIO_TERM
    exact = Fraction(to_rate, from_rate)
    assert abs(ratio - exact) / exact < Fraction(1, dsp.MAX_RATIO_TERM)
    if max(exact.numerator, exact.denominator) <= dsp.MAX_RATIO_TERM:
        assert ratio == exact


def test_streamed_and_whole_file_agree_at_an_approximated_ratio(tmp_path):
    wav = claimed_rate_wav(tmp_path / "awkward.wav", 44_101, samples=100_000)
    whole, _ = audio_io.read_audio(wav, target_rate=16_000)
    blocks = audio_io.read_audio_blocks(wav, target_rate=16_000, block_frames=7_000)
    np.testing.assert_array_equal(np.concatenate(list(blocks)), whole)
