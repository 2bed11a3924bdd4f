"""speechkit.bundle: data-only bundles, configs rebuilt from JSON, errors that name the
file and the field, and planted bundles refused without running anything."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import flax.linen as nn
import numpy as np
import pytest

from speechkit import bundle, dataclass_json, files
from speechkit.frontend import FeatureConfig


@dataclasses.dataclass(frozen=True)
class Layer:
    width: int
    stride: int = 1

    def __post_init__(self):
        if self.stride < 1:
            raise ValueError(f"Layer.stride: expected >= 1, got {self.stride}")


@dataclasses.dataclass(frozen=True)
class TinyConfig:
    inputs: int = 3
    layers: tuple[Layer, ...] = (Layer(4), Layer(2, stride=2))
    gain: float = 1.0
    name: str | None = None
    pair: tuple[int, str] = (1, "a")
    causal: bool = True


@dataclasses.dataclass(frozen=True)
class TinyDecode:
    threshold: float = 0.5


def _params(config: TinyConfig) -> dict:
    """A nested dict like flax's, with a metadata box as sequence-layers makes."""
    rng = np.random.default_rng(0)
    params, width = {}, config.inputs
    for i, layer in enumerate(config.layers):
        kernel = rng.normal(size=(width, layer.width)).astype(np.float32)
        params[f"layer{i}"] = {
            "kernel": nn.Partitioned(kernel, names=(None, None)),
            "bias": np.zeros(layer.width, np.float32),
        }
        width = layer.width
    return {"params": params}


def _expected(config: TinyConfig) -> dict:
    return _params(config)


def _save(path, config=TinyConfig(), params=None, task="tiny", labels=("no", "yes"), decoding=None):
    return bundle.save(
        path,
        task=task,
        params=_params(config) if params is None else params,
        model_config=config,
        features=FeatureConfig(num_mels=3),
        labels=labels,
        decoding=TinyDecode() if decoding is None else decoding,
        corpus="toy/corpus",
        expected_params=_expected(config),
    )


def _load(path, task="tiny", decoding_type=TinyDecode):
    return bundle.load(
        path,
        task=task,
        model_config_type=TinyConfig,
        decoding_type=decoding_type,
        expected_params=_expected,
    )


def _edit_manifest(path, edit) -> None:
    manifest_path = path / bundle.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    edit(manifest)
    manifest_path.write_text(json.dumps(manifest))


def test_round_trip_keeps_every_part(tmp_path):
    config = TinyConfig(gain=2, name="x", causal=False)
    folder = _save(tmp_path / "b", config)
    assert sorted(os.listdir(folder)) == ["bundle.json", "params.npz"]
    params, info = _load(folder)
    assert info.model_config == config and isinstance(info.model_config.gain, float)
    assert info.features == FeatureConfig(num_mels=3)
    assert info.decoding == TinyDecode()
    assert (info.task, info.labels, info.corpus) == ("tiny", ("no", "yes"), "toy/corpus")
    original = bundle.flatten(_params(config))
    assert bundle.flatten(params).keys() == original.keys()
    for name, value in bundle.flatten(params).items():
        np.testing.assert_array_equal(value, original[name])
        assert value.dtype == original[name].dtype


def test_from_dict_converts_by_type_hints_and_names_the_field():
    values = bundle.to_dict(TinyConfig())
    assert dataclass_json.from_dict(TinyConfig, values, "model_config") == TinyConfig()
    cases = [
        ({"inputs": "3"}, TypeError, "model_config.inputs: expected an int"),
        ({"inputs": True}, TypeError, "model_config.inputs: expected an int"),
        ({"causal": 1}, TypeError, "model_config.causal: expected true or false"),
        ({"layers": [{"width": 4, "stride": "2"}]}, TypeError, r"model_config.layers\[0\].stride"),
        ({"layers": [{"width": 4, "stride": 0}]}, ValueError, r"model_config.layers\[0\]: Layer"),
        ({"pair": [1]}, ValueError, "model_config.pair: expected 2 items"),
        ({"extra": 1}, ValueError, "model_config.extra: not a field of TinyConfig"),
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            dataclass_json.from_dict(TinyConfig, {**values, **change}, "model_config")
    missing = {k: v for k, v in values.items() if k != "gain"}
    with pytest.raises(ValueError, match="model_config.gain: missing"):
        dataclass_json.from_dict(TinyConfig, missing, "model_config")


@dataclasses.dataclass(frozen=True)
class LaterDecode:
    """Decoding settings that gained a field (`points`) after bundles were written."""

    threshold: float
    points: tuple[float, ...] = dataclasses.field(
        default=(0.5,), metadata={dataclass_json.OPTIONAL: True}
    )
    radius: int = 1  # not marked OPTIONAL: required in the JSON although it has a default


def test_an_optional_field_takes_its_default_and_a_required_one_is_named():
    given = {"threshold": 0.3, "points": [0.1, 0.2], "radius": 2}
    assert dataclass_json.from_dict(LaterDecode, given, "decoding") == LaterDecode(
        0.3, (0.1, 0.2), 2
    )
    old = {"threshold": 0.3, "radius": 2}  # written before `points` existed
    assert dataclass_json.from_dict(LaterDecode, old, "decoding") == LaterDecode(0.3, (0.5,), 2)
    for required in ("threshold", "radius"):
        values = {k: v for k, v in given.items() if k != required}
        with pytest.raises(ValueError, match=rf"^decoding\.{required}: missing"):
            dataclass_json.from_dict(LaterDecode, values, "decoding")


def test_a_bundle_lacking_an_optional_field_loads_and_one_lacking_a_required_field_does_not(
    tmp_path,
):
    folder = _save(tmp_path / "b", decoding=LaterDecode(0.3, (0.1, 0.2), 2))
    assert _load(folder, decoding_type=LaterDecode)[1].decoding == LaterDecode(0.3, (0.1, 0.2), 2)
    _edit_manifest(folder, lambda m: m["decoding"].pop("points"))
    assert _load(folder, decoding_type=LaterDecode)[1].decoding == LaterDecode(0.3, (0.5,), 2)
    _edit_manifest(folder, lambda m: m["decoding"].pop("radius"))
    with pytest.raises(bundle.BundleError, match="decoding.radius: missing") as caught:
        _load(folder, decoding_type=LaterDecode)
    assert str(folder / bundle.MANIFEST) in str(caught.value)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.update(task="other"), "task: expected 'tiny', got 'other'"),
        (
            lambda m: m.update(format_version=99),
            r"format_version: 99; .* \(written by a newer .*: upgrade it",
        ),
        (lambda m: m.update(format_version=0), r"format_version: 0; .* \(older than any"),
        (lambda m: m.pop("corpus"), "corpus: missing"),
        (lambda m: m.update(model_config_type="os.system"), "model_config_type: expected"),
        (lambda m: m["model_config"].update(inputs=5), r"params/layer0/kernel: shape \(3, 4\)"),
        (lambda m: m["features"].update(num_mels=-1), "features: FeatureConfig.num_mels"),
        (lambda m: m.update(labels=[]), "labels: expected a list of names"),
        (lambda m: m["decoding"].pop("threshold"), "decoding.threshold: missing"),
        (lambda m: m["params"].update(sha256="0" * 64), "sha256 differs"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path, edit, message):
    folder = _save(tmp_path / "b")
    _edit_manifest(folder, edit)
    with pytest.raises(bundle.BundleError, match=message) as caught:
        _load(folder)
    assert str(folder) in str(caught.value)


def test_missing_parts_and_mixed_saves_are_refused(tmp_path):
    with pytest.raises(bundle.BundleError, match="no such bundle folder"):
        _load(tmp_path / "none")
    folder = _save(tmp_path / "b")
    other = _save(tmp_path / "c", TinyConfig(gain=3.0), params=_params(TinyConfig()))
    params_path = folder / bundle.PARAMS
    params_path.write_bytes(b"")
    with pytest.raises(bundle.BundleError, match=r"params.npz: sha256 differs"):
        _load(folder)
    params_path.unlink()
    with pytest.raises(bundle.BundleError, match=r"params.npz: missing"):
        _load(folder)
    (other / bundle.MANIFEST).write_text("{not json")
    with pytest.raises(bundle.BundleError, match=r"bundle.json: not readable JSON"):
        _load(other)


def test_save_refuses_parameters_that_do_not_fit_the_config(tmp_path):
    with pytest.raises(bundle.BundleError, match=r"params/layer1/bias: missing"):
        params = _params(TinyConfig())
        del params["params"]["layer1"]["bias"]
        _save(tmp_path / "b", params=params)
    assert not (tmp_path / "b").exists()


class _Planted:
    """Unpickling this makes a folder: the proof that code ran."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def test_a_planted_pickle_is_refused_without_running(tmp_path):
    folder = _save(tmp_path / "b")
    marker = tmp_path / "pwned"
    planted = np.empty(1, object)
    planted[0] = _Planted(str(marker))
    flat = bundle.flatten(_params(TinyConfig()))
    flat["params/layer0/bias"] = planted
    np.savez(folder / bundle.PARAMS, **flat, allow_pickle=True)
    digest = files.sha256(folder / bundle.PARAMS)  # a sender can forge the manifest too
    _edit_manifest(folder, lambda m: m["params"].update(sha256=digest))
    with pytest.raises(bundle.BundleError, match=r"params.npz: not a data-only .npz"):
        _load(folder)
    assert not marker.exists()
    with np.load(folder / bundle.PARAMS, allow_pickle=True) as archive:  # the plant works
        archive["params/layer0/bias"]
    assert marker.exists()


def test_a_crafted_json_imports_nothing(tmp_path, monkeypatch):
    """Names of code in the JSON are only values: checked and refused, never imported."""
    marker = tmp_path / "imported"
    (tmp_path / "planted_module.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nclass Evil: pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = _save(tmp_path / "b")
    crafted = {"py/object": "planted_module.Evil", "__class__": "planted_module.Evil"}
    edits = [
        (lambda m: m.update(model_config_type="planted_module.Evil"), "model_config_type"),
        (lambda m: m["model_config"].update(crafted), "model_config.__class__: not a field"),
        (lambda m: m["model_config"].update(layers=[crafted]), r"layers\[0\].__class__"),
        (
            lambda m: m["model_config"].update(inputs=crafted),
            "model_config.inputs: expected an int",
        ),
        (lambda m: m.update(decoding="planted_module"), "decoding: expected an object"),
    ]
    for edit, message in edits:
        _save(tmp_path / "b")
        _edit_manifest(folder, edit)
        with pytest.raises(bundle.BundleError, match=message):
            _load(folder)
    assert "planted_module" not in sys.modules
    assert not marker.exists()


@dataclasses.dataclass(frozen=True)
class Unstorable:
    weights: dict = dataclasses.field(default_factory=dict)


def test_save_refuses_a_config_that_would_not_load_back(tmp_path):
    with pytest.raises(bundle.BundleError, match="model_config.weights: unsupported field type"):
        bundle.save(
            tmp_path / "b",
            task="tiny",
            params=_params(TinyConfig()),
            model_config=Unstorable(),
            features=FeatureConfig(),
            labels=("a",),
            decoding=TinyDecode(),
            corpus="",
        )
    assert not (tmp_path / "b").exists()


def test_an_older_format_is_migrated_field_by_field(tmp_path, monkeypatch):
    """With a format 3 whose steps add a field (1 -> 2) and rename one (2 -> 3), a format
    1 bundle loads as it did, migrated in memory (its folder untouched); what a step
    leaves missing is named, and a step that fails names the versions."""
    folder = _save(tmp_path / "b")
    want_params, want = _load(folder)
    _edit_manifest(folder, lambda m: m.update(source=m.pop("corpus")))  # format 1's name
    written = (folder / bundle.MANIFEST).read_bytes()

    def add_notes(manifest: dict) -> dict:
        return {**manifest, "notes": ""}

    def rename_source(manifest: dict) -> dict:
        manifest["corpus"] = manifest.pop("source")
        return manifest

    monkeypatch.setattr(bundle, "FORMAT_VERSION", 3)
    monkeypatch.setattr(bundle, "_FIELDS", (*bundle._FIELDS, "notes"))
    monkeypatch.setattr(bundle, "MIGRATIONS", {1: add_notes, 2: rename_source})
    params, info = _load(folder)
    assert (info.corpus, info.labels, info.model_config) == (
        want.corpus,
        want.labels,
        want.model_config,
    )
    assert info.format_version == 1  # what the file is
    got, expected = bundle.flatten(params), bundle.flatten(want_params)
    assert sorted(got) == sorted(expected)
    for name, array in got.items():
        np.testing.assert_array_equal(array, expected[name])
    assert (folder / bundle.MANIFEST).read_bytes() == written
    monkeypatch.setattr(bundle, "MIGRATIONS", {1: add_notes, 2: add_notes})
    with pytest.raises(bundle.BundleError, match="corpus: missing"):
        _load(folder)
    monkeypatch.setattr(bundle, "MIGRATIONS", {1: add_notes, 2: lambda m: m.pop("nothing")})
    with pytest.raises(bundle.BundleError, match="format_version 2 -> 3: cannot migrate"):
        _load(folder)
    monkeypatch.setattr(bundle, "MIGRATIONS", {1: add_notes, 2: lambda m: [m]})
    with pytest.raises(bundle.BundleError, match="the step gave a list, not a dict"):
        _load(folder)
