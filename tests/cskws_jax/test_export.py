"""cskws_jax.export: the AF-KWS forward and streaming step through serialized StableHLO
equal the live model, for two batch sizes and lengths; the command line writes a folder
(modules and export.json) that `speechkit.export_read.read_folder` reads back, and
`cskws_jax.export.read_folder` keeps the bundle's decoding settings (operating points
included) and checks them and the keywords against the model.

Serializing needs the `flatbuffers` package, one of the project's dependencies: imported
here, so that without it the file fails instead of skipping the byte round trip.
"""

from __future__ import annotations

import json

import flatbuffers  # noqa: F401  # jax.export serialization: a dependency, never skipped
import numpy as np
import pytest

from cskws_jax import export


def _round_trip(exported, tmp_path, name):
    """The module written as bytes and read back."""
    export.write(tmp_path / name, exported)
    return export.read(tmp_path / name)


def test_serialized_modules_are_bytes_of_stablehlo(tiny_afkws, tmp_path):
    net, params = tiny_afkws
    export.write(tmp_path / "forward.stablehlo", export.export_forward(net, params))
    loaded = export.read(tmp_path / "forward.stablehlo")
    assert [str(a) for a in loaded.in_avals] == ["float32[b,4*t,64]", "bool[b,4*t]"]
    assert "stablehlo" in loaded.mlir_module()


def test_exported_forward_equals_the_live_model(tiny_afkws, tmp_path):
    net, params = tiny_afkws
    forward = _round_trip(export.export_forward(net, params), tmp_path, "forward.stablehlo")
    rng = np.random.default_rng(0)
    for batch, frames in ((1, 40), (3, 84)):
        features = rng.normal(size=(batch, frames, 64)).astype(np.float32)
        mask = np.ones((batch, frames), bool)
        mask[-1, frames // 2 :] = False
        heads, out_mask = forward.call(features, mask)
        want, want_mask = net.apply(params, {"audio": features}, {"audio": mask})
        np.testing.assert_array_equal(out_mask, want_mask)
        for name in want:
            np.testing.assert_allclose(heads[name], want[name], atol=1e-6)


def test_exported_step_streams_like_the_live_step(tiny_afkws, tmp_path):
    _check_step(*tiny_afkws, tmp_path)


def test_a_normalised_input_exports_its_running_means_as_state(tiny_afkws_config, tmp_path):
    import dataclasses

    import jax

    from cskws_jax import model

    config = dataclasses.replace(tiny_afkws_config(3), normalise="cmvn", envelope=20)
    net = model.AfKws(config)
    params = net.init(jax.random.key(0), {"audio": np.zeros((1, 16, 64), np.float32)})
    _check_step(net, params, tmp_path)


def _check_step(net, params, tmp_path):
    exported = export.export_step(net, params, block_outputs=3)
    step = _round_trip(exported, tmp_path, "step.stablehlo")
    rng = np.random.default_rng(1)
    features = rng.normal(size=(2, 48, 64)).astype(np.float32)
    mask = np.ones((2, 48), bool)
    mask[1, 30:] = False
    state = export.initial_state(step, 2)
    live_state = net.apply(params, 2, method=net.initial_state)
    for begin in range(0, 48, 12):  # blocks of 3 output frames
        end = begin + 12
        block = {"audio": features[:, begin:end]}
        block_mask = {"audio": mask[:, begin:end]}
        heads, out_mask, state = step.call(block["audio"], block_mask["audio"], state)
        want, want_mask, live_state = net.apply(
            params, block, block_mask, live_state, method=net.step
        )
        np.testing.assert_array_equal(out_mask, want_mask)
        for name in want:
            np.testing.assert_allclose(heads[name], want[name], atol=1e-6)


def test_cli_writes_a_folder_a_client_reads_without_the_bundle(tiny_afkws, tmp_path, capsys):
    from cskws_jax import bundle, model, train
    from speechkit import export_read

    net, params = tiny_afkws
    bundle.save(tmp_path / "bundle", net, params, ("alpha", "beta", "gamma"))
    assert export.main([str(tmp_path / "bundle"), str(tmp_path / "out"), "--block-outputs=3"]) == 0
    assert "export.json: cskws, 3 labels" in capsys.readouterr().out
    for module in (tmp_path / "out").glob("*.stablehlo"):  # no source paths of this machine
        assert (
            b"cskws_jax/" not in module.read_bytes()
            and b"/site-packages/" not in module.read_bytes()
        )
    info, block_outputs, modules, facts = export_read.read_folder(
        tmp_path / "out",
        task="cskws",
        model_config_type=model.AfKwsConfig,
        decoding_type=train.PeakDecodingConfig,
        signatures=export.signatures,
        facts_of=export.model_facts,
    )
    assert facts == export.model_facts(info, block_outputs)  # stored = the model code's
    assert (info.labels, info.model_config, block_outputs) == (
        ("alpha", "beta", "gamma"),
        net.config,
        3,
    )
    assert [str(a) for a in modules["step"].in_avals[:2]] == ["float32[b,12,64]", "bool[b,12]"]
    assert export.main([str(tmp_path / "missing"), str(tmp_path / "out2")]) == 2
    assert "no such bundle folder" in capsys.readouterr().err


def test_read_folder_keeps_the_decoding_and_checks_it_against_the_model(tiny_afkws, tmp_path):
    from cskws_jax import bundle, train
    from speechkit.bundle import BundleError

    net, params = tiny_afkws
    points = (train.OperatingPoint(2.0, (0.5, 0.6, 0.7), "test", 0.25),)
    decoding = train.PeakDecodingConfig(
        max_detections=9, radius=2, min_score=0.2, operating_points=points
    )
    bundle.save(tmp_path / "bundle", net, params, ("alpha", "beta", "gamma"), decoding)
    out = tmp_path / "out"
    assert export.main([str(tmp_path / "bundle"), str(out), "--block-outputs=2"]) == 0
    info, block_outputs, modules, _ = export.read_folder(out)
    assert (info.decoding, info.labels, block_outputs) == (decoding, ("alpha", "beta", "gamma"), 2)
    assert sorted(modules) == ["forward", "step"]
    manifest = json.loads((out / "export.json").read_text())
    edits = [
        (lambda m: m.update(labels=["alpha", "beta"]), "labels: 2 keywords"),
        (
            lambda m: m["decoding"]["operating_points"][0].update(thresholds=[0.5]),
            r"decoding.operating_points\[0\].thresholds: 1 thresholds",
        ),
        (lambda m: m["features"].update(num_mels=40), "features.num_mels: 40"),
        (lambda m: m.update(task="multiqt"), "task: expected 'cskws'"),
    ]
    for edit, message in edits:
        broken = json.loads(json.dumps(manifest))
        edit(broken)
        (out / "export.json").write_text(json.dumps(broken))
        with pytest.raises(BundleError, match=message) as caught:
            export.read_folder(out)
        assert str(out / "export.json") in str(caught.value)
