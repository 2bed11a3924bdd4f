"""Fuzzing the JSON a user can be sent (issues 31 and 59): bundle.json, export.json, an
annotated call's `<call>.json` and folder_kws's label files (keywords.json and
`<name>.json`), each mutated at a random place (a value swapped for
another type, a key removed, a huge, non-finite, negative or deeply nested value, a
5000-digit integer). Loading one must succeed or raise the named error
(`speechkit.errors.InvalidInput`), never another exception, and never hang (a 30 s
guard per example).

In the suite the examples are derandomised (the same 40 per document on every run, so a
run fails only for a change in the code); `FUZZ_EXAMPLES=2000 pytest
tests/speechkit/test_json_fuzz.py` draws that many fresh random ones."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import flatbuffers  # noqa: F401  # jax.export serialization: a dependency, never skipped
import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cskws_jax import bundle, model
from cskws_jax import export as kws_export
from cskws_jax.datasets import folder_kws
from multiqt_jax.datasets import annotated_calls
from speechkit import audio_io

from . import json_mutations


@pytest.fixture(scope="module")
def saved(tiny_afkws_config, tmp_path_factory) -> Path:
    """A tiny AF-KWS bundle and its export folder."""
    root = tmp_path_factory.mktemp("fuzz")
    net = model.AfKws(tiny_afkws_config(3))
    params = jax.jit(net.init)(jax.random.key(0), {"audio": np.zeros((1, 16, 64), np.float32)})
    bundle.save(root / "bundle", net, params, ("alpha", "beta", "gamma"))
    assert kws_export.main([str(root / "bundle"), str(root / "export"), "--block-outputs=2"]) == 0
    return root


def _fuzz(source: Path, manifest: str, load, work: Path, data) -> None:
    original = json.loads((source / manifest).read_text())
    text = json_mutations.draw_mutation(data, original)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    (work / manifest).write_text(text)
    json_mutations.reads_or_names_the_error(lambda: load(work))


_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_EXAMPLES or 40,
    derandomize=not _EXAMPLES,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(data=st.data())
def test_bundle_json(saved, tmp_path, data):
    _fuzz(saved / "bundle", "bundle.json", bundle.load, tmp_path / "b", data)


@FUZZ
@given(data=st.data())
def test_export_json(saved, tmp_path, data):
    _fuzz(saved / "export", "export.json", kws_export.read_folder, tmp_path / "e", data)


ANNOTATION = {
    "segments": [
        {"label": "address", "start": 0.2, "end": 0.9},
        {"label": "age", "start": 1.0, "end": 1.5},
    ],
    "fold": 2,
    "asr": [{"word": "hello", "start": 0.1, "end": 0.4, "emitted": 0.6}],
}


@FUZZ
@given(data=st.data())
def test_annotation_json(tmp_path, data):
    source = tmp_path / "source"
    source.mkdir(exist_ok=True)
    (source / "c1.json").write_text(json.dumps(ANNOTATION))
    _fuzz(
        source,
        "c1.json",
        lambda work: annotated_calls.read_annotation(str(work / "c1.json"), "questions", 2.0),
        tmp_path / "a",
        data,
    )


LABELS = {
    "a.wav": [{"keyword": "people", "start": 0.1, "end": 0.3}],
    "b.wav": [
        {"keyword": "about", "start": 0.05, "end": 0.2},
        {"keyword": "people", "start": 0.3, "end": 0.45},
    ],
}


@pytest.fixture(scope="module")
def label_folder(tmp_path_factory) -> Path:
    """Two half-second recordings, labelled in keywords.json (folder_kws's shared form)
    and, for a.wav, in its own a.json too (the per-file form, kept aside)."""
    root = tmp_path_factory.mktemp("labels") / "manual"
    root.mkdir()
    rng = np.random.default_rng(0)
    for name in LABELS:
        samples = (0.1 * rng.standard_normal(8000)).astype(np.float32)
        audio_io.write_audio(root / name, samples, 16_000)
    (root / "keywords.json").write_text(json.dumps(LABELS))
    return root


def _records(work: Path) -> None:
    list(folder_kws.folder_records(str(work), ("people", "about")))


@FUZZ
@given(data=st.data())
def test_label_json_shared(label_folder, tmp_path, data):
    _fuzz(label_folder, "keywords.json", _records, tmp_path / "l", data)


@FUZZ
@given(data=st.data())
def test_label_json_per_file(label_folder, tmp_path, data):
    source = tmp_path / "per-file"
    if not source.exists():
        shutil.copytree(label_folder, source)
        (source / "keywords.json").write_text(json.dumps({"b.wav": LABELS["b.wav"]}))
        (source / "a.json").write_text(json.dumps(LABELS["a.wav"]))
    _fuzz(source, "a.json", _records, tmp_path / "l", data)
