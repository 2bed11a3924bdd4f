"""experiments.reproduce, the main job, end to end on smoke data: MultiQT with few models
and steps, all three CS-KWS models trained, scored, timed and saved (this run stands in
for a separate run of experiments.cskws, which the main job calls as it is), one corpus
size for both stages, and the report with its figures."""

import json

import numpy as np
import pytest

from experiments import cskws


@pytest.mark.slow
def test_smoke_main_job_writes_results_and_the_report(run_experiment, tmp_path):
    done = run_experiment(
        "reproduce",
        tmp_path,
        "--config.multiqt.models=audio,rf",
        "--config.multiqt.num_folds=2",
        "--config.multiqt.train.steps=4",
        "--config.multiqt.train.log_every=2",
        "--config.cskws.train.steps=20",
    )
    report = (tmp_path / "report.md").read_text()
    assert "# Reproduction report (smoke)" in report
    assert "synthetic_calls/questions-smoke" in report and "synthetic_kws/smoke" in report
    assert "MultiQT (audio only)" in report and "| AF-KWS |" in report
    for figure in ("multiqt_per_class_f1", "multiqt_timeline", "kws_precision_recall"):
        assert (tmp_path / "figures" / f"{figure}.png").stat().st_size > 1000, figure
    multiqt = json.loads((tmp_path / "multiqt" / "results.json").read_text())
    assert set(multiqt["models"]) == {"audio", "rf"} and multiqt["num_folds"] == 2
    assert "stage 4/4: report" in done.stderr

    kws = tmp_path / "cskws"
    results = json.loads((kws / "results.json").read_text())
    assert results["dataset"] == "synthetic_kws/smoke" and len(results["keywords"]) == 20
    assert set(results["models"]) == set(cskws.MODELS)
    for name, scores in results["models"].items():
        for key in (*cskws.REPORTED, "RTF"):
            assert np.isfinite(scores[key]), (name, key)
        assert 0 <= scores["mAP"] <= 1 and scores["RTF"] > 0
        saved = np.load(kws / name / "detections.npz")
        assert saved["detection_score"].shape == saved["detection_valid"].shape
        curves = json.loads((kws / name / "detection_curves.json").read_text())
        assert len(curves["pr"]["recall"]) == len(curves["pr"]["precision"]) > 0
        assert curves["det"]["miss_rate"][-1] <= 1
        assert (kws / name / "tensorboard").is_dir()
    assert (kws / "afkws" / "bundle" / "bundle.json").exists()
    assert "sliding_window" in done.stdout and "RTF" in done.stdout
