"""multiqt_jax.bundle: a tiny MultiQT saved and loaded gives the same outputs, with its
tracking settings (a bundle saved before the smoothing was stored loads with none);
bundles of the other task and parameters that do not fit the config are refused."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from multiqt_jax import bundle, decode, labels, model
from speechkit.bundle import BundleError


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tiny_multiqt_config):
    """(bundle folder, net, params, inputs) of a tiny gated-fusion MultiQT."""
    rng = np.random.default_rng(0)
    inputs = {
        "audio": rng.normal(size=(2, 40, 40)).astype(np.float32),
        "text": rng.random((2, 20, 29)).astype(np.float32),
    }
    net = model.MultiQT(tiny_multiqt_config(fusion="gated", fusion_size=4))
    params = jax.jit(net.init)(jax.random.key(0), inputs)
    folder = tmp_path_factory.mktemp("multiqt") / "bundle-fold0"
    smoothing = decode.SmoothingConfig(min_frames=3)
    decoding = bundle.TrackingConfig(causal_text=False, smoothing=smoothing, text_recogniser="ctc")
    bundle.save(folder, net, params, labels.classes("questions"), decoding, "calls/questions")
    return folder, net, params, inputs


def test_round_trip_gives_the_same_outputs(saved):
    folder, net, params, inputs = saved
    loaded_net, loaded_params, info = bundle.load(folder)
    present = np.array([[True, True], [True, False]])
    expected, mask = net.apply(params, inputs, None, present)
    found, found_mask = loaded_net.apply(loaded_params, inputs, None, present)
    np.testing.assert_array_equal(np.asarray(found["logits"]), np.asarray(expected["logits"]))
    np.testing.assert_array_equal(found_mask, mask)
    assert info.model_config == net.config and info.labels == labels.QUESTION_CLASSES
    smoothing = decode.SmoothingConfig(min_frames=3)
    assert info.decoding == bundle.TrackingConfig(
        causal_text=False, smoothing=smoothing, text_recogniser="ctc"
    )
    assert (info.task, info.corpus) == ("multiqt", "calls/questions")


def _copy(folder, tmp_path, edit):
    """The bundle at `folder` copied to tmp_path/copy with `edit(manifest)` applied."""
    copy = tmp_path / "copy"
    copy.mkdir()
    manifest = json.loads((folder / "bundle.json").read_text())
    edit(manifest)
    (copy / "bundle.json").write_text(json.dumps(manifest))
    (copy / "params.npz").write_bytes((folder / "params.npz").read_bytes())
    return copy


def test_a_bundle_saved_before_the_smoothing_was_stored_tracks_raw_labels(saved, tmp_path):
    folder, *_ = saved

    def older(manifest):  # before the smoothing and the text recogniser were stored
        manifest["decoding"].pop("smoothing")
        manifest["decoding"].pop("text_recogniser")

    _, _, info = bundle.load(_copy(folder, tmp_path, older))
    assert info.decoding == bundle.TrackingConfig(
        causal_text=False, smoothing=decode.SmoothingConfig(min_frames=1), text_recogniser=""
    )


def test_a_smoothing_background_outside_the_classes_is_refused(saved, tmp_path):
    folder, net, params, _ = saved

    def edit(manifest):
        manifest["decoding"]["smoothing"]["background"] = 7

    with pytest.raises(BundleError, match=r"decoding.smoothing.background: 7, labels has 7"):
        bundle.load(_copy(folder, tmp_path, edit))
    outside = bundle.TrackingConfig(smoothing=decode.SmoothingConfig(background=9))
    with pytest.raises(BundleError, match=r"\(to save\): decoding.smoothing.background: 9"):
        bundle.save(tmp_path / "b", net, params, labels.QUESTION_CLASSES, outside)


def test_save_refuses_class_names_that_do_not_fit(saved, tmp_path):
    _, net, params, _ = saved
    with pytest.raises(BundleError, match="labels: 3 classes, model_config.num_classes is 7"):
        bundle.save(tmp_path / "b", net, params, ("none", "a", "b"))
    assert not (tmp_path / "b").exists()


def test_a_config_that_does_not_fit_the_arrays_is_refused(saved, tmp_path):
    folder, *_ = saved
    copy = tmp_path / "copy"
    copy.mkdir()
    manifest = json.loads((folder / "bundle.json").read_text())
    manifest["model_config"]["num_classes"] = 5
    manifest["labels"] = manifest["labels"][:5]
    (copy / "bundle.json").write_text(json.dumps(manifest))
    (copy / "params.npz").write_bytes((folder / "params.npz").read_bytes())
    with pytest.raises(BundleError, match=r"params.npz: params/h/bias: shape \(7,\); the config"):
        bundle.load(copy)


def test_each_task_refuses_the_other_tasks_bundle(saved):
    folder, *_ = saved
    from cskws_jax import bundle as cskws_bundle

    with pytest.raises(BundleError, match="bundle.json: task: expected 'cskws', got 'multiqt'"):
        cskws_bundle.load(folder)
