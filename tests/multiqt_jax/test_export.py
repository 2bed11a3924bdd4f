"""multiqt_jax.export: the MultiQT forward and streaming step through serialized StableHLO
equal the live model (two batch sizes and lengths, a modality marked missing), and
`python -m multiqt_jax.track` on the export folder prints what it prints on the bundle.

Serializing needs the `flatbuffers` package, one of the project's dependencies: imported
here, so that without it the file fails instead of skipping the byte round trip.
"""

from __future__ import annotations

import json

import flatbuffers  # noqa: F401  # jax.export serialization: a dependency, never skipped
import jax
import numpy as np
import pytest
import soundfile

from multiqt_jax import bundle, export, labels, model, track
from speechkit.bundle import BundleError


@pytest.fixture(scope="module")
def tiny(tiny_multiqt_config):
    """(net, params) of a tiny gated-fusion MultiQT, params scaled up for livelier labels."""
    net = model.MultiQT(tiny_multiqt_config(fusion="gated", fusion_size=4))
    inputs = {"audio": np.zeros((1, 40, 40), np.float32), "text": np.zeros((1, 20, 29))}
    params = jax.jit(net.init)(jax.random.key(0), inputs)
    return net, jax.tree_util.tree_map(lambda a: 3 * a, params)


def _round_trip(exported, tmp_path, name):
    """The module written as bytes and read back."""
    export.write(tmp_path / name, exported)
    return export.read(tmp_path / name)


def _inputs(rng, batch: int, outputs: int):
    """(inputs, mask, present) of `outputs` output frames; the last stream padded
    after half its frames and its text marked missing."""
    inputs = {
        "audio": rng.normal(size=(batch, 4 * outputs, 40)).astype(np.float32),
        "text": rng.random((batch, 2 * outputs, 29)).astype(np.float32),
    }
    mask = {name: np.ones(value.shape[:2], bool) for name, value in inputs.items()}
    for value in mask.values():
        value[-1, value.shape[1] // 2 :] = False
    present = np.ones((batch, 2), bool)
    present[-1, 1] = False
    return inputs, mask, present


def test_exported_forward_equals_the_live_model(tiny, tmp_path):
    net, params = tiny
    forward = _round_trip(export.export_forward(net, params), tmp_path, "forward.stablehlo")
    assert [str(a) for a in forward.in_avals[:2]] == ["float32[b,4*t,40]", "float32[b,2*t,29]"]
    rng = np.random.default_rng(0)
    for batch, outputs in ((1, 10), (3, 23)):
        inputs, mask, present = _inputs(rng, batch, outputs)
        found, found_mask = forward.call(inputs, mask, present)
        want, want_mask = net.apply(params, inputs, mask, present)
        np.testing.assert_array_equal(found_mask, want_mask)
        np.testing.assert_allclose(found["logits"], want["logits"], rtol=1e-5, atol=1e-5)
        assert np.ptp(np.asarray(want["logits"])) > 1  # not a constant output


def test_exported_step_streams_like_the_live_step(tiny, tmp_path):
    net, params = tiny
    step = _round_trip(export.export_step(net, params, block_outputs=3), tmp_path, "step.stablehlo")
    inputs, mask, present = _inputs(np.random.default_rng(1), 2, 12)
    state = export.initial_state(step, 2)
    live_state = net.apply(params, 2, method=net.initial_state)
    pieces = []
    for block in range(4):  # blocks of 3 output frames: 12 audio, 6 text frames
        cut = {"audio": slice(12 * block, 12 * block + 12), "text": slice(6 * block, 6 * block + 6)}
        block_inputs = {name: value[:, cut[name]] for name, value in inputs.items()}
        block_mask = {name: value[:, cut[name]] for name, value in mask.items()}
        found, found_mask, state = step.call(block_inputs, block_mask, present, state)
        want, want_mask, live_state = net.apply(
            params, block_inputs, block_mask, live_state, present, method=net.step
        )
        np.testing.assert_array_equal(found_mask, want_mask)
        np.testing.assert_allclose(found["logits"], want["logits"], rtol=1e-5, atol=1e-5)
        pieces.append(np.asarray(found["logits"]))
    whole, _ = net.apply(params, inputs, mask, present)  # and the blocks make the whole call
    # logits of tens: a few float32 ulps apart where the blocks' convolutions add in
    # another order, so the tolerance is relative as well as absolute
    np.testing.assert_allclose(
        np.concatenate(pieces, axis=1), whole["logits"], rtol=1e-5, atol=1e-5
    )


def test_an_audio_only_model_exports_too(tiny_multiqt_config, tmp_path):
    config = tiny_multiqt_config(fusion="gated", fusion_size=4, modalities=("audio",))
    net = model.MultiQT(config)
    audio = np.random.default_rng(2).normal(size=(2, 24, 40)).astype(np.float32)
    params = net.init(jax.random.key(1), {"audio": audio})
    forward = _round_trip(export.export_forward(net, params), tmp_path, "forward.stablehlo")
    present = np.ones((2, 2), bool)
    found, _ = forward.call({"audio": audio}, {"audio": np.ones((2, 24), bool)}, present)
    want, _ = net.apply(params, {"audio": audio})
    np.testing.assert_allclose(found["logits"], want["logits"], rtol=1e-5, atol=1e-5)
    step = _round_trip(export.export_step(net, params, 6), tmp_path, "step.stablehlo")
    live_state = net.apply(params, 2, method=net.initial_state)
    state = export.initial_state(step, 2)
    assert [a.shape for a in state] == [a.shape for a in jax.tree_util.tree_leaves(live_state)]
    found, _, _ = step.call({"audio": audio}, {"audio": np.ones((2, 24), bool)}, present, state)
    np.testing.assert_allclose(found["logits"], want["logits"], rtol=1e-5, atol=1e-5)


def test_the_tracker_prints_the_same_from_the_export_folder(tiny, tmp_path, capsys):
    net, params = tiny
    bundle.save(tmp_path / "bundle", net, params, labels.classes("questions"))
    assert export.main([str(tmp_path / "bundle"), str(tmp_path / "out"), "--block-outputs=5"]) == 0
    printed = capsys.readouterr().out
    for name in ("forward.stablehlo", "step.stablehlo", "export.json", "step.onnx"):
        assert (tmp_path / "out" / name).is_file() and name in printed
    assert "frontend.onnx: 2 inputs -> 2 outputs (ONNX)" in printed
    info, block_outputs, modules, _ = export.read_folder(tmp_path / "out")
    assert (info.labels, info.model_config, block_outputs) == (
        labels.QUESTION_CLASSES,
        net.config,
        5,
    )
    assert sorted(modules) == ["forward", "step"]
    noise = 0.1 * np.random.default_rng(3).normal(size=40000)
    soundfile.write(tmp_path / "call.wav", noise * np.sin(np.arange(40000) / 3000), 16000)
    (tmp_path / "call.json").write_text(json.dumps([{"word": "hello", "start": 0.2, "end": 0.5}]))
    runs = []
    for model_folder, backend in (("bundle", "jax"), ("out", "jax"), ("out", "onnx")):
        args = [str(tmp_path / model_folder), str(tmp_path / "call.wav"), "--format=jsonl"]
        assert track.main([*args, "--smoothing-frames=2", f"--backend={backend}"]) == 0
        runs.append([json.loads(line) for line in capsys.readouterr().out.splitlines()])
    assert runs[0] and len(runs[0]) == len(runs[1])
    for live, exported in zip(*runs[:2], strict=True):
        assert live["label"] == exported["label"]
        for key in ("start", "end", "emitted"):
            assert live[key] == pytest.approx(exported[key]), key
    assert runs[2] == runs[1]  # onnxruntime's front end and step: the same segments
    assert track.main([str(tmp_path / "out"), str(tmp_path / "call.wav"), "--block-ms=40"]) == 2
    assert "takes blocks of 200 ms" in capsys.readouterr().err


def test_an_export_folder_of_another_task_or_broken_is_refused(tiny, tmp_path):
    net, params = tiny
    bundle.save(tmp_path / "bundle", net, params, labels.classes("questions"))
    assert export.main([str(tmp_path / "bundle"), str(tmp_path / "out")]) == 0
    manifest_path = tmp_path / "out" / "export.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "task": "cskws"}))
    with pytest.raises(BundleError, match="export.json: task: expected 'multiqt', got 'cskws'"):
        export.read_folder(tmp_path / "out")
    manifest_path.write_text(json.dumps({**manifest, "labels": ["none", "address"]}))
    with pytest.raises(BundleError, match="labels: 2 classes, model_config.num_classes is 7"):
        export.read_folder(tmp_path / "out")
    manifest_path.write_text(json.dumps(manifest))
    (tmp_path / "out" / "step.stablehlo").unlink()
    with pytest.raises(BundleError, match=r"step.stablehlo: missing \(listed in export.json\)"):
        export.read_folder(tmp_path / "out")
    assert export.main([str(tmp_path / "none"), str(tmp_path / "out2")]) == 2
    assert not (tmp_path / "out2").exists()


def test_onnx_modules_equal_the_live_model_through_their_bytes(tiny, tmp_path):
    """The ONNX forward (any batch and length) and step (block by block, with its state)
    in onnxruntime equal jax within 1e-4 (relative too: logits of tens)."""
    from speechkit import onnx_export

    net, params = tiny
    bundle.save(tmp_path / "bundle", net, params, labels.classes("questions"))
    _, _, info = bundle.load(tmp_path / "bundle")
    facts = export.model_facts(info, 3)
    signatures = export.onnx_signatures(info, 3, facts)
    modules = {
        name: onnx_export.read(proto.SerializeToString(), f"{name}.onnx", signatures[name])
        for name, proto in export.export_onnx(net, params, info, 3, facts).items()
    }
    rng = np.random.default_rng(4)
    for batch, outputs in ((1, 5), (3, 17)):
        inputs, mask, present = _inputs(rng, batch, outputs)
        found = modules["forward"].call(inputs=inputs, mask=mask, present=present)
        want, want_mask = net.apply(params, inputs, mask, present)
        np.testing.assert_array_equal(found["out_mask"], want_mask)
        np.testing.assert_allclose(found["outputs"]["logits"], want["logits"], rtol=1e-4, atol=1e-4)
    inputs, mask, present = _inputs(rng, 2, 12)
    state = modules["step"].initial_state(2)
    live_state = net.apply(params, 2, method=net.initial_state)
    for block in range(4):
        cut = {"audio": slice(12 * block, 12 * block + 12), "text": slice(6 * block, 6 * block + 6)}
        block_inputs = {name: value[:, cut[name]] for name, value in inputs.items()}
        block_mask = {name: value[:, cut[name]] for name, value in mask.items()}
        found = modules["step"].call(
            inputs=block_inputs, mask=block_mask, present=present, state=state
        )
        want, want_mask, live_state = net.apply(
            params, block_inputs, block_mask, live_state, present, method=net.step
        )
        np.testing.assert_array_equal(found["out_mask"], want_mask)
        np.testing.assert_allclose(found["outputs"]["logits"], want["logits"], rtol=1e-4, atol=1e-4)
        state = found["new_state"]
