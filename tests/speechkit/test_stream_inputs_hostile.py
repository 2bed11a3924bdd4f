"""The streaming commands' smaller hostile cases (issue 59, item 7): entries of an input
folder that are not audio files are named, not skipped; names with control characters
cannot forge rows or reach the terminal in any output format; a silent file prints
nothing before its error; Ctrl-C exits 130 and a closed pipe 141, without a traceback."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

from speechkit import audio_io, errors, stream_inputs

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "cskws_jax" / "models" / "afkws-top20"
FORGING = "b\x1b[2Jc\nd.wav"  # clears a terminal; splits a row


def _noise(path: Path, seconds: float, level: float = 0.1) -> Path:
    samples = level * np.random.default_rng(0).standard_normal(round(16_000 * seconds))
    soundfile.write(path, samples.astype(np.float32), 16_000)
    return path


def _detect(*args, **kw) -> subprocess.Popen:
    """detect on `args` in a process of its own, printing every decided peak (noise gives
    some; the model's operating point would keep none)."""
    return subprocess.Popen(
        [sys.executable, "-m", "cskws_jax.detect", str(MODEL), "--all-peaks", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


@pytest.fixture()
def folder(tmp_path):
    """A folder with one audio file, a link to a subfolder, dangling and looping links
    and a FIFO, each named .wav."""
    root = tmp_path / "in"
    (root / "real").mkdir(parents=True)
    _noise(root / "real" / "a.wav", 1.0)
    (root / "linked").symlink_to("real")
    (root / "dangling.wav").symlink_to("nowhere.wav")
    (root / "loop1.wav").symlink_to("loop2.wav")
    (root / "loop2.wav").symlink_to("loop1.wav")
    os.mkfifo(root / "fifo.wav")
    return root


def test_a_folders_odd_entries_are_named_not_skipped(folder):
    found = list(stream_inputs.expand_paths([str(folder)]))
    named = {Path(str(item).split(":")[0]).name: item for item in found}
    assert set(named) == {"a.wav", "dangling.wav", "fifo.wav", "linked", "loop1.wav", "loop2.wav"}
    assert isinstance(named["linked"], stream_inputs.InputError)
    assert "a link to a folder, not searched" in str(named["linked"])
    with pytest.raises(audio_io.AudioFileError, match="not a regular file \\(a FIFO\\)"):
        audio_io.read_audio(named["fifo.wav"])
    for link in ("dangling.wav", "loop1.wav"):
        with pytest.raises(audio_io.AudioFileError, match="symbolic link that leads to no file"):
            audio_io.read_audio(named[link])


def test_detect_lists_every_odd_entry_and_escapes_names(folder):
    _noise(folder / FORGING, 1.0)
    soundfile.write(folder / "silent.wav", np.zeros(16_000, np.float32), 16_000)
    run = _detect(folder, "--keep-going", "--format", "tsv")
    out, err = (stream.decode() for stream in run.communicate(timeout=300))
    assert run.returncode == errors.EXIT_SOME_INPUTS, err
    listed = err.split("skipped 6 input(s):")[1]
    for name in ("dangling.wav", "fifo.wav", "linked", "loop1.wav", "loop2.wav", "silent.wav"):
        assert name in listed
    assert "\x1b" not in out + err
    rows = out.splitlines()
    assert rows[0].split("\t") == ["filename", "onset", "offset", "event_label"]
    assert all(len(row.split("\t")) == 4 for row in rows)
    assert any(row.startswith("b\\x1b[2Jc\\nd.wav", len(str(folder)) + 1) for row in rows)
    assert "silent.wav" not in out  # nothing printed before its error


@pytest.mark.parametrize("form", ["csv", "tsv", "audacity", "table", "jsonl"])
def test_no_format_lets_a_control_character_through(form):
    from cskws_jax import detect

    stream = io.StringIO()
    out = detect.output(form, stream)
    out.header()
    hit = detect.Detection("x\x1by\nz", label=0, start=0.0, end=0.5, score=0.9, emitted=0.6)
    out.write(FORGING, hit)
    text = stream.getvalue()
    assert "\x1b" not in text
    assert len(text.splitlines()) == (1 if form in ("audacity", "jsonl") else 2)


def test_a_silent_file_prints_nothing_before_its_error(tmp_path):
    silent = tmp_path / "silent.wav"
    soundfile.write(silent, np.full(32_000, 1e-6, np.float32), 16_000)
    run = _detect(silent, "--format", "jsonl")
    out, err = run.communicate(timeout=300)
    assert run.returncode == errors.EXIT_SOME_INPUTS
    assert out == b""
    assert b"silent (every sample below one 16-bit step)" in err


def test_ctrl_c_exits_130_without_a_traceback(tmp_path):
    long = _noise(tmp_path / "long.wav", 30.0)
    run = _detect(long, "--realtime", "--format", "jsonl")
    assert run.stdout.readline()  # streaming: the first detection is out
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode == errors.EXIT_INTERRUPTED, err.decode()
    assert b"Traceback" not in err


def test_a_closed_pipe_exits_141_without_a_traceback(tmp_path):
    long = _noise(tmp_path / "long.wav", 60.0)
    run = _detect(long, "--format", "jsonl")
    assert run.stdout.readline()
    run.stdout.close()  # `| head -1`
    started = time.monotonic()
    err = run.stderr.read()
    run.wait(timeout=300)
    assert run.returncode == errors.EXIT_BROKEN_PIPE, err.decode()
    assert b"Traceback" not in err
    assert time.monotonic() - started < 300
