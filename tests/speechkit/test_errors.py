"""speechkit.errors: every named input error is an InvalidInput, and the runners turn
one into a line on stderr with exit status 2 (issue 31 item 8)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cskws_jax.datasets import folder_kws, libritop20
from experiments.scoring import corpora
from multiqt_jax.datasets import annotated_calls
from speechkit import audio_io, bundle, corpus, errors, stream_inputs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "error",
    [
        audio_io.AudioFileError,
        bundle.BundleError,
        corpus.CacheItemError,
        stream_inputs.InputError,
        folder_kws.FolderKwsError,
        libritop20.LibriSpeechError,
        annotated_calls.AnnotationError,
        corpora.EvaluationError,
    ],
)
def test_named_input_errors_are_invalid_input(error):
    assert issubclass(error, errors.InvalidInput) and issubclass(error, ValueError)


def test_a_runner_ends_an_invalid_input_with_one_line_and_status_2(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.evaluate",
            f"--bundle={tmp_path / 'none'}",
            "--dataset=synthetic_kws/smoke",
            f"--workdir={tmp_path / 'out'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == errors.EXIT_USAGE
    assert f"error: {tmp_path / 'none'}: no such bundle folder" in done.stderr
    assert "Traceback" not in done.stderr
