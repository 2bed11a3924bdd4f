"""Bundles and exports that users saved keep loading: the frozen files of
tests/fixtures/frozen (speech-tracking-jax 0.2.0: bundle format 1, export format 4;
0.3.0: export format 5; 0.4.0: export format 6), read with today's code, hold the same
fields and give the outputs they gave when written (`expected.npz`). Never write those
files again to make this pass (their README.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cskws_jax import bundle as kws_bundle
from cskws_jax import export as kws_export
from multiqt_jax import bundle as qt_bundle
from multiqt_jax import export as qt_export

pytestmark = pytest.mark.early  # no smoke corpus

FROZEN = Path(__file__).resolve().parents[1] / "fixtures" / "frozen"
HEADS = ("heatmap", "length", "offset")
KEYWORDS = ("alpha", "beta", "gamma")


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    with np.load(FROZEN / "expected.npz") as stored:
        return dict(stored)


def test_the_frozen_afkws_bundle_loads_and_gives_its_outputs(expected):
    net, params, info = kws_bundle.load(FROZEN / "cskws-bundle")
    assert info.format_version == 1
    assert (info.labels, info.corpus, info.model_config.normalise) == (
        ("alpha", "beta", "gamma"),
        "frozen",
        "cmn",
    )
    assert info.decoding.operating_point(5.0).thresholds == (0.5, 0.6, 0.7)
    heads, mask = net.apply(params, {"audio": expected["afkws_features"]})
    np.testing.assert_array_equal(mask, expected["afkws_mask"])
    for name in HEADS:
        np.testing.assert_allclose(heads[name], expected[f"afkws_{name}"], rtol=1e-5, atol=1e-6)


def test_the_frozen_multiqt_bundle_loads_and_gives_its_outputs(expected):
    net, params, info = qt_bundle.load(FROZEN / "multiqt-bundle")
    assert (info.model_config.fusion, info.decoding.smoothing.min_frames) == ("gated", 3)
    assert info.decoding.text_recogniser == "ctc"
    inputs = {"audio": expected["multiqt_audio"], "text": expected["multiqt_text"]}
    outputs, mask = net.apply(params, inputs)
    np.testing.assert_array_equal(mask, expected["multiqt_mask"])
    np.testing.assert_allclose(outputs["logits"], expected["multiqt_logits"], rtol=1e-5, atol=1e-5)


KWS_EXPORTS = ["cskws-export", "cskws-export-v5", "cskws-export-v6"]  # formats 4, 5, 6
QT_EXPORTS = ["multiqt-export", "multiqt-export-v5", "multiqt-export-v6"]


@pytest.mark.parametrize("folder", KWS_EXPORTS)
@pytest.mark.parametrize("backend", ["jax", "onnx"])
def test_the_frozen_afkws_export_reads_and_gives_its_bundles_outputs(expected, backend, folder):
    """Both backends' forward (the StableHLO module; the ONNX one in onnxruntime) on the
    frozen inputs give the bundle's outputs as written."""
    info, block_outputs, modules, facts = kws_export.read_folder(FROZEN / folder, backend=backend)
    assert (info.labels, block_outputs, facts.spec.output_latency) == (KEYWORDS, 2, 2)
    features = expected["afkws_features"]
    mask = np.ones(features.shape[:2], bool)
    if backend == "jax":
        heads, out_mask = modules["forward"].call(features, mask)
    else:
        found = modules["forward"].call(features=features, mask=mask)
        heads, out_mask = found["heads"], found["out_mask"]
    np.testing.assert_array_equal(out_mask, expected["afkws_mask"])
    for name in HEADS:
        np.testing.assert_allclose(
            np.asarray(heads[name]), expected[f"afkws_{name}"], rtol=1e-4, atol=1e-5
        )


@pytest.mark.parametrize("folder", QT_EXPORTS)
@pytest.mark.parametrize("backend", ["jax", "onnx"])
def test_the_frozen_multiqt_export_reads_and_gives_its_bundles_outputs(expected, backend, folder):
    info, block_outputs, modules, facts = qt_export.read_folder(FROZEN / folder, backend=backend)
    assert (block_outputs, info.decoding.smoothing.min_frames, sorted(facts.states)) == (
        5,
        3,
        ["step"],
    )
    inputs = {"audio": expected["multiqt_audio"], "text": expected["multiqt_text"]}
    mask = {name: np.ones(value.shape[:2], bool) for name, value in inputs.items()}
    present = np.ones((len(inputs["audio"]), 2), bool)
    if backend == "jax":
        outputs, out_mask = modules["forward"].call(inputs, mask, present)
    else:
        found = modules["forward"].call(inputs=inputs, mask=mask, present=present)
        outputs, out_mask = found["outputs"], found["out_mask"]
    np.testing.assert_array_equal(out_mask, expected["multiqt_mask"])
    np.testing.assert_allclose(
        np.asarray(outputs["logits"]), expected["multiqt_logits"], rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("folder", KWS_EXPORTS)
def test_the_frozen_export_streams_like_its_forward(expected, folder):
    """The exported step, block by block from its initial state, gives the forward's
    heatmap (the step's state shapes come from the stored model facts)."""
    info, block_outputs, modules, _ = kws_export.read_folder(FROZEN / folder)
    step = modules["step"]
    features = expected["afkws_features"][:1]
    block = block_outputs * info.model_config.output_stride
    delay = info.model_config.delay
    padded = np.concatenate([features, np.zeros((1, block * delay, features.shape[2]))], axis=1)
    state, heatmaps = kws_export.initial_state(step, 1), []
    for start in range(0, padded.shape[1], block):
        chunk = padded[:, start : start + block].astype(np.float32)
        mask = np.zeros(chunk.shape[:2], bool)
        mask[:, : max(0, min(block, features.shape[1] - start))] = True
        heads, _, state = step.call(chunk, mask, state)
        heatmaps.append(np.asarray(heads["heatmap"]))
    streamed = np.concatenate(heatmaps, axis=1)[
        :, delay : delay + expected["afkws_heatmap"].shape[1]
    ]
    np.testing.assert_allclose(streamed, expected["afkws_heatmap"][:1], rtol=1e-4, atol=1e-5)
