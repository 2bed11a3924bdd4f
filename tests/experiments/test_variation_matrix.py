"""experiments.variation_matrix: the corpora of each variation, the leave-one-engine-out
cells on one corpus (records chosen by engine), and the matrix assembled from the two
runners' payloads (here stand-ins, so no training)."""

import json

import pytest

from cskws_jax.datasets import synthetic_kws, text
from experiments import multiqt_setup, variation_matrix
from experiments.configs import variation_matrix as configs
from experiments.scoring import evals
from multiqt_jax.datasets import synthetic_calls
from speechkit import corpus, tts


def test_each_variation_has_corpora_all_engines_speak():
    for variation in tts.VARIATIONS:
        kws = synthetic_kws.SyntheticKws.builder_configs[
            tts.corpus_config_name("quick", "all", variation)
        ]
        calls = synthetic_calls.SyntheticCalls.builder_configs[
            tts.corpus_config_name("questions-quick", "all", variation)
        ]
        for render_config in (kws.render_config, calls.render_config):
            assert set(render_config.engines) == set(variation_matrix.ENGINES)
            assert render_config.heldout_engine is None
            assert (render_config.speaker_stage is None) == (variation == "plain")
        assert (kws.text_config == text.TextConfig()) == (variation != "varied")
        assert calls.script.varied == (variation == "varied")
    plain = synthetic_kws.SyntheticKws.builder_configs["quick"]
    assert plain.render_config.speaker_stage is None and plain.text_config == text.TextConfig()


def test_an_engine_subset_keeps_the_records_of_its_engines():
    records = [
        {"speaker": "espeak:en-us+f1@1.02"},
        {"speaker": "piper:joe~n0.500w0.700@0.95~vt1.100,f0=150.0,pr1.000,d1.000"},
        {"speakers": "festival:kal_diphone|festival:ked_diphone"},
        {"speaker": "espeak:en-us+m3"},
        {"speaker": "my-own-speaker"},
    ]
    subset = corpus.EngineSubset(records, ("espeak", "festival"))
    assert len(subset) == 3 and [subset[i] for i in range(3)] == [records[i] for i in (0, 2, 3)]
    assert corpus.record_engine(records[4]) == "recorded"
    assert evals.of_engines(records, "", "config.engines") is records
    with pytest.raises(ValueError, match=r"config\.engines: engines \['festival'\].*espeak"):
        evals.of_engines(records[:2], "festival", "config.engines")


def test_a_split_is_chosen_by_engine_on_a_built_corpus(smoke_build):
    import tensorflow_datasets as tfds

    sources = tfds.data_source("synthetic_kws/smoke", data_dir=str(smoke_build[0]))
    heldout = evals.of_engines(sources["heldout"], "piper", "heldout")
    assert len(heldout) == len(sources["heldout"])
    with pytest.raises(ValueError, match="no record spoken by them"):
        evals.of_engines(sources["heldout"], "espeak", "heldout")
    evaluation = evals.Evaluation("heldout", "train", engines="festival")
    assert evals.kept_engine(evaluation) == "festival"


def test_the_keyword_report_gives_what_the_speaker_stage_drew():
    import numpy as np

    from experiments import build_data

    def record(speaker: str) -> dict:
        return {
            "keyword_label": np.array([0, 1]),
            "keyword_valid": np.array([True, False]),
            "other_start": np.zeros(3),
            "duration": 2.0,
            "aligned_fraction": 1.0,
            "speaker": speaker.encode(),
            "text": b"about the people",
        }

    shifts = [tts.SpeakerShift(1.0 + k / 10, 100.0 + 50 * k, 1.0, 1.0) for k in range(3)]
    names = [tts.EspeakVoice(variant="f1", shift=shift).speaker for shift in shifts]
    report = build_data.kws_report([record(n) for n in names + ["piper:joe"]], ["about", "people"])
    stage = report["engines"]["espeak"]["speaker_stage"]
    assert stage["shifted"] == 3 and stage["pitch_median_hz"]["median"] == pytest.approx(150.0)
    assert stage["formant"]["p10"] == pytest.approx(1.02)
    assert report["engines"]["piper"]["speaker_stage"] == {"speakers": 1, "shifted": 0}
    assert report["text"]["keyword_first"] == 1.0 and report["text"]["keyword_last"] == 1.0


def _kws_payload(in_engine: float, heldout: float) -> dict:
    def scores(value):
        return {"mAP": value, "intervals": {"mAP": [value - 0.05, value + 0.05]}}

    entry = {**scores(in_engine), "heldout": scores(heldout), "transfer": heldout / in_engine}
    return {"models": {"afkws": entry}}


def _calls_payload(in_engine: float, heldout: float) -> dict:
    def scores(value):
        folds = [{"timestep": {"f1": value - 0.1}}, {"timestep": {"f1": value + 0.1}}]
        early = {"overall": 0.25, "per_class": {}, "margin_s": 0.5}
        return {"folds": folds, "mean": {"timestep": {"f1": value}}, "early_frames": early}

    transfer = {"timestep_f1": heldout / in_engine}
    return {
        "models": {"audio": {**scores(in_engine), "heldout": scores(heldout), "transfer": transfer}}
    }


def test_the_matrix_holds_each_engine_out_once_per_variation_and_task(
    tmp_path, monkeypatch, capsys
):
    seen = []

    def fake_kws(cell, workdir):
        seen.append(("kws", cell.dataset, cell.engines, cell.evals.heldout.to_dict(), workdir))
        return _kws_payload(0.5, 0.25)

    def fake_calls(cell, workdir):
        corpus_name = multiqt_setup.corpus_name(cell)
        seen.append(("questions", corpus_name, cell.engines, cell.evals.heldout.to_dict(), workdir))
        return _calls_payload(0.8, 0.6)

    monkeypatch.setattr(variation_matrix.tts, "require_engine", lambda engine: None)  # no Festival
    monkeypatch.setattr(variation_matrix.cskws, "train_and_evaluate", fake_kws)
    monkeypatch.setattr(variation_matrix.multiqt, "train_and_evaluate", fake_calls)
    config = configs.get_config("smoke")
    config.variations, config.data_dir = "plain,speakers", "/data"
    results = variation_matrix.train_and_evaluate(config, str(tmp_path))
    assert len(seen) == 2 * 2 * 3
    task, dataset, engines, heldout, folder = seen[0]
    assert (task, dataset, engines) == ("kws", "synthetic_kws/smoke-all", "festival,piper")
    assert (heldout["split"], heldout["engines"]) == ("train", "espeak")
    assert folder == str(tmp_path / "plain" / "kws" / "espeak")
    assert seen[-1][:3] == ("questions", "questions-smoke-all-speakers", "espeak,festival")
    means = {(m["variation"], m["task"]): m for m in results["means"]}
    assert means["plain", "kws"]["transfer"] == pytest.approx(0.5)
    assert means["speakers", "questions"]["heldout"] == pytest.approx(0.6)
    calls_cell = [c for c in results["cells"] if c["task"] == "questions"][0]
    assert calls_cell["in_engine"]["interval"] == pytest.approx([0.7, 0.9])
    assert calls_cell["early_frames"]["heldout"]["overall"] == 0.25
    assert json.loads((tmp_path / "results.json").read_text()) == results
    assert (tmp_path / "matrix.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "| plain | kws | espeak | 0.500 [0.45, 0.55] | 0.250 [0.20, 0.30] | 0.50 |" in printed
    config.tasks = "kws,symptoms"
    with pytest.raises(ValueError, match="config.tasks"):
        variation_matrix.train_and_evaluate(config, str(tmp_path))


@pytest.mark.slow
def test_a_varied_corpus_is_built_with_drawn_speakers_and_keyword_places(tmp_path):
    """synthetic_kws/smoke-varied end to end: every utterance a shifted speaker, the
    drawn values in the report, and word intervals still trusted."""
    from experiments import build_data

    report = build_data.build("smoke", str(tmp_path), ("kws",), variation="varied")
    entry = report["configs"]["synthetic_kws/smoke-varied"]
    for split in ("train", "test", "heldout"):
        for engine, found in entry[split]["engines"].items():
            stage = found["speaker_stage"]
            assert stage["shifted"] == found["utterances"], (split, engine)
            low, high = tts.SpeakerStage().pitch_median_hz
            assert low <= stage["pitch_median_hz"]["p10"] <= stage["pitch_median_hz"]["p90"] <= high
        # every interval is trusted by construction (the corpus redraws the others); the
        # aligner still places most words of shifted speakers (quick: 0.68-0.91 per engine)
        assert entry[split]["mean_aligned_fraction"] >= 0.3, entry[split]
        assert set(entry[split]["text"]) >= {"keyword_first", "adjacent_keywords"}
    assert (tmp_path / "build_report-smoke-varied.json").exists()
