"""experiments.cskws on smoke data: all three models trained, scored and timed."""

import json

import numpy as np
import pytest

from experiments import cskws


@pytest.mark.slow
def test_smoke_kws_experiment_writes_results(run_experiment, tmp_path):
    done = run_experiment(
        "cskws", tmp_path, "--config.build_missing=False", "--config.train.steps=20"
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["models"]) == set(cskws.MODELS)
    assert len(results["keywords"]) == 20
    for name, scores in results["models"].items():
        for key in (*cskws.REPORTED, "RTF"):
            assert np.isfinite(scores[key]), (name, key)
        assert 0 <= scores["mAP"] <= 1 and scores["RTF"] > 0
        saved = np.load(tmp_path / name / "detections.npz")
        assert saved["detection_score"].shape == saved["detection_valid"].shape
        curves = json.loads((tmp_path / name / "detection_curves.json").read_text())
        assert len(curves["pr"]["recall"]) == len(curves["pr"]["precision"]) > 0
        assert curves["det"]["miss_rate"][-1] <= 1
        assert (tmp_path / name / "tensorboard").is_dir()
    assert "sliding_window" in done.stdout and "RTF" in done.stdout
