"""`python -m multiqt_jax.track`: a tiny untrained MultiQT bundle run on generated calls;
the printed segments are the runs of the whole-call forward's labels, for every block
size, smoothing, text source and input kind; bad inputs name the file."""

from __future__ import annotations

import io
import json
import math
import shutil
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
import soundfile

from multiqt_jax import bundle, decode, input_pipeline, labels, model, track
from multiqt_jax.datasets.features import FEATURES, word_fields
from speechkit import asr, frontend
from speechkit.stream_inputs import read_samples

ROOT = Path(__file__).resolve().parents[2]
CLASSES = labels.classes("questions")
WORDS = [
    {"word": "hello", "start": 0.2, "end": 0.6, "emitted": 0.9},
    {"word": "what", "start": 1.0, "end": 1.3},
    {"word": "address", "start": 1.4, "end": 2.0, "emitted": 2.5},
]
TIMED = [asr.TimedWord(w["word"], w["start"], w["end"], w.get("emitted", w["end"])) for w in WORDS]
HOP_S = 0.04  # the tiny models' output hop


def _save(folder: Path, config: model.MultiQTConfig) -> tuple[model.MultiQT, dict]:
    """A MultiQT of `config`, params scaled up for livelier labels, saved."""
    net = model.MultiQT(config)
    modalities = config.modalities
    inputs = {"audio": np.zeros((1, 40, 40), np.float32), "text": np.zeros((1, 20, 29))}
    params = jax.jit(net.init)(jax.random.key(0), {m: inputs[m] for m in modalities})
    params = jax.tree_util.tree_map(lambda a: 3 * a, params)
    bundle.save(folder, net, params, CLASSES, bundle.TrackingConfig(causal_text=True), "random")
    return net, params


def _call(path: Path, seconds: float, rate: int = 22050, seed: int = 0) -> Path:
    """Amplitude-modulated stereo noise at `rate` (mixed and resampled by the tracker)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    noise = 0.1 * np.random.default_rng(seed).normal(size=t.size) * (1 + np.sin(8 * t))
    soundfile.write(path, np.stack([noise, 0.5 * noise], axis=1), rate)
    return path


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tiny_multiqt_config):
    """{"text": (folder, net, params), "audio": ..., "call": a 3 s call with its words
    JSON beside it}."""
    root = tmp_path_factory.mktemp("track")
    call = _call(root / "calls" / "call.wav", 3.0)
    (root / "calls" / "call.json").write_text(json.dumps({"segments": [], "asr": WORDS}))
    return {
        "text": (root / "text-bundle", *_save(root / "text-bundle", tiny_multiqt_config())),
        "audio": (
            root / "audio-bundle",
            *_save(root / "audio-bundle", tiny_multiqt_config(modalities=("audio",))),
        ),
        "call": call,
    }


def _text(features, words, causal: bool = True) -> np.ndarray:
    """The text input the training pipeline makes of a call's words."""
    record = {
        "audio": features,
        "labels": np.zeros(len(features), np.int32),
        **word_fields(words),
        "text_posteriors": np.zeros((0, asr.NUM_SYMBOLS), np.float32),
    }
    return input_pipeline.to_example(record, causal)["text"]


def _expected(net, params, call, text=None, present=None, smoothing=1, block_ms=200):
    """The segments (label, start, end, emitted) of the whole-call forward's labels:
    runs of one non-background class, `smoothing` - 1 frames of lag taken off."""
    features = frontend.waveform_log_mel(read_samples(str(call), FEATURES), FEATURES)
    inputs = {"audio": features[None]}
    if text is not None:
        inputs["text"] = text[None]
    outputs, mask = net.apply(params, inputs, None, present)
    logits, mask = np.asarray(outputs["logits"]), np.asarray(mask)
    found = np.argmax(logits, axis=-1)
    if smoothing > 1:
        found = decode.smooth(logits, mask, decode.SmoothingConfig(min_frames=smoothing))
    found = np.asarray(found[0])[mask[0]]
    duration, shift = len(features) * FEATURES.hop_s, smoothing - 1
    block_outputs = round(block_ms / 1000 / HOP_S)
    segments, begin = [], 0
    for frame in range(1, len(found) + 1):
        if frame < len(found) and found[frame] == found[begin]:
            continue
        if found[begin] != 0:
            closed = frame < len(found)
            end = (frame - shift) * HOP_S if closed else duration
            block_end = (frame // block_outputs + 1) * block_outputs * HOP_S
            emitted = min(block_end, duration) if closed else duration
            start = max(0, begin - shift) * HOP_S
            segments.append((CLASSES[found[begin]], start, end, emitted))
        begin = frame
    return segments


def _run(capsys, *args) -> tuple[int, list[dict], str]:
    code = track.main([*map(str, args), "--format=jsonl"])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def _assert_same(rows, expected, emitted: bool = True):
    assert len(rows) == len(expected), (rows, expected)
    for row, (label, start, end, when) in zip(rows, expected, strict=True):
        assert row["label"] == label and row["class_id"] == CLASSES.index(label)
        assert (row["start"], row["end"]) == (pytest.approx(start), pytest.approx(end))
        if emitted:
            assert row["emitted"] == pytest.approx(when)


def test_segments_are_the_whole_call_forwards(saved, capsys):
    folder, net, params = saved["text"]
    features = frontend.waveform_log_mel(read_samples(str(saved["call"]), FEATURES), FEATURES)
    expected = _expected(net, params, saved["call"], _text(features, TIMED))
    assert len(expected) >= 5 and len({label for label, *_ in expected}) >= 2  # not vacuous
    code, rows, _ = _run(capsys, folder, saved["call"])  # words from call.json beside it
    assert code == 0
    _assert_same(rows, expected)
    assert all(list(row) == list(track.FIELDS) for row in rows)
    assert [row["emitted"] for row in rows] == sorted(row["emitted"] for row in rows)
    assert all(row["emitted"] >= row["end"] for row in rows)


@pytest.mark.parametrize(("block_ms", "smoothing"), [(40, 1), (120, 3)])
def test_any_block_size_and_smoothing_give_the_whole_call_segments(
    saved, capsys, block_ms, smoothing
):
    folder, net, params = saved["text"]
    features = frontend.waveform_log_mel(read_samples(str(saved["call"]), FEATURES), FEATURES)
    text = _text(features, TIMED)
    expected = _expected(net, params, saved["call"], text, None, smoothing, block_ms)
    assert expected
    code, rows, _ = _run(
        capsys, folder, saved["call"], f"--block-ms={block_ms}", f"--smoothing-frames={smoothing}"
    )
    assert code == 0
    _assert_same(rows, expected)
    lag = (smoothing - 1) * HOP_S
    assert all(row["emitted"] >= row["end"] + lag - 1e-6 for row in rows[:-1])


def test_the_bundles_smoothing_is_used_unless_the_command_line_sets_another(
    saved, tmp_path, capsys
):
    folder, net, params = saved["text"]
    smoothed = tmp_path / "smoothed"
    shutil.copytree(folder, smoothed)
    manifest = json.loads((smoothed / "bundle.json").read_text())
    manifest["decoding"]["smoothing"]["min_frames"] = 3  # as the model was scored
    (smoothed / "bundle.json").write_text(json.dumps(manifest))
    features = frontend.waveform_log_mel(read_samples(str(saved["call"]), FEATURES), FEATURES)
    text = _text(features, TIMED)
    expected = _expected(net, params, saved["call"], text, None, 3)
    assert expected != _expected(net, params, saved["call"], text)  # not vacuous
    code, rows, _ = _run(capsys, smoothed, saved["call"])
    assert code == 0
    _assert_same(rows, expected)
    code, rows, _ = _run(capsys, smoothed, saved["call"], "--smoothing-frames=1")
    assert code == 0
    _assert_same(rows, _expected(net, params, saved["call"], text))


def test_each_text_source_is_the_training_pipelines_text(saved, tmp_path, capsys):
    folder, net, params = saved["text"]
    call = _call(tmp_path / "bare.wav", 2.0, rate=16000, seed=1)  # nothing beside it
    features = frontend.waveform_log_mel(read_samples(str(call), FEATURES), FEATURES)
    words = [{"word": "breathing", "start": 0.3, "end": 0.9}]
    (tmp_path / "words.json").write_text(json.dumps(words))
    code, rows, _ = _run(capsys, folder, call, "--words", tmp_path / "words.json")
    timed = [asr.TimedWord("breathing", 0.3, 0.9, 0.9)]
    assert code == 0
    _assert_same(rows, _expected(net, params, call, _text(features, timed)))
    posteriors = np.random.default_rng(2).random((len(features) // 2, asr.NUM_SYMBOLS))
    np.save(tmp_path / "bare.npy", posteriors.astype(np.float32))  # beside the call
    code, rows, _ = _run(capsys, folder, call)
    assert code == 0
    _assert_same(rows, _expected(net, params, call, posteriors.astype(np.float32)))
    present = np.array([[True, False]])
    code, rows, err = _run(capsys, folder, call, "--no-text")
    assert code == 0 and "without modality dropout" in err
    zeros = np.zeros((len(features) // 2, asr.NUM_SYMBOLS), np.float32)
    _assert_same(rows, _expected(net, params, call, zeros, present))


def test_asr_recognises_the_call(saved, capsys):
    folder, net, params = saved["text"]
    samples = read_samples(str(saved["call"]), FEATURES)
    features = frontend.waveform_log_mel(samples, FEATURES)
    words = asr.recognise(samples).words
    assert words  # the noise bursts come out as words: the text is not all blank
    text = _text(features, words)
    code, rows, _ = _run(capsys, folder, saved["call"], "--asr", "pocketsphinx")
    assert code == 0
    _assert_same(rows, _expected(net, params, saved["call"], text))


def test_asr_ctc_recognises_the_call_with_a_recogniser_bundle(saved, tmp_path, capsys):
    import jax

    from ctc_jax import bundle as ctc_bundle
    from ctc_jax import model as ctc_model
    from ctc_jax.recognise import Recogniser

    folder, net, params = saved["text"]
    config = ctc_model.CtcConfig(channels=8, stem_kernel=3, kernels=(3,), dilations=(1,))
    recogniser = ctc_model.CtcRecogniser(config)
    weights = recogniser.init(jax.random.key(3), {"audio": np.zeros((1, 8, 40), np.float32)})
    bundle_folder = ctc_bundle.save(tmp_path / "recogniser", recogniser, weights)
    samples = read_samples(str(saved["call"]), FEATURES)
    features = frontend.waveform_log_mel(samples, FEATURES)
    words = Recogniser(recogniser, weights, "").transcribe([features])[0].words
    assert words  # random weights spell something
    code, rows, _ = _run(
        capsys, folder, saved["call"], "--asr", "ctc", "--ctc-bundle", bundle_folder
    )
    assert code == 0
    _assert_same(rows, _expected(net, params, saved["call"], _text(features, words)))
    # without --ctc-bundle: the shipped recogniser, with a note that this model was
    # trained on pocketsphinx's words (its bundle's decoding.text_recogniser is "")
    shipped = Recogniser.load(ctc_bundle.SHIPPED).transcribe([features])[0].words
    code, rows, err = _run(capsys, folder, saved["call"], "--asr", "ctc")
    assert code == 0 and "trained on pocketsphinx's words" in err and "--asr ctc's" in err
    _assert_same(rows, _expected(net, params, saved["call"], _text(features, shipped)))
    code, _, err = _run(capsys, folder, saved["call"], "--ctc-bundle", bundle_folder)
    assert code == 2 and "--ctc-bundle FOLDER: only with --asr ctc" in err
    # a bundle trained on the recogniser's posteriors reads them, and no note is given
    trained = bundle.TrackingConfig(causal_text=True, text_recogniser="ctc_posteriors")
    on_posteriors = bundle.save(tmp_path / "posteriors-bundle", net, params, CLASSES, trained)
    posteriors = Recogniser(recogniser, weights, "").posteriors([features])[0]
    assert posteriors.shape == (len(features) // 2, asr.NUM_SYMBOLS)
    code, rows, err = _run(
        capsys, on_posteriors, saved["call"], "--asr", "ctc", "--ctc-bundle", bundle_folder
    )
    assert code == 0 and "note:" not in err
    _assert_same(rows, _expected(net, params, saved["call"], posteriors))


def test_a_text_model_without_text_names_the_call_and_the_options(saved, tmp_path, capsys):
    folder, *_ = saved["text"]
    bare = _call(tmp_path / "bare.wav", 1.0)
    code, rows, err = _run(capsys, folder, bare)
    assert code == 1 and not rows
    assert f"{bare}: the model reads text (audio+text)" in err
    for option in ("--asr pocketsphinx", "--words", "bare.json", "--posteriors", "--no-text"):
        assert option in err
    code, rows, err = _run(capsys, folder, bare, saved["call"], "--keep-going", "--quiet")
    assert code == 1 and rows and {row["file"] for row in rows} == {str(saved["call"])}
    assert "skipped 1 input(s)" in err and f"{bare}: the model reads text" in err


def test_stdin_reads_raw_pcm_like_a_file_and_realtime_paces(saved, tmp_path, capsys, monkeypatch):
    folder, net, params = saved["audio"]
    pcm = (np.random.default_rng(3).normal(size=12000) * 3000).astype("<i2")
    wav = tmp_path / "same.wav"
    soundfile.write(wav, pcm, 16000, subtype="PCM_16")
    expected = _expected(net, params, wav)
    assert expected
    started = time.perf_counter()
    code, from_file, _ = _run(capsys, folder, wav, "--realtime")
    assert code == 0 and time.perf_counter() - started >= 0.75  # 0.75 s as it "arrives"
    _assert_same(from_file, expected)
    pipe = io.BufferedReader(io.BytesIO(pcm.tobytes()), buffer_size=999)  # short reads
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(pipe))
    code, from_stdin, _ = _run(capsys, folder, "-")
    assert code == 0 and {row["file"] for row in from_stdin} == {"-"}
    _assert_same(from_stdin, expected)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    code, _, err = _run(capsys, folder, "-")
    assert code == 1 and "-: holds no samples" in err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(pcm.tobytes())))
    code, _, err = _run(capsys, saved["text"][0], "-")
    assert code == 1 and "-: standard input carries audio only" in err


def test_a_microphone_streams_like_a_file(saved, tmp_path, capsys, monkeypatch):
    """--mic through a simulated sounddevice stream (its samples, then Ctrl-C) prints
    the file's segments; a text model needs --no-text there, as on standard input."""
    import types

    folder, net, params = saved["audio"]
    samples = (np.random.default_rng(6).normal(size=3200 * 4) * 0.1).astype(np.float32)
    wav = tmp_path / "same.wav"
    soundfile.write(wav, samples, 16000, subtype="FLOAT")
    expected = _expected(net, params, wav)

    class Microphone:
        def __init__(self, **settings):
            assert settings["samplerate"] == 16000 and settings["blocksize"] == 3200
            self.left = samples

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self, frames):
            if not len(self.left):
                raise KeyboardInterrupt
            block, self.left = self.left[:frames], self.left[frames:]
            return block[:, None], False

    fake = types.SimpleNamespace(InputStream=Microphone, PortAudioError=RuntimeError)
    monkeypatch.setitem(sys.modules, "sounddevice", fake)
    code, from_mic, _ = _run(capsys, folder, "--mic")
    assert code == 0 and {row["file"] for row in from_mic} == {"mic"}
    _assert_same(from_mic, expected)
    code, _, err = _run(capsys, saved["text"][0], "--mic")
    assert code == 1 and "mic: the microphone carries audio only" in err


def test_bad_calls_stop_the_run_unless_keep_going(saved, tmp_path, capsys, bad_audio_folder):
    folder, *_ = saved["audio"]
    bad = bad_audio_folder(tmp_path / "in", lambda path: _call(path, 1.0, rate=8000))
    bad["f_missing.wav"] = "no such file"
    missing = tmp_path / "in" / "f_missing.wav"
    code = track.main([str(folder), str(tmp_path / "in"), "--format=csv"])
    out, err = capsys.readouterr()
    assert code == 1 and "b_empty.wav: is empty" in err and "skipped" not in err
    assert out.splitlines()[0] == ",".join(track.FIELDS) and "a_good.flac" in out
    code = track.main([str(folder), str(tmp_path / "in"), str(missing), "--keep-going", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1 and f"skipped {len(bad)} input(s)" in err
    for name, reason in bad.items():
        assert any(name in line and reason in line for line in err.splitlines()), name
    assert "a_good.flac" in out and "[1/" not in err


def test_a_bundle_of_the_other_task_or_a_missing_one_is_an_error(saved, tmp_path, capsys):
    from cskws_jax import bundle as cskws_bundle
    from cskws_jax import model as cskws_model

    config = cskws_model.AfKwsConfig(
        num_keywords=2, stem_channels=4, kernel=3, stages=(cskws_model.Stage(4, 2, 1),)
    )
    afkws = cskws_model.AfKws(config)
    params = afkws.init(jax.random.key(0), {"audio": np.zeros((1, 8, 64), np.float32)})
    cskws_bundle.save(tmp_path / "kws", afkws, params, ("yes", "no"))
    code, _, err = _run(capsys, tmp_path / "kws", saved["call"])
    assert code == 2 and "bundle.json: task: expected 'multiqt', got 'cskws'" in err
    code, _, err = _run(capsys, tmp_path / "none", saved["call"])
    assert code == 2 and "no such bundle folder" in err
    code, _, err = _run(capsys, saved["audio"][0], saved["call"], "--block-ms=50")
    assert code == 2 and "not a whole number" in err


def test_the_module_runs_from_the_command_line(saved, run_module):
    folder, *_ = saved["text"]
    done = run_module("multiqt_jax.track", folder, saved["call"].parent)
    header, *lines = done.stdout.splitlines()
    assert header.split() == ["label", "start", "end", "emitted", "file"]
    assert lines and all(line.endswith(str(saved["call"])) for line in lines)
    assert math.isclose(float(lines[-1].split()[2]), 3.0)  # the last run ends with the call


def test_help_explains_the_inputs():
    text = track.parser().format_help()
    for phrase in ("--keep-going", "--realtime", "raw 16-bit", "--asr", "--no-text", "Exit"):
        assert phrase in text
