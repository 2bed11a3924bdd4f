"""experiments.studies: the training subsets and text / noise options it sweeps, the
verdict rules, the report from recorded numbers, and one smoke run end to end."""

import json

import jax
import numpy as np
import pytest

from experiments import common, cskws, multiqt_folds, multiqt_setup, studies
from experiments.configs import cskws as cskws_config
from experiments.configs import multiqt as multiqt_config
from experiments.configs import studies as studies_config
from experiments.report import claims, figures, studies_md


def test_training_calls_are_nested_seeded_subsets_of_the_other_folds():
    config = multiqt_config.get_config("smoke")
    fold_ids = np.arange(40) % 5
    everything = multiqt_folds.training_calls(fold_ids, 2, config)
    np.testing.assert_array_equal(everything, np.flatnonzero(fold_ids != 2))
    subsets = {}
    for fraction in (0.1, 0.25, 0.5):
        config.train_fraction = fraction
        subsets[fraction] = multiqt_folds.training_calls(fold_ids, 2, config)
        assert subsets[fraction].size == int(np.ceil(fraction * 32))
        assert (fold_ids[subsets[fraction]] != 2).all()
        assert np.all(np.diff(subsets[fraction]) > 0)  # corpus order
    assert set(subsets[0.1]) <= set(subsets[0.25]) <= set(subsets[0.5])
    assert not np.array_equal(
        multiqt_folds.training_calls(fold_ids, 3, config)[:3], subsets[0.5][:3]
    )
    for bad in (0.0, 1.5):
        config.train_fraction = bad
        with pytest.raises(ValueError, match="config.train_fraction"):
            multiqt_folds.training_calls(fold_ids, 2, config)


def test_training_utterances_are_nested_seeded_subsets():
    config = cskws_config.get_config("smoke")
    np.testing.assert_array_equal(cskws.training_utterances(config, 10), np.arange(10))
    config.train.fraction = 0.5
    half = cskws.training_utterances(config, 10)
    assert half.size == 5 and np.all(np.diff(half) > 0)
    config.train.fraction = 0.8
    assert set(half) <= set(cskws.training_utterances(config, 10))
    config.train.fraction = 0.0
    with pytest.raises(ValueError, match="config.train.fraction"):
        cskws.training_utterances(config, 10)


def test_text_alterations_and_training_noise_are_checked_by_field_name():
    config = multiqt_config.get_config("smoke")
    assert not multiqt_setup.text_alterations(config).altered
    assert multiqt_folds.training_noise(config) is None
    config.text_words = "oracle"
    with pytest.raises(ValueError, match="config: TextAlterations.source"):
        multiqt_setup.text_alterations(config)
    config.train.noise_snr_db = (20.0, 0.0)
    with pytest.raises(ValueError, match="config.train.noise_snr_db"):
        multiqt_folds.training_noise(config)
    config.train.noise_snr_db = (0.0, 20.0)
    assert multiqt_folds.training_noise(config) == (0.0, 20.0)
    assert multiqt_setup.text_recogniser(config) == ""
    config.text_recogniser = "perfect"
    expected = "config.text_recogniser: expected '', 'ctc', 'ctc_posteriors' or one of"
    with pytest.raises(ValueError, match=expected):
        multiqt_setup.text_recogniser(config)
    config.text_recogniser, config.text_words = "narrowband", "spoken"
    with pytest.raises(ValueError, match="needs text_words='recognised'"):
        multiqt_setup.text_recogniser(config)


def test_noisy_audio_leaves_padding_at_zero():
    audio = np.random.default_rng(0).normal(size=(2, 30, 40)).astype(np.float32)
    mask = np.ones((2, 30), bool)
    mask[1, 20:] = False
    audio[1, 20:] = 0.0
    batch = {"audio": audio, "audio_mask": mask, "labels": np.zeros((2, 30), np.int32)}
    out = multiqt_folds.noisy_audio(batch, jax.random.key(0), (0.0, 20.0))
    noisy = np.asarray(out["audio"])
    assert not noisy[1, 20:].any() and (noisy[mask] > audio[mask]).all()
    assert out["labels"] is batch["labels"]


def test_variant_sets_dotted_fields_and_refuses_unknown_ones():
    base = multiqt_config.get_config("smoke")
    changed = common.variant(base, {"train.steps": 7, "text_lag_s": 1.0})
    assert changed.train.steps == 7 and changed.text_lag_s == 1.0
    assert base.train.steps != 7 and base.text_lag_s == 0.0
    with pytest.raises(ValueError, match="'train.stpes' is no field"):
        common.variant(base, {"train.stpes": 7})


def test_a_variant_folder_keeps_the_config_it_was_trained_with(tmp_path):
    config = multiqt_config.get_config("smoke")
    common.check_variant(str(tmp_path), config)
    common.check_variant(str(tmp_path), common.variant(config, {}))  # the same: fine
    with pytest.raises(ValueError, match=r"another config \(fields num_folds, train.steps\)"):
        common.check_variant(
            str(tmp_path), common.variant(config, {"num_folds": 2, "train.steps": 3})
        )


def test_unknown_class_cells_name_their_corpus():
    config = studies_config.get_config("smoke")
    base = config.cskws
    config.sweeps.kws_datasets = ("synthetic_kws/medium", base.dataset, "synthetic_kws/medium")
    assert studies.unknown_class_corpora(config) == [base.dataset, "synthetic_kws/medium"]
    fraction, steps = base.train.fraction, base.train.steps
    assert studies.unknown_class_variant(base, base.dataset, fraction, steps) == "base"
    assert studies.unknown_class_variant(base, base.dataset, 0.5, 20) == "data0.5-steps20"
    assert (
        studies.unknown_class_variant(base, "synthetic_kws/medium", fraction, steps)
        == f"synthetic_kws-medium-data{fraction:g}-steps{steps}"
    )
    heldout = {"mAP": 0.2, "intervals": {"mAP": [0.1, 0.3]}}
    model = {"mAP": 0.5, "intervals": {"mAP": [0.4, 0.6]}, "FRR@5": 0.3, "heldout": heldout}
    results = {"training_utterances": 8, "models": {m: model for m in studies.KWS_MODELS}}
    cell = studies.unknown_class_cell(results, "synthetic_kws/medium", 1.0, 40)
    assert cell["dataset"] == "synthetic_kws/medium" and cell["training_utterances"] == 8
    assert cell["afkws"] == {
        "mAP": 0.5,
        "mAP_interval": [0.4, 0.6],
        "heldout_mAP": 0.2,
        "heldout_mAP_interval": [0.1, 0.3],
        "FRR@5": 0.3,
    }


def test_the_second_process_trains_the_variants_the_studies_ask_for(monkeypatch):
    monkeypatch.setattr(studies, "fold_summary", lambda *args, **kwargs: {})  # no real runs
    config = studies_config.get_config("quick")
    names = studies.selected(config)
    listed = studies.beside_multiqt_variants(config, names)
    assert [v[0] for v in listed] == [
        "data0.25",
        "no-modality-dropout",
        *(f"lag{lag:g}s" for lag in config.sweeps.text_lag_s if lag),
        "noise-matched",
    ]
    asked = []

    class Recording(studies.Runs):
        def multiqt(self, name, overrides=None, models="multimodal,audio,text"):
            asked.append((name, overrides or {}, models))
            if name != "base":
                raise Asked  # enough: the variant the study trains beside the base
            return {"models": {}}, "/nonexistent/base", None

    class Asked(Exception):
        pass

    for name in studies.BESIDE_MULTIQT:
        found = studies.Studies(config, "/nonexistent")
        found.runs = Recording(config, "/nonexistent")
        with pytest.raises(Asked):
            getattr(found, name)()
        assert asked[-1] in listed, name
    assert studies.beside_multiqt_variants(config, ["smoothing", "asr_quality"]) == []


def test_verdicts_follow_the_spread_over_folds():
    assert claims.compare({"mean": 0.8, "std": 0.05}, {"mean": 0.6, "std": 0.05}) == "holds"
    assert claims.compare({"mean": 0.6, "std": 0.05}, {"mean": 0.8, "std": 0.05}) == "reversed"
    assert claims.compare({"mean": 0.7, "std": 0.1}, {"mean": 0.6, "std": 0.1}) == "not shown"
    config = studies_config.get_config("smoke")
    config.studies = "noise, smoothing"
    assert studies.selected(config) == ["noise", "smoothing"]
    config.studies = "noise,loudness"
    with pytest.raises(ValueError, match="config.studies: expected some of"):
        studies.selected(config)


def _ms(mean, std=0.01):
    return {"mean": mean, "std": std}


def _scores(timestep, instance=0.2):
    return {"timestep_f1": _ms(timestep), "instance_f1": _ms(instance)}


def _records() -> dict:
    """Every study's record, as the studies write them, with made-up numbers."""
    curve = lambda *means: {"mean": list(means), "std": [0.01] * len(means)}  # noqa: E731
    latency = {"count": 3, "median_s": 0.4, "p90_s": 0.9}
    kws_row = {"mAP": 0.5, "AP@0.05": 0.6, "FRR@5": 0.3, "latency": latency}
    models = ("multimodal", "audio", "text")
    return {
        "asr_quality": {
            "rows": [
                {
                    "stream": "oracle, 0% substituted",
                    "variant": "oracle",
                    "causal": True,
                    "wer": 0.0,
                    "multimodal": _scores(0.8),
                    "text": _scores(0.7),
                },
                {
                    "stream": "recogniser, causal",
                    "variant": "base",
                    "causal": True,
                    "wer": 0.45,
                    "multimodal": _scores(0.7),
                    "text": _scores(0.3),
                },
                {
                    "stream": "recogniser, offline",
                    "variant": "offline",
                    "causal": False,
                    "wer": 0.45,
                    "multimodal": _scores(0.72),
                    "text": _scores(0.4),
                },
                {
                    "stream": "recogniser narrowband, causal",
                    "variant": "asr-narrowband",
                    "causal": True,
                    "wer": 0.68,
                    "multimodal": _scores(0.69),
                    "text": _scores(0.2),
                },
            ],
            "audio": _scores(0.7),
        },
        "text_lag": {
            "axis": "text_lag_s",
            "points": [0.0, 2.0],
            "curves": {
                m: {n: curve(0.5, 0.4) for n in models} for m in ("timestep_f1", "instance_f1")
            },
            "heldout_curves": {"timestep_f1": {}},
            "offline": {m: _scores(0.5) for m in ("multimodal", "text")},
        },
        "noise": {
            "axis": "snr_db",
            "points": ["clean", 0.0],
            "matched_snr_db": [0.0, 20.0],
            "curves": {
                m: {n: curve(0.7, 0.3) for n in models} for m in ("timestep_f1", "instance_f1")
            },
            "latency": {n: [latency, latency] for n in models},
        },
        "data_size": {
            "axis": "train_fraction",
            "points": [0.5, 1.0],
            "curves": {
                m: {n: curve(0.5, 0.7) for n in models} for m in ("timestep_f1", "instance_f1")
            },
            "heldout_curves": {"timestep_f1": {n: curve(0.3, 0.4) for n in models}},
        },
        "missing_modality": {
            "conditions": ["both", "text missing", "audio missing"],
            "rows": {
                "multimodal (modality dropout 0.1)": {
                    c: _scores(0.7) for c in ("both", "text missing", "audio missing")
                },
                "multimodal (no modality dropout)": {
                    c: _scores(0.4) for c in ("both", "text missing", "audio missing")
                },
                "audio-only model": {"both": _scores(0.7)},
            },
        },
        "smoothing": {
            "axis": "min_frames",
            "points": [1, 5],
            "curves": {
                m: {n: curve(0.2, 0.5) for n in models}
                for m in ("instance_precision", "instance_recall", "instance_f1", "timestep_f1")
            },
            "declared_latency_s": [0.0, 0.16],
            "latency": {n: [latency, latency] for n in models},
        },
        "unknown_class": {
            "cells": [
                {
                    "dataset": f"synthetic_kws/{size}",
                    "train_fraction": f,
                    "steps": 10,
                    "training_utterances": n,
                    "afkws": {
                        "mAP": 0.6,
                        "mAP_interval": [0.55, 0.65],
                        "heldout_mAP": 0.3,
                        "heldout_mAP_interval": [0.25, 0.35],
                        "FRR@5": 0.2,
                    },
                    "afkws_no_unknown": {
                        "mAP": m,
                        "mAP_interval": [m - 0.05, m + 0.05],
                        "heldout_mAP": h,
                        "heldout_mAP_interval": None if h is None else [h - 0.05, h + 0.05],
                        "FRR@5": 0.2,
                    },
                }
                for size, f, n, m, h in (
                    ("smoke", 0.5, 10, 0.4, None),
                    ("smoke", 1.0, 20, 0.8, 0.1),
                    ("medium", 1.0, 80, 0.4, 0.2),
                )
            ]
        },
        "lookahead": {
            "rows": [
                {"delay": d, **kws_row, "mAP": m, "algorithmic_latency_s": 0.04 * d, "hours": 0.1}
                for d, m in ((0, 0.4), (8, 0.5))
            ]
        },
        "kws_noise": {
            "axis": "snr_db",
            "points": ["clean", 0.0],
            "matched_snr_db": [0.0, 20.0],
            "rows": {"afkws": [kws_row, kws_row], "afkws (noise-trained)": [kws_row, kws_row]},
        },
    }


def test_claims_figures_and_report_from_recorded_numbers(tmp_path):
    records = _records()
    base = {
        "models": {
            name: {
                "mean": {s: {"f1": f1} for s in ("timestep", "instance")},
                "std": {s: {"f1": 0.01} for s in ("timestep", "instance")},
            }
            for name, f1 in (("multimodal", 0.7), ("audio", 0.75), ("text", 0.3))
        }
    }
    found = {c["claim"]: c for c in claims.claims(records, base)}
    verdicts = {claim.split(":")[1].strip(): c["verdict"] for claim, c in found.items()}
    assert verdicts["text and audio together beat audio alone (in-engine)"] == "reversed"
    assert verdicts["better transcripts make the text modality useful"] == "holds"
    assert verdicts["the unknown class improves mAP"] == "depends on scale"
    unknown = found["AF-KWS: the unknown class improves mAP"]["evidence"]
    assert unknown.endswith(
        "(of 3 cells, with it above the other's 95 % interval in 2, without it in 1)"
    )
    # held out: the cell without a held-out score is left out; the other two are wins
    assert verdicts["the unknown class improves mAP on an unheard synthesiser"] == "holds"
    assert "80 utterances, 10 steps: 0.300 vs 0.200" in " ".join(
        c["evidence"] for c in found.values()
    )
    assert verdicts["more look-ahead buys accuracy at the cost of latency"] == "holds"
    assert (
        verdicts["modality dropout keeps the multimodal model working when its text is missing"]
        == "holds"
    )
    paths = figures.study_figures(records, str(tmp_path))
    assert set(paths) == set(studies.STUDIES) - {"missing_modality"}
    for path in paths.values():
        assert (tmp_path / path).read_bytes()[:4] == b"\x89PNG"
    payload = {
        "preset": "smoke",
        "corpora": {
            "multiqt": "synthetic_calls/questions-smoke",
            "cskws": "synthetic_kws/smoke",
            "cskws_larger": ["synthetic_kws/medium"],
        },
        "num_folds": 5,
        "seconds": {name: 1.0 for name in records},
        "studies": records,
        "claims": list(found.values()),
    }
    text = studies_md.report(payload, paths)
    assert "| MultiQT: better transcripts make the text modality useful | **holds** |" in text
    assert "| recogniser, offline | no | 0.450 | 0.720 ± 0.010 | 0.400 ± 0.010 |" in text
    assert "| recogniser narrowband, causal | yes | 0.680 | 0.690 ± 0.010 |" in text
    assert "recogniser narrowband, causal (WER 0.68): text-only 0.200 ± 0.010" in text
    assert (
        "| synthetic_kws/smoke | 0.5 (10) | 10 | 0.600 [0.55, 0.65] | 0.400 [0.35, 0.45] | "
        "0.300 [0.25, 0.35] | n/a |" in text
    )
    assert "| synthetic_kws/medium | 1 (80) | 10 |" in text
    assert "`synthetic_kws/smoke`, `synthetic_kws/medium`. MultiQT scores" in text
    for path in paths.values():
        assert f"]({path})" in text


def test_a_figure_that_fails_to_save_leaves_no_partial_file_and_is_closed(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    path = tmp_path / "figures" / "curve.png"
    figure, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    figures.write(figure, str(path))
    written = path.read_bytes()
    assert written[:4] == b"\x89PNG" and not plt.fignum_exists(figure.number)

    def fail(target, **kwargs):  # writes half a PNG, then the disk is full
        with open(target, "wb") as out:
            out.write(written[:100])
        raise OSError("disk full")

    figure, ax = plt.subplots()
    monkeypatch.setattr(figure, "savefig", fail)
    with pytest.raises(OSError, match="disk full"):
        figures.write(figure, str(path))
    assert path.read_bytes() == written  # the old figure, whole; no temporary file beside it
    assert [p.name for p in path.parent.iterdir()] == ["curve.png"]
    assert not plt.fignum_exists(figure.number)
    (tmp_path / "taken").write_text("a file where the folder would go")
    figure, _ = plt.subplots()
    with pytest.raises(OSError):
        figures.write(figure, str(tmp_path / "taken" / "curve.png"))
    assert not plt.fignum_exists(figure.number)


class _FoldScores(dict):
    """results.json "models" whose every model scored 0.5 ± 0.1 (for studies that only
    assemble what their runs recorded)."""

    def __missing__(self, name):
        scores = {score: {"f1": 0.5} for score in ("timestep", "instance")}
        return {"mean": scores, "std": {score: {"f1": 0.1} for score in scores}}


def test_asr_quality_measures_each_streams_error_rate_on_the_corpus(monkeypatch, smoke_build):
    """The study's rows on the smoke corpus, its runs' scores stubbed (training is the
    experiments' own, tested beside them): each stream's WER against the spoken words."""
    config = studies_config.get_config("smoke")
    config.data_dir = str(smoke_build[0])
    config.sweeps.substitution_rate = (0.0, 0.5)
    trained = []

    def run(self, task, name, overrides):
        trained.append((name, overrides["models"]))
        return {"models": _FoldScores()}, name, common.variant(self._base(task), overrides)

    monkeypatch.setattr(studies.Runs, "_run", run)
    record = studies.Studies(config, "unused").asr_quality()
    rows = record["rows"]
    assert [row["variant"] for row in rows] == [
        "oracle",
        "oracle-sub0.5",
        "base",
        "offline",
        "asr-small_beam",
    ]
    assert [row["causal"] for row in rows] == [True, True, True, False, True]
    assert rows[0]["wer"] == 0.0 and 0.2 <= rows[1]["wer"] <= 0.8  # of a few dozen words
    assert 0 < rows[2]["wer"] == rows[3]["wer"] <= 1.5  # the same words, emitted otherwise
    assert rows[4]["wer"] > rows[2]["wer"]  # smaller beams: more search errors
    assert rows[0]["text"]["timestep_f1"] == {"mean": 0.5, "std": 0.1}
    assert record["audio"]["timestep_f1"]["mean"] == 0.5
    assert ("offline", "multimodal,text") in trained and (
        "base",
        "multimodal,audio,text",
    ) in trained


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_smoke_studies_write_records_figures_and_the_report(tmp_path, run_experiment, smoke_build):
    small = (
        "--config.multiqt.num_folds=2",
        "--config.multiqt.train.steps=10",
        "--config.cskws.train.steps=20",
    )
    run_experiment(
        "studies",
        tmp_path,
        "--config.studies=smoothing,lookahead",
        "--config.sweeps.delay=(0,)",
        "--config.cskws.model.delay=0",  # the base variant is the one look-ahead point
        *small,
    )
    payload = json.loads((tmp_path / "studies.json").read_text())
    assert list(payload["studies"]) == ["smoothing", "lookahead"]
    assert payload["seconds"]["second_process"] > 0  # the look-ahead study ran there
    assert payload["num_folds"] == 2
    smoothing = payload["studies"]["smoothing"]
    assert smoothing["points"] == [1, 3] and smoothing["declared_latency_s"][0] == 0
    for curve in smoothing["curves"]["timestep_f1"].values():
        assert all(0 <= value <= 1 for value in curve["mean"])
    (lookahead,) = payload["studies"]["lookahead"]["rows"]
    assert lookahead["delay"] == 0 and 0 <= lookahead["mAP"] <= 1
    # The streamed AF-KWS bundle scores what the experiment's own (offline) evaluation
    # scored; on the held-out engine's split, where the smoke model finds something.
    kws = json.loads((tmp_path / "cskws" / "base" / "results.json").read_text())
    assert lookahead["mAP"] == pytest.approx(kws["models"]["afkws"]["mAP"], abs=1e-6)
    config = studies_config.get_config("smoke").cskws
    config.data_dir = str(smoke_build[0])
    sources, keywords = cskws.load_corpus(config)
    sources.update(cskws.evaluation_sources(config, keywords))
    scorer = studies.KeywordScorer(config, sources, len(keywords))
    heldout = scorer.score(str(tmp_path / "cskws" / "base" / "afkws" / "bundle"), split="heldout")
    assert heldout["mAP"] == pytest.approx(kws["models"]["afkws"]["heldout"]["mAP"], abs=1e-6)
    assert heldout["latency"]["count"] >= 1
    for path in payload["figures"].values():
        assert (tmp_path / path).exists()
    report = (tmp_path / "studies.md").read_text()
    assert "## The papers' claims on this data" in report and "## AF-KWS: look-ahead" in report
    # A second run finds the variants trained and scores them again, to the same numbers.
    run_experiment("studies", tmp_path, "--config.studies=smoothing", *small)
    assert json.loads((tmp_path / "studies.json").read_text())["studies"]["smoothing"] == smoothing
