"""cskws_jax.bundle and `python -m cskws_jax.detect`: a tiny untrained detector saved,
loaded and run on random audio; its printed detections are those of
`StreamDetector.detect` on the same features, and those of its export folder
(`python -m cskws_jax.export`) are the bundle's."""

from __future__ import annotations

import dataclasses
import io
import json
import sys
import time
from pathlib import Path

import flatbuffers  # noqa: F401  # jax.export serialization: a dependency, never skipped
import jax
import numpy as np
import pytest
import soundfile

from cskws_jax import bundle, detect, export, train
from cskws_jax.datasets.features import FEATURES
from cskws_jax.streaming import StreamDetector
from speechkit import frontend, stream_inputs
from speechkit.bundle import BundleError

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = ("alpha", "beta", "gamma")
DECODING = train.PeakDecodingConfig(min_score=0.3)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tiny_afkws):
    """(bundle folder, net, params, a 2 s random stereo wav at 22.05 kHz)."""
    folder = tmp_path_factory.mktemp("detect")
    net, params = tiny_afkws
    params = jax.tree_util.tree_map(lambda a: 1.5 * a, params)  # livelier heatmaps
    bundle.save(folder / "bundle", net, params, KEYWORDS, DECODING, "random")
    wav = folder / "audio" / "noise.wav"
    wav.parent.mkdir()
    noise = 0.1 * np.random.default_rng(0).normal(size=(2 * 22050, 2))
    soundfile.write(wav, noise, 22050)
    return folder / "bundle", net, params, wav


def _rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _key(row: dict):
    return row["label"], round(row["start"], 4)


def test_bundle_round_trip_gives_the_same_outputs(saved):
    folder, net, params, _ = saved
    loaded_net, loaded_params, info = bundle.load(folder)
    features = np.random.default_rng(1).normal(size=(1, 67, 64)).astype(np.float32)
    expected, _ = net.apply(params, {"audio": features})
    found, _ = loaded_net.apply(loaded_params, {"audio": features})
    for name in expected:
        np.testing.assert_array_equal(np.asarray(found[name]), np.asarray(expected[name]))
    assert (info.labels, info.decoding, info.features) == (KEYWORDS, DECODING, FEATURES)
    assert info.model_config == net.config


def test_save_refuses_a_wrong_keyword_count(saved, tmp_path):
    _, net, params, _ = saved
    with pytest.raises(BundleError, match="labels: 2 keywords, model_config.num_keywords is 3"):
        bundle.save(tmp_path / "b", net, params, KEYWORDS[:2])


def test_cli_prints_the_detections_of_the_stream_detector(saved, run_module):
    folder, net, params, wav = saved
    done = run_module("cskws_jax.detect", folder, wav.parent, "--format=jsonl")
    printed = _rows(done.stdout)
    assert all(list(row) == list(detect.FIELDS) for row in printed)
    assert {row["file"] for row in printed} == {str(wav)}
    samples = stream_inputs.read_samples(str(wav), FEATURES)  # mono, resampled to 16 kHz
    features = frontend.waveform_log_mel(samples, FEATURES)[None]
    detector = StreamDetector(net, params, block_outputs=5, min_score=DECODING.min_score)
    found, emitted = detector.detect(features, max_detections=1000)
    valid = np.asarray(found["valid"][0])
    expected = [
        {
            "keyword": KEYWORDS[int(label)],
            "label": int(label),
            "start": float(start),
            "end": float(end),
            "score": float(score),
            "emitted": float(when),
        }
        for label, start, end, score, when in zip(
            *(np.asarray(found[k][0])[valid] for k in ("label", "start", "end", "score")),
            np.asarray(emitted[0])[valid],
            strict=True,
        )
    ]
    assert 10 < len(expected) < 1000  # not vacuous, nothing cut
    assert len(printed) == len(expected)
    for row, want in zip(sorted(printed, key=_key), sorted(expected, key=_key), strict=True):
        assert row["keyword"] == want["keyword"]
        for name in ("start", "end", "score", "emitted"):
            assert row[name] == pytest.approx(want[name], abs=1e-4), name
    # Each is printed as soon as it is decided: emission times never go back.
    assert [row["emitted"] for row in printed] == sorted(row["emitted"] for row in printed)


def test_stdin_reads_raw_pcm_like_a_file(saved, tmp_path, capsys, monkeypatch):
    folder, *_ = saved
    pcm = (np.random.default_rng(3).normal(size=16000) * 3000).astype("<i2")
    wav = tmp_path / "same.wav"
    soundfile.write(wav, pcm, 16000, subtype="PCM_16")
    assert detect.main([str(folder), str(wav), "--format=jsonl"]) == 0
    from_file = _rows(capsys.readouterr().out)
    pipe = io.BufferedReader(io.BytesIO(pcm.tobytes()), buffer_size=999)  # short reads
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(pipe))
    assert detect.main([str(folder), "-", "--format", "jsonl"]) == 0
    from_stdin = _rows(capsys.readouterr().out)
    assert from_file and len(from_stdin) == len(from_file)
    for a, b in zip(from_stdin, from_file, strict=True):
        assert a["file"] == "-" and a["keyword"] == b["keyword"]
        assert a["start"] == pytest.approx(b["start"], abs=1e-5)
        assert a["score"] == pytest.approx(b["score"], abs=1e-5)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    assert detect.main([str(folder), "-"]) == 1
    assert "-: holds no samples" in capsys.readouterr().err


def _good(path: Path) -> None:
    noise = np.random.default_rng(4).normal(size=(8000, 3)) * 0.1
    soundfile.write(path, noise, 8000)  # 3 channels at 8 kHz: fine


def test_bad_files_stop_the_run_unless_keep_going(saved, tmp_path, capsys, bad_audio_folder):
    folder, *_ = saved
    bad = bad_audio_folder(tmp_path / "in", _good)
    assert detect.main([str(folder), str(tmp_path / "in"), "--format=csv"]) == 1
    out, err = capsys.readouterr()
    assert "b_empty.wav: is empty" in err and "c_silent" not in err and "skipped" not in err
    assert out.splitlines()[0] == ",".join(detect.FIELDS) and "a_good.flac" in out
    code = detect.main([str(folder), str(tmp_path / "in"), "--keep-going", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1 and "skipped 4 input(s)" in err
    for name, reason in bad.items():
        assert any(name in line and reason in line for line in err.splitlines()), name
    assert "a_good.flac" in out and "[1/" not in err


def test_a_bundle_of_another_task_or_a_missing_one_is_an_error(saved, tmp_path, capsys):
    folder, _, _, wav = saved
    other = tmp_path / "other"
    other.mkdir()
    manifest = json.loads((folder / "bundle.json").read_text())
    (other / "bundle.json").write_text(json.dumps({**manifest, "task": "multiqt"}))
    (other / "params.npz").write_bytes((folder / "params.npz").read_bytes())
    assert detect.main([str(other), str(wav)]) == 2
    assert "bundle.json: task: expected 'cskws', got 'multiqt'" in capsys.readouterr().err
    assert detect.main([str(tmp_path / "none"), str(wav)]) == 2
    assert "no such bundle folder" in capsys.readouterr().err


def test_realtime_paces_and_refractory_thins(saved, tmp_path, capsys):
    folder, *_ = saved
    wav = tmp_path / "short.wav"
    soundfile.write(wav, np.random.default_rng(5).normal(size=12000) * 0.1, 16000)
    args = [str(folder), str(wav), "--format=jsonl", "--block-ms=120"]
    started = time.perf_counter()
    assert detect.main([*args, "--realtime", "--refractory-s=10"]) == 0
    assert time.perf_counter() - started >= 0.75  # 0.75 s of audio, fed as it "arrives"
    thinned = _rows(capsys.readouterr().out)
    labels = [row["label"] for row in thinned]
    assert 0 < len(labels) == len(set(labels))  # a keyword once per 10 s at most
    assert detect.main([*args[:2], "--block-ms=50"]) == 2
    assert "not a whole number" in capsys.readouterr().err


def _between(scores: list[float]) -> float:
    """A threshold between two of the printed scores near their median (at least 1e-5
    from both, so that the 6-decimal rounding of the output cannot decide it)."""
    distinct = sorted(set(scores))
    if len(distinct) < 2:
        return distinct[0] + 1e-3 if distinct else 0.0  # drop the only one, if any
    pairs = zip(distinct, distinct[1:], strict=False)
    gaps = [
        (abs(i - len(distinct) // 2), (a + b) / 2) for i, (a, b) in enumerate(pairs) if b - a > 2e-5
    ]
    return min(gaps)[1]


def _detections_and_thresholds(capsys, folder, wav) -> tuple[list[dict], tuple[float, ...]]:
    """(every detection printed for `wav`, a threshold per keyword between its scores)."""
    assert detect.main([str(folder), str(wav), "--format=jsonl"]) == 0
    everything = _rows(capsys.readouterr().out)
    thresholds = tuple(
        _between([row["score"] for row in everything if row["label"] == label])
        for label in range(len(KEYWORDS))
    )
    return everything, thresholds


def test_fa_per_hour_keeps_the_detections_of_the_operating_point(saved, tmp_path, capsys):
    folder, net, params, wav = saved
    everything, thresholds = _detections_and_thresholds(capsys, folder, wav)
    points = (
        train.OperatingPoint(1.0, (2.0,) * len(KEYWORDS), "made up", 0.5),
        train.OperatingPoint(5.0, thresholds, "made up", 0.5),
    )
    decoding = dataclasses.replace(DECODING, operating_points=points)
    bundle.save(tmp_path / "points", net, params, KEYWORDS, decoding, "random")
    args = [str(tmp_path / "points"), str(wav), "--format=jsonl"]
    assert detect.main([*args, "--fa-per-hour", "5"]) == 0
    kept = _rows(capsys.readouterr().out)
    expected = [row for row in everything if row["score"] >= thresholds[row["label"]]]
    assert 0 < len(kept) < len(everything)  # some cut, some kept
    assert kept == expected
    assert detect.main([*args, "--fa-per-hour=1"]) == 0  # thresholds above any score
    assert _rows(capsys.readouterr().out) == []
    assert detect.main([*args, "--fa-per-hour=3"]) == 2
    err = capsys.readouterr().err
    assert "--fa-per-hour:" in err and "no operating point for 3 false alarms per hour" in err
    assert "it stores 1, 5" in err
    assert detect.main([str(folder), str(wav), "--fa-per-hour=5"]) == 2
    assert "it stores none" in capsys.readouterr().err


def _same_detections(got: list[dict], want: list[dict]) -> None:
    """The same detections in the same order, times and scores within float noise (the
    exported step and the live model agree to about 1e-6)."""
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert (a["file"], a["keyword"], a["label"]) == (b["file"], b["keyword"], b["label"])
        for name in ("start", "end", "score", "emitted"):
            assert a[name] == pytest.approx(b[name], abs=1e-5), name


def test_an_export_folder_detects_like_its_bundle(saved, tmp_path, capsys):
    folder, net, params, wav = saved
    everything, thresholds = _detections_and_thresholds(capsys, folder, wav)
    point = train.OperatingPoint(5.0, thresholds, "made up", 0.5)
    decoding = dataclasses.replace(DECODING, operating_points=(point,))
    bundle.save(tmp_path / "points", net, params, KEYWORDS, decoding, "random")
    out = tmp_path / "exported"
    assert export.main([str(tmp_path / "points"), str(out), "--block-outputs=5"]) == 0
    capsys.readouterr()
    modules = {"forward.stablehlo", "step.stablehlo", "frontend.onnx", "forward.onnx"}
    assert {p.name for p in out.iterdir()} == {
        "export.json",
        *modules,
        "step.onnx",
        "detector.onnx",
        "stream.onnx",
    }

    every = ["--format=jsonl", "--all-peaks"]
    assert detect.main([str(out), str(wav), *every]) == 0  # 200 ms blocks, as exported
    from_export = _rows(capsys.readouterr().out)
    assert len(everything) > 10  # not vacuous
    _same_detections(from_export, everything)

    # The operating points travel in export.json.
    assert (
        detect.main([str(tmp_path / "points"), str(wav), "--format=jsonl", "--fa-per-hour=5"]) == 0
    )
    kept = _rows(capsys.readouterr().out)
    assert detect.main([str(out), str(wav), "--format=jsonl", "--fa-per-hour=5"]) == 0
    kept_from_export = _rows(capsys.readouterr().out)
    assert 0 < len(kept) < len(everything)
    _same_detections(kept_from_export, kept)
    assert detect.main([str(out), str(wav), "--fa-per-hour=3"]) == 2
    assert f"{out} has no operating point for 3" in capsys.readouterr().err

    # onnxruntime runs the ONNX front end and detector: the same printed table.
    assert detect.main([str(out), str(wav)]) == 0
    table = capsys.readouterr().out
    assert detect.main([str(out), str(wav), "--backend=onnx"]) == 0
    assert capsys.readouterr().out == table
    assert detect.main([str(out), str(wav), *every, "--backend=onnx"]) == 0
    _same_detections(_rows(capsys.readouterr().out), everything)
    assert detect.main([str(out), str(wav), "--backend=onnx", "--min-score=0.5"]) == 2
    assert "decides peaks from 0.3 (fixed when exporting" in capsys.readouterr().err
    assert detect.main([str(tmp_path / "points"), str(wav), "--backend=onnx"]) == 2
    assert "is a bundle; export it first" in capsys.readouterr().err

    # The exported block is fixed: --block-ms may only repeat it.
    assert detect.main([str(out), str(wav), *every, "--block-ms=200"]) == 0
    _same_detections(_rows(capsys.readouterr().out), everything)
    assert detect.main([str(out), str(wav), "--block-ms=120"]) == 2
    err = capsys.readouterr().err
    assert f"--block-ms: 120 ms; the step exported in {out} takes blocks of 200 ms" in err
    assert "export again with --block-outputs 3" in err


def test_help_explains_the_inputs():
    text = detect.parser().format_help()
    text = " ".join(text.split())
    for phrase in ("--keep-going", "--realtime", "raw 16-bit", "jsonl", "Exit status"):
        assert phrase in text
    assert "--fa-per-hour" in text and "false alarms per hour" in text and "--all-peaks" in text
    assert "--model afkws-top20: about, people" in text  # the shipped keywords and budgets
    assert "operating points (FA/h): 1, 5, 25" in text


class _FakeMicrophone:
    """sounddevice's InputStream over a recorded waveform: `read(n)` returns the next n
    samples as a [n, 1] block; with the last one the user presses Ctrl-C (a SIGINT
    while that block is processed: the stream ends after it)."""

    opened: list = []
    samples = np.zeros(0, np.float32)

    def __init__(self, samplerate, channels, dtype, blocksize, device):
        type(self).opened.append((samplerate, channels, dtype, blocksize, device))
        self.position = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def read(self, frames):
        import signal

        block = self.samples[self.position : self.position + frames]
        self.position += frames
        if self.position >= len(self.samples):
            signal.raise_signal(signal.SIGINT)
        return block[:, None], False


def test_a_microphone_stream_prints_what_the_same_file_prints(saved, tmp_path, capsys, monkeypatch):
    import types

    folder, _, _, _ = saved
    samples = (0.1 * np.random.default_rng(5).normal(size=16000 * 2)).astype(np.float32)
    soundfile.write(tmp_path / "same.wav", samples, 16000, subtype="FLOAT")
    assert detect.main([str(folder), str(tmp_path / "same.wav"), "--format=jsonl"]) == 0
    from_file = _rows(capsys.readouterr().out)
    fake = types.SimpleNamespace(
        InputStream=_FakeMicrophone,
        PortAudioError=RuntimeError,
        query_devices=lambda: "  0 Fake microphone, ALSA (1 in, 0 out)",
    )
    monkeypatch.setitem(sys.modules, "sounddevice", fake)
    _FakeMicrophone.samples = samples
    assert detect.main([str(folder), "--mic", "2", "--format=jsonl"]) == 0
    from_mic = _rows(capsys.readouterr().out)
    assert _FakeMicrophone.opened == [(16000, 1, "float32", 3200, 2)]  # 200 ms blocks
    assert len(from_file) > 3
    for row in from_mic:
        assert row.pop("file") == "mic"
    assert from_mic == [{k: v for k, v in row.items() if k != "file"} for row in from_file]
    assert detect.main([str(folder), "--list-devices"]) == 0
    assert "Fake microphone" in capsys.readouterr().out
    assert detect.main([str(folder), str(tmp_path / "same.wav"), "--mic"]) == 2
    assert "--mic: records from a device; do not name audio files too" in capsys.readouterr().err
    assert detect.main([str(folder)]) == 2
    assert "no audio: name files, folders or - (standard input), or use --mic" in (
        capsys.readouterr().err
    )


def test_without_portaudio_the_microphone_says_what_to_install(saved, capsys, monkeypatch):
    import builtins

    folder, _, _, _ = saved
    monkeypatch.setitem(sys.modules, "sounddevice", None)  # import sounddevice fails
    assert detect.main([str(folder), "--mic"]) == 2
    assert "--mic: needs the sounddevice package" in capsys.readouterr().err
    monkeypatch.delitem(sys.modules, "sounddevice")
    real_import = builtins.__import__

    def no_portaudio(name, *args, **kwargs):
        if name == "sounddevice":
            raise OSError("PortAudio library not found")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_portaudio)
    assert detect.main([str(folder), "--list-devices"]) == 2
    assert "apt install libportaudio2" in capsys.readouterr().err


def test_a_folder_of_mp3_and_opus_files_is_read(saved, tmp_path, capsys):
    folder, _, _, _ = saved
    samples = (0.1 * np.random.default_rng(7).normal(size=16000)).astype(np.float32)
    (tmp_path / "in").mkdir()
    soundfile.write(tmp_path / "in" / "a.mp3", samples, 16000, format="MP3")
    soundfile.write(tmp_path / "in" / "b.opus", samples, 16000, format="OGG", subtype="OPUS")
    assert detect.main([str(folder), str(tmp_path / "in"), "--format=jsonl"]) == 0
    progress = capsys.readouterr().err  # a line per input read to its end
    assert "[1/2]" in progress and "a.mp3" in progress and "in 1.0 s of audio" in progress
    assert "[2/2]" in progress and "b.opus" in progress
    assert sorted(stream_inputs.expand_paths([str(tmp_path / "in")])) == [
        str(tmp_path / "in" / "a.mp3"),
        str(tmp_path / "in" / "b.opus"),
    ]


def test_event_lists_and_audacity_labels_hold_the_detections(saved, capsys):
    folder, _, _, wav = saved
    assert detect.main([str(folder), str(wav), "--format=jsonl"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert detect.main([str(folder), str(wav), "--format=tsv"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == ["filename", "onset", "offset", "event_label"]
    assert lines[1:] == [
        [str(wav), f"{r['start']:.6f}", f"{r['end']:.6f}", r["keyword"]] for r in rows
    ]
    assert detect.main([str(folder), str(wav), "--format=audacity"]) == 0
    labels = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert labels == [[f"{r['start']:.6f}", f"{r['end']:.6f}", r["keyword"]] for r in rows]
    assert len(rows) > 3
