"""The streaming API in the light install (`pip install .[infer]`): with every package of
the `full` extra unimportable (tests/test_light_install.py's subprocess, `_run_light`),
`import cskws_jax, multiqt_jax` loads no jax, the shipped models run by name from their
exports with both backends, and they return what the same exports return in the full
install (this process)."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import soundfile

import cskws_jax
import multiqt_jax
from speechkit import dsp, tts

from . import test_light_install

pytestmark = pytest.mark.early  # no smoke corpus

CHECK = '''
"""Run light by tests/test_api_light.py (its `main`), and full in the test's process."""
import dataclasses
import json
import sys

import soundfile

MODELS = {  # name -> (API, its arguments)
    "afkws-top20": ("Detector", {}),
    "multiqt-questions-audio": ("Tracker", {}),
    "multiqt-questions": ("Tracker", {"text": "none"}),
}


def streams(wav, folders=None):
    """'name backend' -> {"model": the folder that ran, "found": what accept and close
    returned, as dicts} for each of MODELS with each backend, fed `wav` in float32
    chunks of 1,000 samples at its rate; `folders` ('name backend' -> folder) runs those
    folders instead of the names."""
    import cskws_jax
    import multiqt_jax

    data, rate = soundfile.read(wav, dtype="float32")
    found = {}
    for name, (api, options) in MODELS.items():
        for backend in ("jax", "onnx"):
            key = f"{name} {backend}"
            model = folders[key] if folders else name
            package = cskws_jax if api == "Detector" else multiqt_jax
            stream = getattr(package, api)(model, sample_rate=rate, backend=backend, **options)
            items = []
            for begin in range(0, len(data), 1_000):
                items += stream.accept(data[begin : begin + 1_000])
            items += stream.close()
            found[key] = {"model": stream.model, "found": [dataclasses.asdict(i) for i in items]}
    return found


def main(argv):
    import cskws_jax  # noqa: F401
    import multiqt_jax  # noqa: F401

    imported = [name for name in ("jax", "onnxruntime") if name in sys.modules]
    print(json.dumps({"imported": imported, "streams": streams(argv[0])}))
    return 0
'''
"""The module `_run_light` runs, and this process runs too: one code for both."""


@pytest.fixture(scope="module")
def wav(tmp_path_factory):
    """A call with keywords and a question, at 22.05 kHz."""
    path = tmp_path_factory.mktemp("api-light") / "call.wav"
    speech = tts.synthesize(
        "about twenty people. what is the address?", tts.EspeakVoice(variant="f2")
    ).waveform
    soundfile.write(path, dsp.resample(speech, 16_000, 22_050), 22_050)
    return path


def _check_module(folder):
    """CHECK written to `folder`/api_light_check.py and imported here."""
    path = folder / "api_light_check.py"
    path.write_text(CHECK)
    spec = importlib.util.spec_from_file_location("api_light_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_runs_the_shipped_models_light(wav, tmp_path, monkeypatch):
    check = _check_module(tmp_path)
    paths = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))  # the subprocess finds it
    [(status, out, err)], loaded = test_light_install._run_light(("api_light_check", [wav]))
    assert status == 0, err
    assert loaded == []  # none of the full install
    report = json.loads(out)
    assert report["imported"] == []  # the packages import light, the API on first use
    light = report["streams"]
    for key, run in light.items():
        name = key.split()[0]
        package = cskws_jax if name.startswith("afkws") else multiqt_jax
        assert run["model"] == package.models.CATALOGUE.export_path(name)
    full = check.streams(str(wav), {key: run["model"] for key, run in light.items()})
    assert light == json.loads(json.dumps(full))
    assert all(run["found"] for run in light.values())  # not vacuous
