"""stream.onnx (the front end and the decisions in one graph) and the metadata every ONNX
module carries: docs/usage.md's onnxruntime-only loop prints what detect prints, a
MultiQT stream gives track's segments, and each module says what it needs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import soundfile

from cskws_jax import detect
from cskws_jax import models as kws_models
from multiqt_jax import export as calls_export
from multiqt_jax import models as calls_models
from multiqt_jax import track
from speechkit import export_format, onnx_metadata, onnx_stream

pytestmark = pytest.mark.early  # no smoke corpus: the shipped exports and samples

ROOT = Path(__file__).resolve().parents[2]
USAGE = ROOT / "docs" / "usage.md"
KWS = kws_models.CATALOGUE
CALLS = calls_models.CATALOGUE
DTYPES = {"tensor(float)": np.float32, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def _usage_loop() -> str:
    """docs/usage.md's onnxruntime-only loop (its python block that reads stream.onnx)."""
    blocks = re.findall(r"```python\n(.*?)```", USAGE.read_text(), flags=re.DOTALL)
    (loop,) = [block for block in blocks if "stream.onnx" in block]
    return loop


@pytest.fixture(scope="module")
def wavs(tmp_path_factory) -> list[Path]:
    """The shipped sample, and 0.3 s of noise (shorter than one block)."""
    short = tmp_path_factory.mktemp("stream") / "short.wav"
    noise = 0.05 * np.random.default_rng(0).normal(size=4800)
    soundfile.write(short, noise, 16000, subtype="PCM_16")
    return [Path(KWS.sample("afkws-top20")), short]


def test_the_usage_loop_prints_what_detect_prints(wavs, tmp_path, capsys):
    """onnxruntime, NumPy and soundfile alone reproduce `stj-detect EXPORT WAV --backend
    onnx --format csv`, row for row, the file column aside."""
    script = tmp_path / "loop.py"
    script.write_text(_usage_loop())
    export = KWS.export_path("afkws-top20")
    for wav in wavs:
        done = subprocess.run(
            [sys.executable, script, export, wav], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        capsys.readouterr()
        argv = [export, str(wav), "--backend=onnx", "--format=csv", "--quiet", "--all-peaks"]
        assert detect.main(argv) == 0
        printed = capsys.readouterr().out.splitlines()
        expected = [line.split(",", 1)[1] for line in printed]
        assert done.stdout.splitlines() == expected, wav
    assert len(expected) >= 1  # the header at least; the sample's rows are checked below


def test_the_usage_loop_is_not_vacuous_on_the_sample(wavs, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(_usage_loop())
    done = subprocess.run(
        [sys.executable, script, KWS.export_path("afkws-top20"), wavs[0]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows = done.stdout.splitlines()[1:]
    assert "because" in {row.split(",")[0] for row in rows}  # the sample's surest keyword


def _modules(folder: str) -> dict[str, onnx.ModelProto]:
    return {path.stem: onnx.load(path) for path in sorted(Path(folder).glob("*.onnx"))}


@pytest.mark.parametrize(
    "export",
    [KWS.export_path(n) for n in KWS.names()] + [CALLS.export_path(n) for n in CALLS.names()],
)
def test_every_shipped_onnx_module_describes_itself(export):
    """Every module carries onnx_metadata.KEYS, and they agree with export.json and with
    the graphs: the front end's input is context + block samples and gives block +
    dropped frames, the stream's audio input is one block."""
    manifest = json.loads((Path(export) / export_format.MANIFEST).read_text())
    modules = _modules(export)
    assert sorted(modules) == sorted(manifest["onnx_modules"])
    for name, model in modules.items():
        props = onnx_metadata.read(model)
        assert tuple(props) == onnx_metadata.KEYS, name
        assert props["module"] == name
        assert props["format_version"] == str(export_format.FORMAT_VERSION)
        assert json.loads(props["labels"]) == manifest["labels"]
        assert int(props["sample_rate"]) == manifest["features"]["sample_rate"]
        assert json.loads(props["decoding"]) == manifest["decoding"]
    props = onnx_metadata.read(modules["frontend"])
    samples, context = int(props["samples_per_block"]), int(props["context_samples"])
    frames, drop = int(props["block_frames"]), int(props["frames_to_drop"])
    front = onnxruntime.InferenceSession(modules["frontend"].SerializeToString())
    (audio, _), (features, _) = front.get_inputs(), front.get_outputs()
    assert audio.shape[1] == context + samples and features.shape[1] == frames + drop
    stream = onnxruntime.InferenceSession(modules[onnx_stream.NAME].SerializeToString())
    assert stream.get_inputs()[0].shape[1] == samples


def _run_stream(session: onnxruntime.InferenceSession, audio: np.ndarray, blocks: int, extra):
    """Steps `blocks` blocks of `audio` through a stream module -> [(outputs, samples
    consumed)] per block."""
    props = session.get_modelmeta().custom_metadata_map
    size = int(props["samples_per_block"])
    state = {
        i.name: np.zeros([1 if d == "b" else d for d in i.shape], DTYPES[i.type])
        for i in session.get_inputs()
        if i.name.startswith("state.")
    }
    names = [o.name for o in session.get_outputs()]
    steps = []
    for index in range(blocks):
        piece = audio[index * size : (index + 1) * size]
        feed = {"audio": np.pad(piece, (0, size - len(piece)))[None], **state, **extra}
        feed["samples"] = np.int32([len(piece)])
        result = dict(zip(names, session.run(names, feed), strict=True))
        state = {n[4:]: v for n, v in result.items() if n.startswith("new_state.")}
        steps.append(result)
    return steps


def test_a_multiqt_stream_gives_the_segments_track_prints(capsys):
    """The audio-only tracker's stream.onnx (front end, step and smoothing) over the
    shipped sample: its labels, cut into segments as track cuts them, are what `track
    --backend onnx` prints."""
    name = "multiqt-questions-audio"
    export, wav = CALLS.export_path(name), CALLS.sample(name)
    info, block_outputs, _, facts = calls_export.read_folder(export, backend="onnx")
    session = onnxruntime.InferenceSession(str(Path(export) / "stream.onnx"))
    audio, _ = soundfile.read(wav, dtype="float32")
    hop = info.features.hop_samples
    frames = len(audio) // hop
    blocks = max(1, -(-facts.spec.output_frames({"audio": frames}) // block_outputs))
    present = np.ones((1, 2), bool)
    steps = _run_stream(session, audio, blocks, {"present": present})
    segments = track.SegmentStream(
        info.labels, facts.spec.output_hop_s, info.decoding.smoothing.latency_frames
    )
    audio_block = int(session.get_modelmeta().custom_metadata_map["block_frames"])
    found = []
    for index, result in enumerate(steps, start=1):
        consumed = min(index * audio_block, frames) * info.features.hop_s
        found += segments.push(result["labels"][0][result["out_mask"][0]], consumed)
    hop_s = info.features.hop_s
    found += segments.close(min(blocks * audio_block, frames) * hop_s, frames * hop_s)
    capsys.readouterr()
    assert track.main([export, wav, "--backend=onnx", "--format=jsonl", "--quiet"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    keys = ("label", "start", "end", "emitted")
    rows = [
        {key: round(getattr(segment, key), 6) if key != "label" else segment.label for key in keys}
        for segment in found
    ]
    assert rows == [{key: row[key] for key in keys} for row in printed]
    assert len(rows) >= 3  # the sample's questions
