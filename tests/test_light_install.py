"""The light install (`pip install .[infer]`): detect and track run export folders with
the training stack absent. One subprocess runs the commands with every package of the
`full` extra made unimportable and reports what they printed and which of those
packages got imported; its outputs must be the full install's (in this process)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import soundfile

from cskws_jax import detect
from cskws_jax import export as kws_export
from cskws_jax import models as kws_models
from multiqt_jax import models as calls_models
from multiqt_jax import track
from speechkit import export_format

pytestmark = pytest.mark.early  # no smoke corpus

ROOT = Path(__file__).resolve().parents[1]
FROZEN = ROOT / "tests" / "fixtures" / "frozen"  # bundles and exports of 0.2.0-0.4.0
FULL_ONLY = {
    "flax": "flax",
    "optax": "optax",
    "orbax-checkpoint": "orbax",
    "tensorflow-datasets": "tensorflow_datasets",
    "importlib-resources": "importlib_resources",
    "array-record": "array_record",
    "grain": "grain",
    "ml-collections": "ml_collections",
    "absl-py": "absl",
    "pocketsphinx": "pocketsphinx",
    "scikit-learn": "sklearn",
    "matplotlib": "matplotlib",
    "sequence-layers": "sequence_layers",
    "tensorboardX": "tensorboardX",
    "pyroomacoustics": "pyroomacoustics",
}
"""The `full` extra's distributions -> the module each is imported as."""

# Runs [(module, argv), ...] with FULL_ONLY's modules unimportable; prints JSON: each run's
# exit status, stdout and stderr, and the blocked modules that got imported.
RUNNER = """
import contextlib, importlib, importlib.abc, io, json, sys
blocked, runs = json.loads(sys.argv[1])

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Blocked())
results = []
for module, argv in runs:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = importlib.import_module(module).main(argv)
    results.append([status, out.getvalue(), err.getvalue()])
loaded = sorted({m.partition(".")[0] for m in sys.modules} & set(blocked))
print(json.dumps({"results": results, "loaded": loaded}))
"""


def _run_light(*runs: tuple[str, list]) -> tuple[list, list]:
    """([(status, stdout, stderr)] of each (module, argv) run light, imported modules)."""
    spec = json.dumps([sorted(FULL_ONLY.values()), [[m, list(map(str, a))] for m, a in runs]])
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, spec],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    return report["results"], report["loaded"]


def test_the_blocked_modules_are_the_full_extra():
    """FULL_ONLY lists exactly what the `full` extra adds (so a new training dependency
    is blocked here too), and none of it is a dependency of the light install."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    full = [_name(requirement) for requirement in project["optional-dependencies"]["full"]]
    assert sorted(full) == sorted(FULL_ONLY)
    assert not {_name(requirement) for requirement in project["dependencies"]} & set(FULL_ONLY)


def _name(requirement: str) -> str:
    return re.split(r"[<>=\[; ]", requirement, maxsplit=1)[0]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """(folder of the frozen bundles and exports: an AF-KWS bundle and export, and the
    export of an audio + text MultiQT; a 3 s 16 kHz wav)."""
    wav = tmp_path_factory.mktemp("light") / "call.wav"
    rng = np.random.default_rng(0)
    soundfile.write(wav, 0.1 * rng.normal(size=3 * 16000) * np.sin(np.arange(48000) / 900), 16000)
    return FROZEN, wav


def _full(main, argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(map(str, argv)))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_exports_run_light_as_they_run_full(exports, capsys):
    """detect and track (a text model with --no-text), both backends, print in the light
    install what they print in the full one, and import none of the training stack."""
    root, wav = exports
    runs = [
        ("cskws_jax.detect", [root / "cskws-export", wav, "--format=jsonl"]),
        ("cskws_jax.detect", [root / "cskws-export", wav, "--format=jsonl", "--backend=onnx"]),
        ("cskws_jax.detect", [root / "cskws-export-v5", wav, "--format=jsonl"]),
        ("cskws_jax.detect", [root / "cskws-export-v6", wav, "--format=jsonl", "--backend=onnx"]),
        ("multiqt_jax.track", [root / "multiqt-export", wav, "--format=jsonl", "--no-text"]),
        ("multiqt_jax.track", [root / "multiqt-export", wav, "--backend=onnx", "--no-text"]),
    ]
    light, loaded = _run_light(*runs)
    assert loaded == []
    mains = {"cskws_jax.detect": detect.main, "multiqt_jax.track": track.main}
    for (module, argv), (status, out, _) in zip(runs, light, strict=True):
        assert (status, out) == _full(mains[module], argv, capsys)[:2], argv
    assert any(len(out.splitlines()) > 1 for _, out, _ in light[:2])  # detections: not vacuous


def test_shipped_models_run_light_as_they_run_full(capsys):
    """--model NAME runs the shipped model's export where the model code is missing, and
    prints on its shipped sample what the full install prints with the bundle; both
    backends."""
    detector, tracker = kws_models.CATALOGUE, calls_models.CATALOGUE
    runs = [
        ("cskws_jax.detect", ["--model", "afkws-top20", detector.sample("afkws-top20")]),
        (
            "cskws_jax.detect",
            ["--model", "afkws-top20", detector.sample("afkws-top20"), "--all-peaks"],
        ),
        (
            "multiqt_jax.track",
            ["--model", "multiqt-questions-audio", tracker.sample("multiqt-questions-audio")],
        ),
        (
            "cskws_jax.detect",
            [
                *("--model", "afkws-top20", detector.sample("afkws-top20")),
                *("--backend", "onnx", "--all-peaks"),
            ],
        ),
    ]
    runs = [(module, [*argv, "--format=csv"]) for module, argv in runs]
    light, loaded = _run_light(*runs)
    assert loaded == []
    mains = {"cskws_jax.detect": detect.main, "multiqt_jax.track": track.main}
    for (module, argv), (status, out, err) in zip(runs, light, strict=True):
        assert status == 0, err
        assert (status, out) == _full(mains[module], argv, capsys)[:2], argv
    assert all(len(out.splitlines()) > 2 for _, out, _ in light[1:])  # peaks and segments


def test_shipped_models_name_their_export_without_the_model_code():
    """`Catalogue.runnable`: the bundle where the model code imports and the backend is
    jax, else the export folder, which holds what the light install reads."""
    for catalogue in (kws_models.CATALOGUE, calls_models.CATALOGUE):
        for name in catalogue.names():
            assert catalogue.runnable(name) == catalogue.path(name)
            assert catalogue.runnable(name, "onnx") == catalogue.export_path(name)
            assert export_format.is_folder(catalogue.export_path(name))
            assert Path(catalogue.sample(name)).is_file()


def test_what_needs_the_model_code_says_what_to_install(exports, tmp_path):
    """A bundle (run or exported), a text model's text and an export written before the
    model facts were stored (format_version 3) stop with exit status 2 and the install
    that runs them."""
    root, wav = exports
    old = tmp_path / "old-export"
    old.mkdir()
    for path in (root / "cskws-export").iterdir():
        (old / path.name).write_bytes(path.read_bytes())
    payload = json.loads((old / export_format.MANIFEST).read_text())
    del payload["model_facts"], payload["fields_sha256"]
    payload["format_version"] = 3
    payload["fields_sha256"] = export_format.fields_sha256(payload)
    (old / export_format.MANIFEST).write_text(json.dumps(payload))
    kws_export.read_folder(old)  # the full install reads it, from the model code
    light, _ = _run_light(
        ("cskws_jax.detect", [root / "cskws-bundle", wav]),
        ("multiqt_jax.track", [root / "multiqt-export", wav]),
        ("cskws_jax.detect", [old, wav]),
        ("cskws_jax.export", [root / "cskws-bundle", tmp_path / "again"]),
    )
    assert [status for status, _, _ in light] == [2, 2, 2, 2]
    assert not (tmp_path / "again").exists()
    install = f"pip install '{ROOT}[full]'"  # the checkout these tests run from
    bundle_error, text_error, old_error, export_error = (err for _, _, err in light)
    assert f"{root / 'cskws-bundle'}: exporting a bundle runs with the model code" in export_error
    assert (
        f"{root / 'cskws-bundle'}: a bundle runs with the model code, which needs" in bundle_error
    )
    assert "the model reads text" in text_error and "--no-text" in text_error
    assert "format_version: 3; an export written before version 4" in old_error
    assert all(install in err for _, _, err in light)
