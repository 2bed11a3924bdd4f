"""A new user's rough edges with the streaming commands (issue 60, item 5): an audio
file where MODEL goes, a file's header on standard input, no audio device, usage lines
in the name the user typed, stj-evaluate's --help in any install, and progress in
seconds of audio as each file is read."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import soundfile

from cskws_jax import detect
from experiments import commands
from multiqt_jax import track
from speechkit import frontend, progress, stream_cli, stream_inputs

ROOT = Path(__file__).resolve().parents[2]


def _wav(path: Path, seconds: float) -> Path:
    samples = 0.1 * np.random.default_rng(0).standard_normal(round(16_000 * seconds))
    soundfile.write(path, samples.astype(np.float32), 16_000)
    return path


@pytest.mark.parametrize("main", [detect.main, track.main])
def test_an_audio_file_where_model_goes_is_named(tmp_path, capsys, main):
    wav = _wav(tmp_path / "call.wav", 0.5)
    assert main([str(wav)]) == 2
    err = capsys.readouterr().err
    assert f"{wav}: " in err and "where MODEL goes" in err and "--model NAME (" in err


def test_a_file_header_on_standard_input_is_named():
    buffer = io.BytesIO()
    soundfile.write(buffer, np.zeros(1600, np.float32), 16_000, format="WAV")
    with pytest.raises(stream_inputs.InputError, match="starts with a WAV file header"):
        list(stream_inputs.stdin_chunks(io.BytesIO(buffer.getvalue()), 400))
    raw = (np.arange(800, dtype="<i2") * 3).tobytes()
    chunks = list(stream_inputs.stdin_chunks(io.BytesIO(raw), 400))
    assert [len(chunk) for chunk in chunks] == [400, 400]


def test_no_audio_device_is_said(monkeypatch, capsys):
    fake = types.SimpleNamespace(query_devices=lambda: [])
    monkeypatch.setattr(stream_inputs, "_sounddevice", lambda: fake)
    assert stream_cli.listed_devices(["--list-devices"]) == 2
    assert "PortAudio finds no audio device" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv0, expected",
    [("/venv/bin/stj-detect", "stj-detect"), ("-m", "python -m cskws_jax.detect")],
)
def test_usage_lines_name_the_command_as_typed(monkeypatch, argv0, expected):
    monkeypatch.setattr(sys, "argv", [argv0])
    text = detect.parser().format_help()
    assert text.startswith(f"usage: {expected} ")
    assert f"Example: {expected} --model afkws-top20" in text


@pytest.mark.parametrize("parser", [detect.parser, track.parser], ids=["detect", "track"])
def test_detect_and_track_help_fits_a_screen(monkeypatch, parser):
    """At 80 columns, the options in a line or two each, the details in docs/usage.md."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(sys, "argv", ["stj-x"])
    text = parser().format_help()
    assert len(text.splitlines()) <= 48 and "docs/usage.md" in text


def test_evaluate_help_needs_no_training_stack_and_fits_a_screen():
    blocked = "import sys\nfor name in ('absl', 'tensorflow_datasets', 'flax', 'grain'):\n"
    blocked += "    sys.modules[name] = None\n"
    script = blocked + (
        "sys.argv = ['stj-evaluate', '--help']\n"
        "from experiments import commands\n"
        "sys.exit(commands.evaluate())\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: stj-evaluate --bundle B --dataset D --workdir W")
    assert len(run.stdout.splitlines()) <= 24


def test_evaluate_help_names_every_option():
    from experiments.scoring import bundles

    for field in dataclasses.fields(bundles.Settings):
        assert f"--{field.name.replace('_', '-')}" in commands.EVALUATE_USAGE, field.name


class _Bar:
    """A stand-in for progress.bar that records what the bar was told."""

    def __init__(self, total, *_, **__):
        self.total, self.n, self.updates, self.descriptions = total, 0.0, [], []

    def update(self, amount):
        self.n += amount
        self.updates.append(amount)

    def set_description_str(self, text):
        self.descriptions.append(text)

    def write(self, *_, **__):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *_):
        pass


def test_progress_counts_seconds_of_audio_as_each_file_is_read(tmp_path, monkeypatch):
    bars = []
    monkeypatch.setattr(progress, "bar", lambda *a, **k: bars.append(_Bar(*a, **k)) or bars[-1])
    inputs = [str(_wav(tmp_path / "a.wav", 1.0)), str(_wav(tmp_path / "b.wav", 2.0))]
    features = frontend.FeatureConfig()
    during = []

    def run(name):
        chunks = stream_inputs.file_checked_chunks(name, features, 1600, realtime=False)
        for _ in chunks:
            during.append(bars[0].n)
        return 0, chunks.samples / features.sample_rate

    args = types.SimpleNamespace(quiet=False, keep_going=False)
    assert stream_cli.run_inputs(inputs, run, args, stream_inputs.InputError, "x") == []
    bar = bars[0]
    assert bar.total == 3.0 and bar.n == pytest.approx(3.0)
    assert during == pytest.approx([0.1 * i for i in range(1, 31)])  # chunk by chunk, 0.1 s
    assert bar.descriptions == [f"[1/2] {inputs[0][-40:]}", f"[2/2] {inputs[1][-40:]}"]


def test_progress_total_is_unknown_for_standard_input():
    assert stream_cli.audio_seconds(stream_inputs.STDIN) is None
    assert stream_cli.audio_seconds(stream_inputs.MIC) is None
