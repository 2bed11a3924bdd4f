"""cskws_jax.export's ONNX modules, read back from bytes and run by onnxruntime, equal
jax within 1e-4: the front end over audio pushed in random pieces, the step and the
detector (step and peak decoding) block by block with their state, and the forward over
any batch and length; with the input normaliser's running means as state too, and
with 2-D convolutions over (time, band) before the stem."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from cskws_jax import bundle, export, model, train
from cskws_jax.streaming import StreamDetector
from speechkit import frontend, onnx_export

ATOL = 1e-4
KEYWORDS = ("alpha", "beta", "gamma")


@pytest.fixture(
    scope="module",
    params=[{"normalise": "cmn"}, {"normalise": "cmn", "frequency_stem": (4, 3)}],
    ids=["cmn", "cmn-frequency-stem"],
)
def exported(request, tiny_afkws_config, tmp_path_factory):
    """(net, params, info, {name: onnx_export.Module}) of a tiny AF-KWS (the config
    fields `param`) exported with blocks of 3 output frames, each module through its
    bytes."""
    config = dataclasses.replace(tiny_afkws_config(3), **request.param)
    net = model.AfKws(config)
    params = net.init(jax.random.key(0), {"audio": np.zeros((1, 16, 64), np.float32)})
    params = jax.tree_util.tree_map(lambda a: 1.5 * a, params)  # livelier heatmaps
    folder = tmp_path_factory.mktemp("onnx") / "bundle"
    bundle.save(folder, net, params, KEYWORDS, train.PeakDecodingConfig(min_score=0.3), "x")
    _, _, info = bundle.load(folder)
    facts = export.model_facts(info, 3)
    signatures = export.onnx_signatures(info, 3, facts)
    modules = {
        name: onnx_export.read(proto.SerializeToString(), f"{name}.onnx", signatures[name])
        for name, proto in export.export_onnx(net, params, info, 3, facts).items()
    }
    return net, params, info, modules


def _audio(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    samples = int(seconds * 16000)
    return (0.1 * rng.normal(size=samples) * np.sin(np.arange(samples) / 900)).astype(np.float32)


def test_the_front_end_streams_random_pieces_like_the_whole_waveform(exported):
    _, _, info, modules = exported
    audio = _audio(1.37, 0)
    want = frontend.waveform_log_mel(audio, info.features)
    rng = np.random.default_rng(1)
    for _ in range(3):
        stream = onnx_export.feature_stream(info.features, 12, modules["frontend"])
        cuts = np.sort(rng.choice(np.arange(1, len(audio)), size=9, replace=False))
        found = np.concatenate([stream.push(piece) for piece in np.split(audio, cuts)])
        np.testing.assert_allclose(found, want[: len(found)], atol=ATOL)
        assert len(found) == len(want)


def test_the_step_and_the_detector_follow_jax_block_by_block(exported):
    net, params, info, modules = exported
    features = frontend.waveform_log_mel(_audio(2.0, 2), info.features)[None]
    features = np.concatenate([features, features[:, ::-1]])  # a batch of two streams
    mask = np.ones(features.shape[:2], bool)
    mask[1, 150:] = False
    detector = StreamDetector(net, params, 3, info.decoding.radius, info.decoding.min_score)
    live = {"step": net.apply(params, 2, method=net.initial_state), "detector": None}
    live["detector"] = detector.initial_state(2)
    state = {name: modules[name].initial_state(2) for name in ("step", "detector")}
    peaks = 0
    for begin in range(0, features.shape[1] - 11, 12):
        block, block_mask = features[:, begin : begin + 12], mask[:, begin : begin + 12]
        found = modules["step"].call(block=block, mask=block_mask, state=state["step"])
        want, want_mask, live["step"] = net.apply(
            params, {"audio": block}, {"audio": block_mask}, live["step"], method=net.step
        )
        _assert_close(found["heads"], want)
        np.testing.assert_array_equal(found["out_mask"], want_mask)
        state["step"] = found["new_state"]

        found = modules["detector"].call(block=block, mask=block_mask, state=state["detector"])
        want, decided, live["detector"] = detector.step(
            {"audio": block}, {"audio": block_mask}, live["detector"]
        )
        _assert_close({k: v for k, v in found["found"].items() if k != "peak"}, want, "peak")
        _assert_same_peaks(found["found"]["peak"], want, info.decoding.min_score)
        np.testing.assert_array_equal(found["decided"], decided)
        state["detector"] = found["new_state"]
        peaks += int(np.sum(want["peak"]))
    assert peaks > 5  # not vacuous


def test_the_forward_takes_any_batch_and_length(exported):
    net, params, _, modules = exported
    rng = np.random.default_rng(3)
    for batch, frames in ((1, 8), (3, 84)):
        features = rng.normal(size=(batch, frames, 64)).astype(np.float32)
        mask = np.ones((batch, frames), bool)
        mask[-1, frames // 2 :] = False
        found = modules["forward"].call(features=features, mask=mask)
        want, want_mask = net.apply(params, {"audio": features}, {"audio": mask})
        _assert_close(found["heads"], want)
        np.testing.assert_array_equal(found["out_mask"], want_mask)


def _assert_same_peaks(found, want: dict, min_score: float) -> None:
    """The same peaks, but where a score is within ATOL of a tie: a saturated heatmap
    (1 - score < ATOL, so its neighbours may tie it) or the threshold."""
    score = np.asarray(want["score"])
    tie = (1 - score < ATOL) | (np.abs(score - min_score) < ATOL)
    differ = np.asarray(found) != np.asarray(want["peak"])
    assert not np.any(differ & ~tie), np.argwhere(differ & ~tie)
    assert np.mean(differ) < 0.1


def _assert_close(found: dict, want: dict, *left_out: str) -> None:
    assert sorted(found) == sorted(set(want) - set(left_out))
    for name in found:
        expected = np.asarray(want[name])
        if expected.dtype == np.bool_:
            np.testing.assert_array_equal(found[name], expected, err_msg=name)
        else:
            np.testing.assert_allclose(found[name], expected, atol=ATOL, err_msg=name)
