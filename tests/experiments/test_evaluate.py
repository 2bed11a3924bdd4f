"""experiments.evaluate and its library, experiments.scoring.bundles: trained bundles
scored on another corpus, end to end, and the keyword matching between a bundle and a
corpus."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import jax
import numpy as np
import pytest

from cskws_jax import bundle as kws_bundle
from cskws_jax import keywords as shipped
from cskws_jax import model as kws_model
from cskws_jax import operating_points
from cskws_jax import train as kws_train
from experiments import evaluate
from experiments.scoring import bundle_calls, bundle_keywords, bundles, corpora
from experiments.scoring import keywords as kws_scoring
from experiments.scoring.evaluators import tracking
from multiqt_jax import bundle as calls_bundle
from multiqt_jax import labels, model
from speechkit import audio_io

RATE = 16_000
BUNDLE_KEYWORDS = ("people", "hundred", "weather")  # "weather" is no corpus keyword


def tone(seconds: float, seed: int) -> np.ndarray:
    """float32 [samples]: a tone over a little noise, 16 kHz."""
    t = np.arange(int(seconds * RATE)) / RATE
    noise = 0.01 * np.random.default_rng(seed).normal(size=t.size)
    return (0.3 * np.sin(2 * np.pi * (300 + 100 * seed) * t) + noise).astype(np.float32)


@pytest.fixture
def kws_folder(tmp_path):
    """A folder_kws manual folder: three files, keyword intervals of the shipped list."""
    folder = tmp_path / "keywords"
    folder.mkdir()
    annotations = {
        "one.wav": [{"keyword": "people", "start": 0.2, "end": 0.6}],
        "two.wav": [
            {"keyword": "hundred", "start": 0.1, "end": 0.5},
            {"keyword": "about", "start": 0.9, "end": 1.3},
        ],
        "three.wav": [],
    }
    for seed, name in enumerate(annotations):
        audio_io.write_audio(folder / name, tone(1.5, seed), RATE)
    (folder / "keywords.json").write_text(json.dumps(annotations))
    return folder


@pytest.fixture
def save_tiny_kws_bundle(tiny_afkws_config):
    """save(path, keywords, decoding=None) -> path: an untrained AF-KWS bundle of
    `keywords`, small enough to build in a second."""

    def save(path, keywords, decoding=None):
        net = kws_model.AfKws(tiny_afkws_config(len(keywords)))
        audio = {"audio": np.zeros((1, 16, 64), np.float32)}
        params = jax.jit(net.init)(jax.random.key(0), audio)
        kws_bundle.save(path, net, params, keywords, decoding, corpus="synthetic_kws/smoke")
        return path

    return save


@pytest.fixture
def kws_bundle_path(tmp_path, save_tiny_kws_bundle):
    """An untrained 3-keyword AF-KWS bundle (BUNDLE_KEYWORDS) without operating points."""
    return save_tiny_kws_bundle(tmp_path / "afkws" / "bundle", BUNDLE_KEYWORDS)


def settings(bundle, dataset, data_dir, manual_dir, **overrides):
    values = {
        "bundle": str(bundle),
        "dataset": dataset,
        "split": "",
        "data_dir": str(data_dir),
        "manual_dir": str(manual_dir),
        "keywords": "shared",
        "batch_size": 2,
        "num_folds": 5,
    }
    return bundles.Settings(**{**values, **overrides})


def test_a_kws_bundle_is_scored_on_a_folder_corpus_from_the_command_line(
    tmp_path, kws_folder, kws_bundle_path
):
    workdir = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.evaluate",
            f"--bundle={kws_bundle_path}",
            "--dataset=folder_kws/shipped",
            f"--data_dir={tmp_path / 'tfds'}",
            f"--manual_dir={kws_folder}",
            f"--workdir={workdir}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((workdir / "results.json").read_text())
    assert (results["task"], results["split"], results["utterances"]) == ("cskws", "test", 3)
    assert results["keywords"]["scored"] == ["people", "hundred"]
    assert results["keywords"]["dropped_bundle_only"] == ["weather"]
    corpus_only = [k for k in shipped.load_keywords() if k not in ("people", "hundred")]
    assert results["keywords"]["dropped_corpus_only"] == corpus_only
    scores = results["scores"]
    assert set(scores) >= {*kws_scoring.REPORTED, "RTF", "test_hours"}
    assert scores["test_hours"] == pytest.approx(3 * 1.5 / 3600, rel=1e-3)
    for name in kws_scoring.REPORTED:
        assert 0 <= scores[name] <= 1, name
    assert scores["RTF"] > 0
    assert set(results["AP_per_keyword@0.05"]) == {"people", "hundred"}
    assert all(0 <= ap <= 1 for ap in results["AP_per_keyword@0.05"].values())
    assert "dropped, only in the bundle: ['weather']" in done.stderr
    assert "mAP" in done.stdout and "hundred" in done.stdout
    with np.load(workdir / "detections.npz") as saved:
        truth = saved["truth_label"][saved["truth_valid"]]
    assert sorted(truth.tolist()) == [0, 1]  # people, hundred; "about" is dropped
    assert (workdir / "detection_curves.json").exists()
    assert results["operating_points"]["budgets"] == []  # the bundle stores none
    assert "stores no operating points" in done.stderr
    assert "operating points: none stored in the bundle" in done.stdout
    det = json.loads((workdir / "det.json").read_text())
    assert det["split"] == "folder_kws/shipped:test"
    assert set(det["per_keyword"]) == {"people", "hundred"}


def test_a_bundles_operating_points_are_measured_on_the_corpus(
    tmp_path, kws_folder, save_tiny_kws_bundle
):
    """Thresholds come in the bundle's class order ("weather", dropped, first): mapped onto
    the scored keywords ("hundred", "people"), they must keep exactly the detections a hand
    count over the saved detections keeps."""
    keywords = ("weather", "hundred", "people")
    keep_all, keep_none = 0.0, 2.0  # scores are probabilities
    points = (  # thresholds per bundle keyword: weather, hundred, people
        kws_train.OperatingPoint(2000.0, (keep_none, keep_none, keep_all), "made:by-hand", 0.5),
        kws_train.OperatingPoint(5.0, (keep_all, keep_none, keep_none), "made:by-hand", 0.5),
        kws_train.OperatingPoint(8000.0, (keep_none, keep_all, keep_all), "made:by-hand", 0.5),
    )
    decoding = kws_train.PeakDecodingConfig(min_score=0.0, operating_points=points)
    path = save_tiny_kws_bundle(tmp_path / "ordered" / "bundle", keywords, decoding)
    run = settings(path, "folder_kws/shipped", tmp_path / "tfds", kws_folder)
    workdir = tmp_path / "out"
    results = bundles.evaluate(run, str(workdir))
    assert results == json.loads((workdir / "results.json").read_text())
    assert results["keywords"]["scored"] == ["hundred", "people"]

    with np.load(workdir / "detections.npz") as saved:
        label = saved["detection_label"][saved["detection_valid"]]
        hours = float(saved["hours"])
    kept = {"hundred": int(np.sum(label == 0)), "people": int(np.sum(label == 1))}
    assert kept["hundred"] > 0 and kept["people"] > 0  # else the test could not tell them apart
    summary = results["operating_points"]
    assert summary["split"] == "folder_kws/shipped:test"
    assert summary["hours"] == pytest.approx(3 * 1.5 / 3600, rel=1e-3)
    by_budget = {entry["fa_per_hour"]: entry for entry in summary["budgets"]}
    assert sorted(by_budget) == [5.0, 2000.0, 8000.0]
    people, none, both = by_budget[2000.0], by_budget[5.0], by_budget[8000.0]
    assert people["thresholds"] == {"hundred": keep_none, "people": keep_all}
    assert none["thresholds"] == {"hundred": keep_none, "people": keep_none}
    # the allowed false alarms: floor(budget x 0.00125 h)
    assert [e["allowed_false_alarms"] for e in (none, people, both)] == [0, 2, 10]
    for entry, count in ((people, kept["people"]), (none, 0), (both, sum(kept.values()))):
        measured = entry["measured"]
        assert entry["chosen_on"] == "made:by-hand" and entry["chosen_hours"] == 0.5
        assert measured["hits"] + measured["false_alarms"] == count
        assert measured["fa_per_hour"] == pytest.approx(measured["false_alarms"] / hours)
        assert measured["miss_rate"] == pytest.approx(1 - measured["hits"] / 2)  # 2 truths
    assert none["measured"]["miss_rate"] == 1.0
    found = kws_scoring.saved_outcomes(str(workdir), 2)  # scored order: hundred, people
    assert people["measured"] == operating_points.measure(found, (keep_none, keep_all))
    assert both["measured"] == operating_points.measure(found, (keep_all, keep_all))
    det = json.loads((workdir / "det.json").read_text())
    assert set(det["per_keyword"]) == {"hundred", "people"}
    assert det["pooled"]["false_alarms"][-1] + det["pooled"]["hits"][-1] == sum(kept.values())
    table = evaluate.kws_table(results)
    assert "operating points on folder_kws/shipped:test" in table
    assert "made:by-hand" in table


def test_scored_thresholds_follow_the_keyword_mapping():
    match = bundle_keywords.KeywordMatch.of(("a", "b", "c"), ("c", "x", "a"), "shared")
    assert bundle_keywords.scored_thresholds((0.1, 0.2, 0.3), match) == (0.1, 0.3)
    with pytest.raises(corpora.EvaluationError, match="thresholds: 2 values"):
        bundle_keywords.scored_thresholds((0.1, 0.2), match)


def test_strict_keywords_refuse_a_mismatch(tmp_path, kws_folder, kws_bundle_path):
    strict = settings(
        kws_bundle_path, "folder_kws/shipped", tmp_path / "tfds", kws_folder, keywords="strict"
    )
    with pytest.raises(corpora.EvaluationError, match=r"only in the bundle: \['weather'\]"):
        bundles.evaluate(strict, str(tmp_path / "out"))
    assert not (tmp_path / "out" / "results.json").exists()


def test_keyword_match_maps_both_sides_onto_the_shared_keywords():
    match = bundle_keywords.KeywordMatch.of(("a", "b", "c"), ("c", "x", "a"), "shared")
    assert match.scored == ("a", "c")
    assert (match.bundle_only, match.corpus_only) == (("b",), ("x",))
    np.testing.assert_array_equal(match.bundle_to_scored, [0, -1, 1])
    np.testing.assert_array_equal(match.corpus_to_scored, [1, -1, 0])
    with pytest.raises(corpora.EvaluationError, match="no keyword in common"):
        bundle_keywords.KeywordMatch.of(("a",), ("b",), "shared")
    found = bundle_keywords.scored_detections(
        {"label": np.array([[0, 1, 2]]), "valid": np.array([[True, True, False]])},
        match.bundle_to_scored,
    )
    np.testing.assert_array_equal(found["label"], [[0, 0, 1]])
    np.testing.assert_array_equal(found["valid"], [[True, False, False]])
    record = {
        "keyword_label": np.array([0, 1, 2, 0], np.int32),
        "keyword_valid": np.array([True, True, True, False]),
    }
    remapped = bundle_keywords.ScoredKeywordSource([record], match.corpus_to_scored)[0]
    np.testing.assert_array_equal(remapped["keyword_label"], [1, 0, 0, 1])
    np.testing.assert_array_equal(remapped["keyword_valid"], [True, False, True, False])


def _write_call(folder, name: str, seed: int, fold: int) -> None:
    audio_io.write_audio(folder / f"{name}.wav", tone(2.0, seed), RATE)
    annotation = {
        "segments": [{"label": "address", "start": 0.4, "end": 1.2}],
        "fold": fold,
        "asr": [
            {"word": "where", "start": 0.4, "end": 0.7},
            {"word": "are", "start": 0.7, "end": 0.9},
            {"word": "you", "start": 0.9, "end": 1.2},
        ],
    }
    (folder / f"{name}.json").write_text(json.dumps(annotation))


def test_multiqt_fold_bundles_are_scored_on_an_annotated_calls_folder(
    tmp_path, tiny_multiqt_config
):
    calls = tmp_path / "calls"
    calls.mkdir()
    for seed in range(3):
        _write_call(calls, f"call{seed}", seed, fold=seed)
    net = model.MultiQT(tiny_multiqt_config())
    inputs = {
        "audio": np.zeros((1, 40, 40), np.float32),
        "text": np.zeros((1, 20, 29), np.float32),
    }
    trained_on = ("annotated_calls/questions", "synthetic_calls/questions-smoke")
    for fold, corpus in enumerate(trained_on):
        params = jax.jit(net.init)(jax.random.key(fold), inputs)
        calls_bundle.save(
            tmp_path / "multimodal" / f"bundle-fold{fold}",
            net,
            params,
            labels.classes("questions"),
            corpus=corpus,
        )
    run = settings(tmp_path / "multimodal", "annotated_calls/questions", tmp_path / "tfds", calls)
    results = bundles.evaluate(run, str(tmp_path / "out"))
    assert results == json.loads((tmp_path / "out" / "results.json").read_text())
    assert (results["task"], results["split"], results["calls"]) == ("multiqt", "train", 3)
    assert [b["fold"] for b in results["bundles"]] == [0, 1]
    own_fold, other = results["bundles"]  # fold 0 was trained on this very corpus
    assert own_fold["calls"].startswith("fold 0 of 5") and own_fold["scored_calls"] == 1
    assert (other["calls"], other["scored_calls"]) == ("all", 3)
    scores = results["scores"]
    assert len(scores["folds"]) == 2 and len(scores["smoothed"]["folds"]) == 2
    for summary in (scores, scores["smoothed"]):
        for score in tracking.SCORES:
            for part in tracking.PARTS:
                assert 0 <= summary["mean"][score][part] <= 1, (score, part)
    assert not math.isnan(scores["mean"]["timestep"]["f1"])
    assert scores["smoothed"]["smoothing"]["latency_ms"] > 0
    for summary in (scores, scores["smoothed"]):  # on the bundles' output clock, folds pooled
        early = summary["early_frames"]
        assert early["hop_s"] == model.streaming_spec(net.config).output_hop_s
        assert 0 <= early["overall"] <= 1 and sum(early["predicted"]) > 0
    # On a split that cross-validation never drew folds from (synthetic_calls' "heldout",
    # spoken by the held-out engine), every fold bundle sees every call.
    builder = corpora.corpus_builder("annotated_calls/questions", str(tmp_path / "tfds"))
    source = corpora.split_source(builder, "train")
    other_split = bundle_calls.evaluate_calls(
        str(tmp_path / "multimodal"), builder, source, run, "annotated_calls/questions", "heldout"
    )
    assert [b["scored_calls"] for b in other_split["bundles"]] == [3, 3]


def test_missing_marks_one_modality_of_a_multimodal_model_missing_in_every_call():
    import types

    seen = []

    def predict(batch, present=None):
        seen.append(present)
        return present

    both = types.SimpleNamespace(config=types.SimpleNamespace(modalities=("audio", "text")))
    batch = {"audio": np.zeros((3, 8, 40), np.float32)}
    assert bundle_calls.with_missing(predict, both, "", "b") is predict
    bundle_calls.with_missing(predict, both, "text", "b")(batch)
    bundle_calls.with_missing(predict, both, "audio", "b")(batch)
    np.testing.assert_array_equal(seen[0], [[True, False]] * 3)
    np.testing.assert_array_equal(seen[1], [[False, True]] * 3)
    audio = types.SimpleNamespace(config=types.SimpleNamespace(modalities=("audio",)))
    with pytest.raises(corpora.EvaluationError, match="only a multimodal model"):
        bundle_calls.with_missing(predict, audio, "text", "b")
    with pytest.raises(corpora.EvaluationError, match="expected '', 'audio' or 'text'"):
        bundle_calls.with_missing(predict, both, "video", "b")


def test_a_bundle_of_one_task_refuses_a_corpus_of_the_other(tmp_path, kws_bundle_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    _write_call(calls, "call0", 0, fold=0)
    run = settings(kws_bundle_path, "annotated_calls/questions", tmp_path / "tfds", calls)
    with pytest.raises(corpora.EvaluationError, match="needs a keyword corpus"):
        bundles.evaluate(run, str(tmp_path / "out"))


def test_a_keyword_corpus_split_may_be_a_slice(smoke_build):
    """`--split=heldout[50%:]`: the half the lever screen leaves for the final check; a
    call corpus is scored whole (its folds), and a bad slice is named."""
    data_dir = str(smoke_build[0])
    builder = corpora.corpus_builder("synthetic_kws/smoke", data_dir)
    whole = corpora.split_source(builder, "heldout")
    half = corpora.split_source(builder, "heldout[50%:]", slices=True)
    assert len(half) == len(whole) - len(whole) // 2
    assert half[0]["utterance_id"] == whole[len(whole) // 2]["utterance_id"]
    with pytest.raises(corpora.EvaluationError, match=r"--split: 'heldout\[:x\]'"):
        corpora.split_source(builder, "heldout[:x]", slices=True)
    with pytest.raises(corpora.EvaluationError, match="no 'dev' split"):
        corpora.split_source(builder, "dev[:50%]", slices=True)
    calls = corpora.corpus_builder("synthetic_calls/questions-smoke", data_dir)
    with pytest.raises(corpora.EvaluationError, match="a call corpus is scored whole"):
        corpora.split_source(calls, "train[:50%]")


def test_a_keyword_corpus_is_scored_on_the_utterances_of_some_engines(smoke_build, tmp_path):
    """`--engines=piper`: the heldout split's Piper utterances alone (all of them there);
    an engine that spoke none of them, or a call corpus, is refused by name."""
    from cskws_jax import models as kws_models
    from multiqt_jax import models as calls_models

    data_dir = str(smoke_build[0])
    bundle = kws_models.path("afkws-top20")
    run = bundles.Settings(
        bundle=bundle, dataset="synthetic_kws/smoke", split="heldout", data_dir=data_dir
    )
    whole = bundles.evaluate(run, str(tmp_path / "whole"))
    piper = bundles.evaluate(dataclasses.replace(run, engines="piper"), str(tmp_path / "piper"))
    assert piper["engines"] == "piper" and "engines" not in whole
    assert piper["utterances"] == whole["utterances"]
    for key in ("mAP", "AP@0.05", "FRR@5", "FRR@25"):  # RTF is a wall-clock figure
        assert piper["scores"][key] == whole["scores"][key]
    with pytest.raises(corpora.EvaluationError, match="--engines: .*espeak"):
        bundles.evaluate(dataclasses.replace(run, engines="espeak"), str(tmp_path / "none"))
    calls = dataclasses.replace(
        run,
        bundle=calls_models.path("multiqt-questions-audio"),
        dataset="synthetic_calls/questions-smoke",
        split="",
    )
    with pytest.raises(corpora.EvaluationError, match="a call corpus is scored whole"):
        bundles.evaluate(dataclasses.replace(calls, engines="piper"), str(tmp_path / "calls"))
