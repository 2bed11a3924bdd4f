"""The streaming Python API (`cskws_jax.Detector`, `multiqt_jax.Tracker`, docs/api.md):
fed a recording in random chunks at its own rate, it returns what `stj-detect` and
`stj-track` print for the file, with both backends; bad arguments and chunks are named;
the example of docs/api.md runs."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile

import cskws_jax
import multiqt_jax
from cskws_jax import detect
from multiqt_jax import track
from speechkit import dsp, tts

ROOT = Path(__file__).resolve().parents[1]
FROZEN = ROOT / "tests" / "fixtures" / "frozen"
SPEECH = "there were about twenty people here. what is the address of the emergency?"
KEYWORDS = {"about", "twenty", "people"}  # what the shipped detector finds in SPEECH


@pytest.fixture(scope="module")
def calls(tmp_path_factory) -> dict[str, Path]:
    """SPEECH synthesised, as a 44.1 kHz stereo 16-bit WAV ("44k") and an 8 kHz mono one
    ("8k")."""
    folder = tmp_path_factory.mktemp("api")
    speech = tts.synthesize(SPEECH, tts.EspeakVoice(variant="m3")).waveform
    stereo = dsp.resample(speech, 16_000, 44_100)
    stereo = np.stack([stereo, 0.5 * stereo], axis=1)
    soundfile.write(folder / "call44.wav", stereo, 44_100, subtype="PCM_16")
    soundfile.write(folder / "call8.wav", dsp.resample(speech, 16_000, 8_000), 8_000)
    return {"44k": folder / "call44.wav", "8k": folder / "call8.wav"}


def _printed(main, argv: list) -> list[dict]:
    """The rows a command's `--format jsonl` prints, without their file."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*map(str, argv), "--format", "jsonl", "--quiet"]) == 0
    return [
        {k: v for k, v in json.loads(line).items() if k != "file"}
        for line in out.getvalue().splitlines()
    ]


def _rows(items) -> list[dict]:
    """Items as the jsonl format prints them (floats to 6 decimals)."""
    return [
        {k: round(v, 6) if isinstance(v, float) else v for k, v in dataclasses.asdict(item).items()}
        for item in items
    ]


def _streamed(api, path: Path, dtype: str, seed: int) -> list:
    """`api` (a Detector or Tracker) fed the file in random chunks of 0 to 3,000
    samples, read as `dtype`; what accept and close returned."""
    data, _ = soundfile.read(path, dtype=dtype)
    rng = np.random.default_rng(seed)
    found, begin = [], 0
    while begin < len(data):
        size = int(rng.integers(0, 3_000))
        found += api.accept(data[begin : begin + size])
        begin += size
    return found + api.close()


@pytest.mark.parametrize(
    ("backend", "options", "argv"),
    [
        ("jax", {}, []),
        ("onnx", {"all_peaks": True}, ["--all-peaks"]),
        ("jax", {"min_score": 0.3, "refractory_s": 1.0}, ["--min-score", 0.3, "--refractory-s", 1]),
        ("onnx", {"fa_per_hour": 25.0}, ["--fa-per-hour", 25]),
    ],
)
def test_the_detector_returns_what_stj_detect_prints(calls, backend, options, argv):
    wav = calls["44k"]
    printed = _printed(detect.main, ["--model", "afkws-top20", wav, "--backend", backend, *argv])
    detector = cskws_jax.Detector("afkws-top20", sample_rate=44_100, backend=backend, **options)
    found = _streamed(detector, wav, "int16", seed=len(argv))
    assert _rows(found) == printed
    every_peak = options.get("all_peaks", False)
    assert {hit.keyword for hit in found} >= (KEYWORDS if every_peak else {"twenty"})


@pytest.mark.parametrize(
    ("model", "backend", "options", "argv"),
    [
        ("multiqt-questions-audio", "jax", {}, []),
        ("multiqt-questions-audio", "onnx", {"smoothing_frames": 1}, ["--smoothing-frames", 1]),
        ("multiqt-questions", "jax", {"text": "none"}, ["--no-text"]),
        ("multiqt-questions", "onnx", {"text": "none"}, ["--no-text"]),
    ],
)
def test_the_tracker_returns_what_stj_track_prints(calls, model, backend, options, argv):
    wav = calls["8k"]
    printed = _printed(track.main, ["--model", model, wav, "--backend", backend, *argv])
    tracker = multiqt_jax.Tracker(model, sample_rate=8_000, backend=backend, **options)
    found = _streamed(tracker, wav, "float32", seed=len(argv))
    assert _rows(found) == printed
    assert found  # not vacuous


def test_close_and_reset_start_a_new_stream(calls):
    detector = cskws_jax.Detector("afkws-top20", sample_rate=44_100, backend="onnx")
    first = _streamed(detector, calls["44k"], "float32", seed=0)
    again = _streamed(detector, calls["44k"], "float64", seed=1)  # after close
    data, _ = soundfile.read(calls["44k"], dtype="float32")
    detector.accept(data[:30_000])
    detector.reset()
    assert _rows(again) == _rows(first)
    assert _rows(_streamed(detector, calls["44k"], "float32", seed=2)) == _rows(first)


def test_a_shipped_name_runs_its_bundle_with_jax_and_its_export_with_onnx():
    bundle = cskws_jax.models.CATALOGUE.path("afkws-top20")
    assert cskws_jax.Detector("afkws-top20").model == bundle
    assert cskws_jax.Detector("afkws-top20", backend="onnx").model == str(Path(bundle) / "export")
    export = str(FROZEN / "cskws-export")
    assert cskws_jax.Detector(FROZEN / "cskws-export", backend="onnx").model == export


def test_latency_adds_the_resamplers_hold_back_and_the_smoothing_lag():
    at_16k = cskws_jax.Detector("afkws-top20", backend="onnx")
    at_44k = cskws_jax.Detector("afkws-top20", sample_rate=44_100, backend="onnx")
    assert at_16k.block_s == pytest.approx(0.2)
    assert at_44k.latency_s - at_16k.latency_s == pytest.approx(881 / 44_100)
    assert at_16k.latency_s >= at_16k.block_s
    raw = multiqt_jax.Tracker(FROZEN / "multiqt-export", smoothing_frames=1, text="none")
    smoothed = multiqt_jax.Tracker(FROZEN / "multiqt-export", smoothing_frames=4, text="none")
    assert smoothed.latency_s - raw.latency_s == pytest.approx(3 * 0.04)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"model": "nope"}, ValueError, "model: expected a shipped AF-KWS model (afkws-top20)"),
        (
            {"model": "/no/such/folder"},
            ValueError,
            "model: expected a shipped AF-KWS model (afkws-top20) or a bundle or export folder, "
            "got '/no/such/folder' (not a folder)",
        ),
        ({"backend": "torch"}, ValueError, "backend: expected one of jax, onnx, got 'torch'"),
        ({"sample_rate": 1_000}, ValueError, "sample_rate: expected a whole number of Hz"),
        ({"fa_per_hour": 3.0}, ValueError, "fa_per_hour: "),
        ({"fa_per_hour": 0}, ValueError, "fa_per_hour: expected > 0"),
        ({"min_score": 1.5}, ValueError, "min_score: expected"),
        ({"refractory_s": -1}, ValueError, "refractory_s: expected"),
        ({"block_ms": "200"}, TypeError, "block_ms: expected a number"),
        ({"backend": "onnx", "min_score": 0.3}, ValueError, "min_score: 0.3; the ONNX detector"),
        ({"backend": "onnx", "block_ms": 400}, ValueError, "block_ms: 400 ms; the step exported"),
    ],
)
def test_bad_detector_arguments_are_named(options, error, message):
    options = {"model": "afkws-top20", **options}
    with pytest.raises(error, match=f"^{re.escape(message)}"):
        cskws_jax.Detector(options.pop("model"), **options)


def test_a_bundle_with_onnx_is_named_as_the_argument():
    with pytest.raises(ValueError, match=r"^backend onnx: .*cskws-bundle is a bundle; export it"):
        cskws_jax.Detector(FROZEN / "cskws-bundle", backend="onnx")


def test_bad_chunks_are_named_and_the_stream_goes_on():
    detector = cskws_jax.Detector("afkws-top20", backend="onnx")
    for chunk, message in [
        (np.zeros((3, 2, 2)), r"chunk: expected samples \[n\] \(mono\) or \[n, channels\]"),
        (np.array([0.0, np.inf]), "chunk: contains NaN or infinite samples"),
        (np.zeros((2, 16_000)), r"chunk: expected samples \[n, channels\] with 1 to 64"),
    ]:
        with pytest.raises(ValueError, match=f"^{message}"):
            detector.accept(chunk)
    assert detector.accept(np.zeros(100, np.float32)) == []


def test_a_text_model_needs_text_none():
    with pytest.raises(ValueError, match="^text: the model reads text .* pass text='none'"):
        multiqt_jax.Tracker("multiqt-questions")
    with pytest.raises(ValueError, match="^text: expected None or 'none'.*--asr"):
        multiqt_jax.Tracker("multiqt-questions", text="pocketsphinx")
    with pytest.raises(ValueError, match="^smoothing_frames: expected an int >= 1"):
        multiqt_jax.Tracker("multiqt-questions-audio", smoothing_frames=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the shipped model learnt to go without its text
        multiqt_jax.Tracker("multiqt-questions", text="none", backend="onnx")


def _example() -> str:
    """The first python block under docs/api.md's "## Example"."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text[text.index("## Example") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_docs_example_runs(calls, tmp_path, monkeypatch, capsys):
    data, _ = soundfile.read(calls["44k"])
    soundfile.write(tmp_path / "call.wav", data, 44_100, subtype="PCM_16")
    monkeypatch.chdir(tmp_path)
    exec(compile(_example(), "docs/api.md", "exec"), {"__name__": "example"})
    lines = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in lines} >= {"twenty"}  # at its middle operating point
    questions = set(multiqt_jax.Tracker("multiqt-questions-audio", backend="onnx").labels[1:])
    assert questions & {line.split()[0] for line in lines}


def test_the_packages_name_what_they_lack():
    with pytest.raises(AttributeError, match="module 'cskws_jax' has no attribute 'Tracker'"):
        cskws_jax.Tracker  # noqa: B018
    with pytest.raises(AttributeError, match="module 'multiqt_jax' has no attribute 'Detector'"):
        multiqt_jax.Detector  # noqa: B018
