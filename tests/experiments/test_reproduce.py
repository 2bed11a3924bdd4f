"""experiments.reproduce, the main job, end to end on smoke data with few models and
steps: both stages run on the one corpus size, and the report and its figures exist."""

import json

import pytest


@pytest.mark.slow
def test_smoke_main_job_writes_the_report(run_experiment, tmp_path):
    done = run_experiment(
        "reproduce",
        tmp_path,
        "--config.multiqt.models=audio,rf",
        "--config.multiqt.num_folds=2",
        "--config.multiqt.train.steps=4",
        "--config.multiqt.train.log_every=2",
        "--config.cskws.models=afkws",
        "--config.cskws.train.steps=4",
        "--config.cskws.train.log_every=2",
    )
    report = (tmp_path / "report.md").read_text()
    assert "# Reproduction report (smoke)" in report
    assert "synthetic_calls/questions-smoke" in report and "synthetic_kws/smoke" in report
    assert "MultiQT (audio only)" in report and "| AF-KWS |" in report
    for figure in ("multiqt_per_class_f1", "multiqt_timeline", "kws_precision_recall"):
        assert (tmp_path / "figures" / f"{figure}.png").stat().st_size > 1000, figure
    multiqt = json.loads((tmp_path / "multiqt" / "results.json").read_text())
    assert set(multiqt["models"]) == {"audio", "rf"} and multiqt["num_folds"] == 2
    cskws = json.loads((tmp_path / "cskws" / "results.json").read_text())
    assert cskws["dataset"] == "synthetic_kws/smoke" and set(cskws["models"]) == {"afkws"}
    assert "stage 4/4: report" in done.stderr
