"""experiments.cskws on smoke data: all three models trained, scored and timed."""

import json
import subprocess
import sys

import numpy as np
import pytest

from experiments import cskws


@pytest.mark.slow
def test_smoke_kws_experiment_writes_results(smoke_build, tmp_path):
    data_dir, _ = smoke_build
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.cskws",
            "--config=experiments/configs/cskws.py:smoke",
            f"--workdir={tmp_path}",
            f"--config.data_dir={data_dir}",
            "--config.build_missing=False",
            "--config.train.steps=20",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["models"]) == set(cskws.MODELS)
    assert len(results["keywords"]) == 20
    for name, scores in results["models"].items():
        for key in (*cskws.REPORTED, "RTF"):
            assert np.isfinite(scores[key]), (name, key)
        assert 0 <= scores["mAP"] <= 1 and scores["RTF"] > 0
        saved = np.load(tmp_path / name / "detections.npz")
        assert saved["detection_score"].shape == saved["detection_valid"].shape
        assert (tmp_path / name / "tensorboard").is_dir()
    assert "sliding_window" in done.stdout and "RTF" in done.stdout
