"""A `smoke` build of every embedded corpus, shared by the tests that read them, and one
persistent JAX compilation cache for the session.

The experiment tests start many processes (runners, resumed runs, device counts) that
compile the same programs; with a cache shared through the environment each is compiled
once. Cached executables are the ones XLA would build again, so no number changes (the
tests that compare runs with the reference run still do so exactly).
"""

import atexit
import os
import shutil
import tempfile

import pytest

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:  # before jax is first imported
    _cache = tempfile.mkdtemp(prefix="jax-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

from experiments import build_data


@pytest.fixture(scope="session")
def smoke_build(tmp_path_factory):
    """(data_dir, report) of one smoke build of all corpora (~25 s: real synthesis,
    alignment and recognition)."""
    data_dir = tmp_path_factory.mktemp("tfds")
    return data_dir, build_data.build("smoke", str(data_dir))


@pytest.fixture(scope="session")
def tiny_multiqt_config():
    """make(**overrides) -> a MultiQTConfig of the questions task small enough to build in
    a second (two 8-channel layers per encoder, one output every 40 ms), for the bundle,
    export, tracking and evaluation tests."""
    from multiqt_jax import labels, model

    small = dict(
        num_classes=len(labels.QUESTION_CLASSES),
        audio_channels=(8, 8),
        audio_kernels=(3, 3),
        audio_strides=(2, 2),
        audio_dilations=(1, 1),
        text_channels=(8, 8),
        text_kernels=(3, 3),
        text_strides=(2, 1),
        text_dilations=(1, 1),
        dense=(8,),
    )
    return lambda **overrides: model.MultiQTConfig(**{**small, **overrides})


@pytest.fixture
def source_tree(tmp_path):
    """write(files, packages) -> tmp_path: an empty `__init__.py` for each package, then
    each {relative path: source text} of `files`; a small tree for the source scanners."""

    def write(files: dict[str, str], packages) -> object:
        for package in packages:
            (tmp_path / package).mkdir(exist_ok=True)
            (tmp_path / package / "__init__.py").write_text("")
        for relative, text in files.items():
            (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / relative).write_text(text)
        return tmp_path

    return write
