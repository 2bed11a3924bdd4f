"""experiments.reproduce, the main job, end to end on smoke data: MultiQT with few models
and steps, all three CS-KWS models trained, scored, timed and saved (this run stands in
for a separate run of experiments.cskws, which the main job calls as it is), one corpus
size for both stages, and the report with its figures; and the report's tables and
figures (`experiments.report.reproduce_md`) from made-up results."""

import json

import numpy as np
import pytest
import soundfile

from cskws_jax import bundle, detect
from cskws_jax import export as kws_export
from cskws_jax import operating_points as op
from experiments import common, cskws, reproduce
from experiments.configs import cskws as cskws_config
from experiments.configs import reproduce as reproduce_config
from experiments.report import models, reproduce_md
from experiments.scoring import bundles
from experiments.scoring import keywords as kws_scoring
from multiqt_jax import labels, track
from speechkit import files, tts


@pytest.mark.slow
def test_smoke_main_job_writes_results_and_the_report(
    run_experiment, tmp_path, tmp_path_factory, check_multiqt_heldout, capsys
):
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
    figures = ("multiqt_per_class_f1", "multiqt_timeline", "kws_precision_recall", "kws_det")
    for figure in figures:
        assert (tmp_path / "figures" / f"{figure}.png").stat().st_size > 1000, figure
    multiqt = json.loads((tmp_path / "multiqt" / "results.json").read_text())
    assert set(multiqt["models"]) == {"audio", "rf"} and multiqt["num_folds"] == 2
    assert multiqt["text_recogniser"] == "ctc_posteriors" and multiqt["text_scores"]["words"] > 0
    posteriors = "Text input: the causal 20 ms character posteriors of the CTC character"
    assert posteriors in report and "its greedy words on the calls: WER" in report
    for summary in multiqt["models"].values():
        check_multiqt_heldout(summary, 2)
    assert report.count("### In-engine vs held-out engine") == 3
    engine = multiqt["heldout_engine"]
    assert f"The held-out engine is `{engine}`" in report
    assert "| MultiQT (audio only) | " in report.split("### In-engine vs held-out engine")[1]
    assert "stage 5/5: report" in done.stderr
    # The symptoms task: its own run, section and figure, and what it had to learn from.
    symptoms = json.loads((tmp_path / "multiqt-symptoms" / "results.json").read_text())
    assert symptoms["task"] == "symptoms" and set(symptoms["models"]) == {"audio", "rf"}
    assert "## MultiQT: symptoms, 2-fold cross-validation" in report
    assert "What there is to learn from: the symptoms task has" in report
    assert (tmp_path / "figures" / "multiqt_symptoms_per_class_f1.png").stat().st_size > 1000
    assert "## Studies: when the papers' claims hold" in report and "Not run yet" in report
    assert "so FRR@5 allows 0 false alarm(s)" in report  # a smoke test split of minutes

    kws = tmp_path / "cskws"
    results = json.loads((kws / "results.json").read_text())
    assert results["dataset"] == "synthetic_kws/smoke" and len(results["keywords"]) == 20
    assert set(results["models"]) == set(cskws.MODELS)
    for name, scores in results["models"].items():
        for key in (*kws_scoring.REPORTED, "RTF"):
            assert np.isfinite(scores[key]), (name, key)
        assert 0 <= scores["mAP"] <= 1 and scores["RTF"] > 0
        heldout = scores["heldout"]
        assert set(heldout) == {
            *kws_scoring.OTHER_SPLIT_REPORTED,
            "intervals",
            "allowed_false_alarms",
        }
        assert heldout["test_hours"] > 0
        check_intervals(heldout)  # over the held-out utterances
        for key in kws_scoring.REPORTED:
            assert 0 <= heldout[key] <= 1, (name, key)
        if scores["mAP"] == 0:
            assert scores["transfer"] is None
        else:
            assert scores["transfer"] == pytest.approx(heldout["mAP"] / scores["mAP"])
        assert (kws / name / "heldout" / "detections.npz").exists()
        assert (kws / name / "heldout" / "detection_curves.json").exists()
        # The saved scores keep them, so a resumed run does not recompute or lose them.
        saved = json.loads((kws / name / "scores.json").read_text())
        assert saved["heldout"] == heldout and cskws.reusable(saved, ["heldout"])
        assert saved["intervals"] == scores["intervals"]
        saved = np.load(kws / name / "detections.npz")
        assert saved["detection_score"].shape == saved["detection_valid"].shape
        assert saved["durations"].shape == saved["truth_valid"].shape[:1]
        assert saved["durations"].sum() / 3600 == pytest.approx(scores["test_hours"])
        check_intervals(scores)
        curves = json.loads((kws / name / "detection_curves.json").read_text())
        assert len(curves["pr"]["recall"]) == len(curves["pr"]["precision"]) > 0
        assert curves["det"]["miss_rate"][-1] <= 1
        assert (kws / name / "tensorboard").is_dir()
        check_operating_points(kws / name, scores, results["keywords"])
    assert (kws / "afkws" / "bundle" / "bundle.json").exists()
    assert "sliding_window" in done.stdout and "RTF" in done.stdout
    assert "heldout mAP" in done.stdout and "transfer" in done.stdout
    assert results["heldout_engine"] == multiqt["heldout_engine"]
    afkws = results["models"]["afkws"]
    low, high = afkws["intervals"]["mAP"]
    mean_ap = f"{afkws['mAP']:.3f} [{low:.2f}, {high:.2f}] (paper 0.86)"
    assert f"| {models.KWS_NAMES['afkws']} | {mean_ap} |" in report
    assert "95 % percentile bootstrap interval over test utterances" in report
    allowed = afkws["allowed_false_alarms"]["FRR@5"]
    assert f"FRR@5 (5 FA/h) allows {allowed:.2f}, i.e. at most " in report
    # The intervals come from the saved test detections alone: recomputed, they agree.
    config = cskws_config.get_config("smoke")
    assert kws_scoring.score_intervals(
        str(kws / "afkws"), 20, resamples=config.eval.bootstrap_resamples, seed=config.seed
    ) == {key: afkws[key] for key in ("intervals", "allowed_false_alarms")}
    det_part = report.split("### Operating points (DET)")[1]
    for name, scores in results["models"].items():
        entry = scores["operating_points"]["budgets"][1]
        row = f"| {models.KWS_NAMES[name]} | {entry['fa_per_hour']:g} | "
        assert (
            row + f"{entry['allowed_false_alarms']} ({entry['allowed_per_keyword']}) |" in det_part
        )
    # Only the AF-KWS models have bundles, and each stores the operating points of its scores.
    assert not (kws / "sliding_window" / "bundle").exists()
    check_the_trained_models_work_outside_the_runner(
        tmp_path, tmp_path_factory.mktemp("use"), capsys
    )


def check_the_trained_models_work_outside_the_runner(workdir, tmp, capsys) -> None:
    """The main job's trained bundles, as a user meets them: detect keywords in a
    synthesised recording (from the bundle, at a stored operating point, and from its
    export, which detects the same), track questions in it, and score the detector on a
    folder corpus of that recording."""
    speech = tts.synthesize(
        "we need about twenty people over there", tts.EspeakVoice(variant="m3"), seed=3
    )
    folder = tmp / "recordings"
    folder.mkdir()
    wav = folder / "utt.wav"
    soundfile.write(wav, speech.waveform, speech.sample_rate)
    keywords = json.loads((workdir / "cskws" / "results.json").read_text())["keywords"]
    intervals = [
        {"keyword": word.text, "start": word.start, "end": word.end}
        for word in speech.words
        if word.text in keywords
    ]
    assert len(intervals) == 4  # about, twenty, people, over
    (folder / "utt.json").write_text(json.dumps(intervals))

    kws_bundle = workdir / "cskws" / "afkws" / "bundle"
    capsys.readouterr()
    every_peak = [str(wav), "--format=jsonl", "--min-score=0"]
    assert detect.main([str(kws_bundle), *every_peak]) == 0
    live = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert live and {found["keyword"] for found in live} <= set(keywords)
    assert detect.main([str(kws_bundle), *every_peak, "--fa-per-hour=5"]) == 0
    kept = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert kept == [found for found in live if found in kept]  # a subset, in order
    assert kws_export.main([str(kws_bundle), str(tmp / "exported")]) == 0
    capsys.readouterr()
    assert detect.main([str(tmp / "exported"), *every_peak]) == 0
    exported = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [found["keyword"] for found in exported] == [found["keyword"] for found in live]
    for ours, theirs in zip(exported, live, strict=True):
        assert ours["score"] == pytest.approx(theirs["score"], abs=2e-3)

    calls_bundle = workdir / "multiqt" / "audio" / "bundle-fold0"
    assert track.main([str(calls_bundle), str(wav), "--format=jsonl"]) == 0
    for line in capsys.readouterr().out.splitlines():
        segment = json.loads(line)
        assert segment["label"] in labels.QUESTION_CLASSES[1:]
        assert 0 <= segment["start"] < segment["end"] <= segment["emitted"]

    run = bundles.Settings(
        bundle=str(kws_bundle),
        dataset="folder_kws/shipped",
        split="",
        data_dir=str(tmp / "tfds"),
        manual_dir=str(folder),
        keywords="shared",
        batch_size=2,
        num_folds=5,
    )
    payload = bundles.evaluate(run, str(tmp / "evaluated"))
    assert payload["scores"]["test_hours"] == pytest.approx(speech.duration / 3600, abs=0.02 / 3600)
    assert 0 <= payload["scores"]["mAP"] <= 1
    budgets = payload["operating_points"]["budgets"]
    assert [entry["fa_per_hour"] for entry in budgets] == [1.0, 5.0, 25.0]
    for entry in budgets:
        assert entry["measured"]["hits"] + entry["measured"]["miss_rate"] * 4 == pytest.approx(4)


def check_intervals(scores: dict) -> None:
    """A model's bootstrap intervals: one per INTERVALS score, ordered, within the
    score's range; and the false alarms the FRR budgets allow on the test hours."""
    assert set(scores["intervals"]) == set(kws_scoring.INTERVALS)
    for key, (low, high) in scores["intervals"].items():
        assert 0 <= low <= high <= 1, key
    hours = scores["test_hours"]
    assert scores["allowed_false_alarms"] == pytest.approx(
        {"FRR@5": 5 * hours, "FRR@25": 25 * hours}
    )


def check_operating_points(folder, scores: dict, keywords: list) -> None:
    """A model's operating points: recomputed from its saved test detections, the bundle
    (AF-KWS models) stores the same ones, and results.json reports what they give on
    the test and held-out splits; det.json holds the test DET curves."""
    budgets = tuple(cskws_config.get_config("smoke").eval.fa_budgets)
    test = kws_scoring.saved_outcomes(str(folder), len(keywords))
    heldout = kws_scoring.saved_outcomes(str(folder / "heldout"), len(keywords))
    points = op.choose(test, budgets, split="synthetic_kws/smoke:test")
    summary = scores["operating_points"]
    assert summary["test_hours"] == pytest.approx(scores["test_hours"])
    assert [entry["fa_per_hour"] for entry in summary["budgets"]] == list(budgets)
    for point, entry in zip(points, summary["budgets"], strict=True):
        budget = point.fa_per_hour
        assert entry["allowed_false_alarms"] == op.allowed_false_alarms(budget, test.hours)
        assert entry["test"] == op.measure(test, point.thresholds)
        assert entry["test"]["fa_per_hour"] <= budget  # chosen there: met by construction
        assert entry["heldout"] == op.measure(heldout, point.thresholds)
        assert entry["heldout"]["hours"] == pytest.approx(scores["heldout"]["test_hours"])
        if f"FRR@{budget:g}" in scores and np.isfinite(scores[f"FRR@{budget:g}"]):
            frr = scores[f"FRR@{budget:g}"]  # one shared threshold: the metric's FRR
            assert entry["shared_threshold_miss_rate"] == pytest.approx(frr, abs=1e-6)
    if (folder / "bundle").exists():
        _, _, info = bundle.load(folder / "bundle")
        assert info.decoding.operating_points == points
    det = json.loads((folder / "det.json").read_text())
    assert set(det["per_keyword"]) == set(keywords) and det["hours"] == test.hours
    pooled = det["pooled"]
    assert pooled["threshold"][0] is None and pooled["miss_rate"][0] in (1.0, None)
    assert 1 < len(pooled["fa_per_hour"]) <= kws_scoring.DET_CURVE_POINTS
    assert pooled["fa_per_hour"] == sorted(pooled["fa_per_hour"])


def test_report_transfer_tables_without_heldout_scores():
    kws = {"dataset": "libritop20/top20", "models": {"afkws": {"mAP": 0.5}}}
    assert "No held-out-engine split" in reproduce_md.kws_transfer_table(kws)[0]
    mq = {"models": {"audio": {"mean": {}, "std": {}}}}
    assert "No held-out-engine calls" in reproduce_md.multiqt_transfer_table(mq)[0]
    assert not cskws.reusable({"mAP": 0.5}, ["heldout"])
    assert not cskws.reusable({"mAP": 0.5}, [])  # no operating points
    points_only = {"mAP": 0.5, "operating_points": {"budgets": []}}
    assert not cskws.reusable(points_only, [])  # no intervals
    with_points = {**points_only, "intervals": {"mAP": [0.4, 0.6]}}
    assert cskws.reusable(with_points, [])
    assert not cskws.reusable(with_points, ["heldout"])
    assert cskws.reusable({**with_points, "heldout": {}, "transfer": None}, ["heldout"])
    assert reproduce_md.kws_det_table(kws) == ["No operating points in these results."]
    assert common.transfer_ratio(0.2, 0.0) is None
    assert common.transfer_ratio(None, 0.4) is None
    assert common.transfer_ratio(0.2, 0.4) == pytest.approx(0.5)


def test_kws_table_shows_intervals_and_the_false_alarms_frr_allows():
    hours = 0.2
    scores = {
        "mAP": 0.294,
        "AP@0.05": 0.3,
        "AP@0.75": 0.2,
        "FRR@5": 0.9,
        "FRR@25": 0.8,
        "RTF": 0.001,
        "test_hours": hours,
    }
    old = "\n".join(reproduce_md.kws_table({"sliding_window": scores}))
    assert "| 0.294 (paper 0.398 / 0.426) | 0.300 |" in old and "[" not in old
    assert "FRR@5 (5 FA/h) allows 1.00, i.e. at most 1; FRR@25 (25 FA/h) allows 5.00" in old
    scores["intervals"] = {"mAP": [0.251, 0.338], "AP@0.05": [0.2, 0.4], "FRR@5": [None, None]}
    scores["allowed_false_alarms"] = {"FRR@5": 5 * hours, "FRR@25": 25 * hours}
    table = "\n".join(reproduce_md.kws_table({"afkws": scores}))
    assert (
        "| AF-KWS | 0.294 [0.25, 0.34] (paper 0.86) | 0.300 [0.20, 0.40] (paper 0.952) |" in table
    )
    assert "| 0.900 (paper 0.14) | 0.800 (paper 0.049) |" in table  # no interval, none shown
    assert "95 % percentile bootstrap interval over test utterances" in table


def test_cskws_bootstrap_resamples_are_checked_by_field_name():
    config = cskws_config.get_config("smoke")
    assert cskws.bootstrap_resamples(config) == 20
    assert cskws_config.get_config("quick").eval.bootstrap_resamples == 200
    for bad in (0, -1):
        config.eval.bootstrap_resamples = bad
        with pytest.raises(ValueError, match=r"config\.eval\.bootstrap_resamples"):
            cskws.bootstrap_resamples(config)


def test_multiqt_tasks_and_the_studies_verdicts_in_the_report(tmp_path):
    config = reproduce_config.get_config("smoke")
    assert reproduce.multiqt_tasks(config) == ["questions", "symptoms"]
    config.multiqt_tasks = "symptoms, questions"
    assert reproduce.multiqt_tasks(config) == ["questions", "symptoms"]
    assert reproduce.multiqt_folder("symptoms") == "multiqt-symptoms"
    for bad in ("", "questions,questions", "answers"):
        config.multiqt_tasks = bad
        with pytest.raises(ValueError, match="config.multiqt_tasks"):
            reproduce.multiqt_tasks(config)
    workdir = tmp_path / "reproduce"
    assert "Not run yet" in "\n".join(reproduce_md.studies_lines(config, str(workdir)))
    claims = [{"claim": "MultiQT: x beats y", "verdict": "holds"}]
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "studies.json").write_text(
        json.dumps({"preset": "quick", "claims": claims})
    )
    text = "\n".join(reproduce_md.studies_lines(config, str(workdir)))
    assert "[the studies' report](../studies/studies.md) (quick preset" in text
    assert "| MultiQT: x beats y | holds |" in text


def test_kws_test_size_sentence_only_when_frr_at_5_allows_fewer_than_ten():
    small = {"models": {"afkws": {"test_hours": 0.21}}}
    assert "FRR@5 allows 1 false alarm(s)" in reproduce_md.kws_test_size_lines(small)[0]
    assert reproduce_md.kws_test_size_lines({"models": {"afkws": {"test_hours": 2.0}}}) == []


def test_report_and_figures_from_recorded_results(tmp_path):
    """report.md and its figures from results as the stages write them (made-up numbers,
    the questions task only: nothing trained, no corpus read)."""
    config = reproduce_config.get_config("smoke")
    config.multiqt_tasks, config.cskws.dataset = "questions", "synthetic_kws/smoke"
    workdir = tmp_path / "reproduce"
    parts = {s: {p: 0.5 for p in ("precision", "recall", "f1")} for s in ("timestep", "instance")}
    scores = {"mean": parts, "std": parts}
    classes = labels.classes("questions")
    mq = {
        "num_folds": 2,
        "heldout_engine": "piper",
        "models": {
            "audio": {
                **scores,
                "timestep_f1_per_class": [None] + [0.5] * (len(classes) - 1),
                "heldout": scores,
                "transfer": {"timestep_f1": 1.0},
                "early_frames": {
                    "margin_s": 0.5,
                    "hop_s": 0.04,
                    "per_class": [None, 0.75] + [0.0] * (len(classes) - 2),
                    "overall": 0.5,
                    "early": [0, 3] + [0] * (len(classes) - 2),
                    "predicted": [0, 4, 2] + [0] * (len(classes) - 3),
                },
            }
        },
    }
    files.write_json(workdir / "multiqt" / "results.json", mq)
    kws = {"mAP": 0.3, "AP@0.05": 0.4, "AP@0.75": 0.2, "FRR@5": 0.6, "FRR@25": 0.4}
    kws = {**kws, "RTF": 0.01, "test_hours": 0.2, "heldout": {"mAP": 0.15}, "transfer": 0.5}
    results = {"dataset": "synthetic_kws/smoke", "keywords": ["a", "b"], "models": {"afkws": kws}}
    files.write_json(workdir / "cskws" / "results.json", results)
    curves = {
        "recall": [0, 0.5],
        "precision": [1, 0.5],
        "fa_per_hour": [0, 5],
        "miss_rate": [1, 0.5],
    }
    files.write_json(
        workdir / "cskws" / "afkws" / "detection_curves.json", {"pr": curves, "det": curves}
    )
    build = {"configs": {}}
    path = reproduce_md.write_report(config, str(workdir), build, {"corpora": 1.0})
    report = (workdir / "report.md").read_text()
    assert path == str(workdir / "report.md") and report.startswith("# Reproduction report")
    assert "| MultiQT (audio only) | 0.500 ± 0.500 | 0.500 ± 0.500 | 1.00 |" in report
    assert "| AF-KWS | 0.300 | 0.150 | 0.50 |" in report
    assert "No operating points in these results." in report
    assert "| Model | all classes | address | phone_number |" in report
    assert "| MultiQT (audio only) | 0.500 (3/6) | 0.750 (3/4) | 0.000 (0/2) | 0.000 (0/0) |" in (
        report
    )
    del mq["models"]["audio"]["early_frames"]  # results recorded before they were counted
    assert reproduce_md.early_frames_lines(mq["models"], list(classes)) == []
    assert "so FRR@5 allows 1 false alarm(s)" in report and "Not run yet" in report
    written = sorted(p.name for p in (workdir / "figures").iterdir())
    assert written == [
        "kws_det.png",
        "kws_frr_vs_false_alarms.png",
        "kws_precision_recall.png",
        "multiqt_per_class_f1.png",
    ]  # each whole: no temporary file left beside them
    for name in written:
        assert (workdir / "figures" / name).read_bytes()[:4] == b"\x89PNG"
