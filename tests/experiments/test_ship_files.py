"""experiments.ship_files: a shipped model's export folder and sample, written again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import soundfile

from experiments import ship_files
from multiqt_jax import export as calls_export
from multiqt_jax import models as calls_models
from speechkit import export_format, shipped

pytestmark = pytest.mark.early  # no smoke corpus

NAME = "multiqt-questions-audio"
_VOLATILE = ("modules", "onnx_modules", "fields_sha256")  # module bytes: of the jax version


def test_the_export_written_again_is_the_shipped_one(tmp_path):
    """The shipped export/ is its bundle's: exporting the bundle again gives the same
    export.json fields, and the folder reads with both backends."""
    folder = tmp_path / NAME
    shutil.copytree(calls_models.path(NAME), folder, ignore=shutil.ignore_patterns("export"))
    (written,) = ship_files.write_parts(str(folder), "multiqt", ("export",))
    assert Path(written) == folder / shipped.EXPORT
    again = json.loads((folder / shipped.EXPORT / export_format.MANIFEST).read_text())
    shipped_manifest = json.loads(
        (Path(calls_models.CATALOGUE.export_path(NAME)) / export_format.MANIFEST).read_text()
    )
    for field in set(again) - set(_VOLATILE):
        assert again[field] == shipped_manifest[field], field
    assert sorted(again["onnx_modules"]) == sorted(shipped_manifest["onnx_modules"])
    for backend in export_format.BACKENDS:
        calls_export.read_folder(written, backend=backend)


def test_the_shipped_samples_say_what_is_in_them():
    """Each shipped sample is 16 kHz mono with facts naming what is spoken, inside it."""
    from cskws_jax import models as kws_models

    for catalogue in (kws_models.CATALOGUE, calls_models.CATALOGUE):
        for name in catalogue.names():
            info = soundfile.info(catalogue.sample(name))
            assert (info.samplerate, info.channels) == (16000, 1)
            facts = json.loads((Path(catalogue.path(name)) / shipped.SAMPLE_FACTS).read_text())
            spoken = facts.get("keywords") or facts.get("questions")
            assert spoken and all(0 <= s < e <= info.duration for _, s, e in spoken), name
