"""A `smoke` build of every embedded corpus, shared by the tests (and xdist workers) that
read them, and one persistent JAX compilation cache for the session.

The experiment tests start many processes (runners, resumed runs, device counts) that
compile the same programs; with a cache shared through the environment each is compiled
once. Cached executables are the ones XLA would build again, so no number changes (the
tests that compare runs with the reference run still do so exactly).
"""

import atexit
import fcntl
import os
import shutil
import tempfile

import pytest

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:  # before jax is first imported
    _cache = tempfile.mkdtemp(prefix="jax-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
    # Every program, however fast it compiles: a smoke run in a subprocess compiles ~130
    # small ones (~3 s) that the next run then reads back (~1 s).
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

from experiments import build_data


def pytest_collection_modifyitems(session, config, items):
    """Test files with end-to-end (`slow`) tests first, the rest after them, each in
    collection order: xdist (`--dist loadfile --no-loadscope-reorder`, see the Makefile)
    hands a worker the next file as it finishes one, so the long files start early and
    the short ones fill in at the end, instead of one long file running alone last.

    One exception: files marked `early` (long, and needing no smoke corpus) go second.
    The first file's worker builds the smoke corpora (~30 s, `smoke_build`); the next
    worker works through an `early` file meanwhile instead of waiting on the build."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    early_files = {item.path for item in items if item.get_closest_marker("early")}
    first = next((item.path for item in items if item.path in slow_files), None)

    def rank(item) -> int:
        if item.path == first:
            return 0
        if item.path in early_files:
            return 1
        return 2 if item.path in slow_files else 3

    items.sort(key=rank)  # a stable sort: collection order within a rank


@pytest.fixture(scope="session")
def smoke_build(tmp_path_factory):
    """(data_dir, report) of one smoke build of all corpora (~40 s: real synthesis,
    alignment and recognition), shared by the run's xdist workers: the first to get
    here builds, the others wait on a file lock and find the corpora built (the report
    keeps the first build's times)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    data_dir = root / "smoke-tfds"
    with open(root / "smoke-tfds.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return data_dir, build_data.build("smoke", str(data_dir))


@pytest.fixture(scope="session")
def keyword_free_smoke(smoke_build):
    """The `keyword_free/smoke` builder, prepared once per run in smoke_build's data_dir
    (~10 s; a file lock as for smoke_build)."""
    from cskws_jax.datasets import keyword_free

    data_dir, _ = smoke_build
    with open(data_dir.parent / "keyword-free-smoke.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        builder = keyword_free.KeywordFree(config="smoke", data_dir=str(data_dir))
        if not builder.is_prepared():
            builder.download_and_prepare()
        return builder


@pytest.fixture(scope="session")
def tiny_afkws_config():
    """make(num_keywords) -> an AfKwsConfig small enough to build in a second (8-channel
    stem, two 8-channel stages, output stride 4), for the bundle, detection, export and
    evaluation tests."""
    from cskws_jax import model

    return lambda num_keywords: model.AfKwsConfig(
        num_keywords=num_keywords,
        stem_channels=8,
        kernel=3,
        stages=(model.Stage(8, 2, 1), model.Stage(8, 2, 1)),
        head_channels=8,
        delay=2,
    )


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
        modality_dropout=0.0,  # tests that want it set it (the default 0.2 is the runner's)
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


@pytest.fixture
def bad_audio_folder():
    """make(root, write_good) -> {name: what its error says}: the folder `root` made with
    one good file, `a_good.flac` (written by `write_good(path)`), bad ones (empty,
    silent, a non-finite sample, not audio) and `notes.txt` (no audio suffix), for the
    tests of the streaming command lines' bad inputs."""
    import numpy as np
    import soundfile

    def make(root, write_good) -> dict[str, str]:
        root.mkdir()
        write_good(root / "a_good.flac")
        (root / "b_empty.wav").write_bytes(b"")
        soundfile.write(root / "c_silent.wav", np.zeros(16000), 16000)
        nan = np.full(16000, 0.1, np.float32)
        nan[100] = np.nan
        soundfile.write(root / "d_nan.wav", nan, 16000, subtype="FLOAT")
        (root / "e_text.ogg").write_text("not audio")
        (root / "notes.txt").write_text("ignored: not an audio suffix")
        return {
            "b_empty.wav": "is empty",
            "c_silent.wav": "silent",
            "d_nan.wav": "non-finite sample",
            "e_text.ogg": "not a readable audio file",
        }

    return make


@pytest.fixture
def run_module():
    """run(module, *args) -> its CompletedProcess (text): `python -m module args` run from
    the repository root, checked to exit 0 (killed after 120 s: a hung command line)."""
    import pathlib
    import subprocess
    import sys

    def run(module: str, *args):
        done = subprocess.run(
            [sys.executable, "-m", module, *map(str, args)],
            cwd=pathlib.Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done

    return run
