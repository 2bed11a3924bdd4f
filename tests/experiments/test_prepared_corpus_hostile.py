"""A prepared corpus someone sent must not run code (issue 59, item 1): TFDS imports the
module any `"pythonClassName"` of a features.json names when it rebuilds a corpus from
its files, and `python -m` puts the current folder on the import path. Every case plants
a `payload.py` that leaves a marker file if it ever runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cskws_jax.datasets import folder_kws  # noqa: F401 (registers the builder)
from speechkit import files, prepared

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cskws_jax" / "models" / "afkws-top20"
TENSOR = "tensorflow_datasets.core.features.tensor_feature.Tensor"
FEATURES_DICT = "tensorflow_datasets.core.features.features_dict.FeaturesDict"


def _plant(root: Path, config: str = "shipped", *, class_name: str = "payload.Evil", **info):
    """A prepared-looking `folder_kws/<config>` under root/tfds whose features.json names
    `class_name`, and root/payload.py that writes root/RAN when imported."""
    (root / "payload.py").write_text(
        f"open({str(root / 'RAN')!r}, 'w').write('ran')\nclass Evil: pass\n"
    )
    version = root / "tfds" / "folder_kws" / config / "1.0.0"
    version.mkdir(parents=True)
    feature = {"pythonClassName": class_name, "tensor": {"shape": {}, "dtype": "float32"}}
    features = {"pythonClassName": FEATURES_DICT, "featuresDict": {"features": {"x": feature}}}
    (version / "features.json").write_text(json.dumps(features))
    identity = {"name": "folder_kws", "moduleName": folder_kws.__name__, **info}
    (version / "dataset_info.json").write_text(json.dumps(identity))
    return root / "tfds"


def test_a_features_json_naming_a_module_is_refused_before_tfds_reads_it(tmp_path, monkeypatch):
    data_dir = _plant(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(prepared.PreparedCorpusError, match=r"payload\.Evil.*not a TFDS feature"):
        prepared.data_source("folder_kws/shipped", data_dir=str(data_dir))
    with pytest.raises(prepared.PreparedCorpusError, match="features.json"):
        prepared.builder("folder_kws/shipped", data_dir=str(data_dir))
    assert not (tmp_path / "RAN").exists()


@pytest.mark.parametrize(
    "name, message",
    [
        ("folder_kws/absent", "has no config 'absent'.*holds no corpus of that name"),
        ("payload/shipped", "not one of the toolkit's corpus builders"),
        ("mnist/3.0.1", "not one of the toolkit's corpus builders"),
        ("folder_kws", "expected a corpus name"),
        ("folder_kws/shipped:1.0.0", "expected a corpus name"),
        ("folder_kws/..", "expected a corpus name"),
    ],
)
def test_only_the_projects_builders_and_configs_are_opened(tmp_path, monkeypatch, name, message):
    data_dir = _plant(tmp_path, "planted", class_name=TENSOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(prepared.PreparedCorpusError, match=message):
        prepared.data_source(name, data_dir=str(data_dir))
    assert not (tmp_path / "RAN").exists()


def test_a_folder_the_projects_builder_wrote_is_read_from_its_checked_files(tmp_path):
    """A config made at run time (own keywords) or a builder whose module is not
    imported: TFDS reads such a corpus from its files, which pass the checks only when a
    project module wrote them and they name TFDS feature classes alone."""
    data_dir = _plant(tmp_path, "made-at-run-time", class_name=TENSOR)
    prepared.check("folder_kws/made-at-run-time", str(data_dir))
    version = data_dir / "unimported" / "cfg" / "1.0.0"
    version.mkdir(parents=True)
    features = {"pythonClassName": FEATURES_DICT, "featuresDict": {"features": {}}}
    (version / "features.json").write_text(json.dumps(features))
    (version / "dataset_info.json").write_text(
        json.dumps({"name": "unimported", "moduleName": "multiqt_jax.datasets.unimported"})
    )
    prepared.check("unimported/cfg", str(data_dir))
    (version / "dataset_info.json").write_text(
        json.dumps({"name": "unimported", "moduleName": "payload"})
    )
    with pytest.raises(prepared.PreparedCorpusError, match="moduleName: 'payload', expected a"):
        prepared.check("unimported/cfg", str(data_dir))


@pytest.mark.parametrize(
    "info, message",
    [({"moduleName": "payload"}, "moduleName: 'payload'"), ({"name": "mnist"}, "name: 'mnist'")],
)
def test_dataset_info_must_be_the_builders_own(tmp_path, info, message):
    data_dir = _plant(tmp_path, class_name=TENSOR, **info)
    with pytest.raises(prepared.PreparedCorpusError, match=message):
        prepared.check("folder_kws/shipped", str(data_dir))


def test_metadata_json_is_read_with_bounds(tmp_path):
    data_dir = _plant(tmp_path, class_name=TENSOR)
    features = data_dir / "folder_kws" / "shipped" / "1.0.0" / "features.json"
    features.unlink()
    features.symlink_to("/dev/zero")
    with pytest.raises(files.JsonFileError, match="not a regular file"):
        prepared.check("folder_kws/shipped", str(data_dir))


def test_class_names_are_found_at_any_depth(tmp_path):
    nested = {"a": [{"b": {"pythonClassName": TENSOR}}, {"c": {"pythonClassName": "os.system"}}]}
    with pytest.raises(prepared.PreparedCorpusError, match=r"a\[1\]\.c\.pythonClassName"):
        prepared.check_feature_classes("features.json", nested)
    prepared.check_feature_classes("features.json", {"pythonClassName": TENSOR})


def test_evaluate_on_a_planted_folder_exits_2_without_running_it(tmp_path):
    """The issue's case: `python -m experiments.evaluate` run from the folder that holds
    the payload (the current folder is on the import path), for a config TFDS would
    rebuild from files and for the registered one."""
    data_dir = _plant(tmp_path, "planted")
    _plant_shipped = data_dir / "folder_kws" / "shipped" / "1.0.0"
    _plant_shipped.mkdir(parents=True)
    for name in ("features.json", "dataset_info.json"):
        source = data_dir / "folder_kws" / "planted" / "1.0.0" / name
        (_plant_shipped / name).write_text(source.read_text())
    for dataset in ("folder_kws/planted", "folder_kws/shipped"):
        run = subprocess.run(
            [sys.executable, "-m", "experiments.evaluate", f"--bundle={SHIPPED}",
             f"--dataset={dataset}", f"--data_dir={data_dir}", f"--workdir={tmp_path / 'w'}"],
            cwd=tmp_path,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"},
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        assert run.returncode == 2, run.stderr[-2000:]
        assert "Traceback" not in run.stderr
        assert dataset in run.stderr
        assert not (tmp_path / "RAN").exists()
