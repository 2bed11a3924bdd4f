"""experiments.report.card: AF-KWS and MultiQT model cards from their scores and run facts."""

import json

import pytest

from experiments.report import card as card_lib


def scores(map_value):
    return {
        "mAP": map_value,
        "AP@0.05": map_value,
        "FRR@5": 0.5,
        "FRR@25": 0.25,
        "test_hours": 1.0,
        "intervals": {"mAP": [map_value - 0.1, map_value + 0.1], "FRR@5": [0.4, 0.6]},
    }


def measure(rate):
    return {"false_alarms": 1, "hits": 9, "fa_per_hour": rate, "miss_rate": 0.1, "hours": 1.0}


ENTRY = {
    **scores(0.8),
    "RTF": 0.001,
    "seconds": 60.0,
    "dev": scores(0.7),
    "final": scores(0.75),
    "heldout": scores(0.2),
    "transfer": 0.25,
    "operating_points": {
        "chosen_on": "dev",
        "budgets": [
            {
                "fa_per_hour": 5.0,
                "allowed_false_alarms": 5,
                "test": measure(4.0),
                "final": measure(6.0),
                "heldout": measure(30.0),
                "shared_threshold_miss_rate": 0.2,
            }
        ],
    },
}
FACTS = {
    "keywords": ["weather", "morning"],
    "corpus": {
        "name": "synthetic_kws/large",
        "size": "large",
        "engines": ["espeak"],
        "heldout_engine": "piper",
        "utterances": {"train": 10, "test": 5, "heldout": 5},
    },
    "training": {"steps": 100, "batch_size": 4, "init": None},
    "seconds": {"corpus": None, "run": 120.0},
    "command": "python -m experiments.ship --config=experiments/configs/shipped.py:x",
}


def test_the_card_holds_every_split_and_the_operating_points_chosen_on_dev():
    card = card_lib.kws_card("afkws", ENTRY, FACTS)
    assert card["model"] == "afkws" and card["title"] == "AF-KWS"
    assert list(card["scores"]) == ["test", "dev", "final", "heldout"]
    assert card["chosen_on"] == "dev"
    assert card["operating_points"] == [
        {
            "fa_per_hour": 5.0,
            "test": {"fa_per_hour": 4.0, "miss_rate": 0.1},
            "final": {"fa_per_hour": 6.0, "miss_rate": 0.1},
            "heldout": {"fa_per_hour": 30.0, "miss_rate": 0.1},
        }
    ]
    page = card_lib.markdown_text(card)
    assert "| budget (FA/h) | dev FA/h | miss | final FA/h | miss | heldout FA/h | miss |" in page
    assert "| 5 | 4.0 | 0.10 | 6.0 | 0.10 | 30.0 | 0.10 |" in page
    assert "| final | 1.00 | 0.750 [0.65, 0.85] | 0.500 [0.40, 0.60] | 0.250 |" in page
    assert "chosen on the dev split and measured on the others" in page
    assert "building the corpus n/a (built before)" in page


def test_a_rerun_keeps_the_times_of_the_run_that_trained(tmp_path):
    first = card_lib.kws_card("afkws", ENTRY, FACTS)
    card_lib.write(tmp_path, first)
    rerun = card_lib.kws_card("afkws", ENTRY, {**FACTS, "seconds": {"corpus": 0, "run": 2}})
    assert card_lib.kept_times(rerun, tmp_path)["seconds"] == FACTS["seconds"]
    retrained = card_lib.kws_card("afkws", {**ENTRY, "seconds": 61.0}, FACTS)
    assert card_lib.kept_times(retrained, tmp_path) is retrained
    assert json.loads((tmp_path / card_lib.CARD_JSON).read_text()) == first


def test_a_card_of_a_model_scored_on_its_test_split_alone_claims_no_other_split():
    entry = {key: value for key, value in ENTRY.items() if key not in ("dev", "final", "heldout")}
    entry["operating_points"] = {"budgets": []}
    page = card_lib.markdown_text(card_lib.kws_card("afkws", entry, FACTS))
    assert "It was not scored on an engine it never heard." in page
    assert "out-of-sample" not in page and "held-out engine's score" not in page


def test_a_rerun_takes_the_corpus_time_of_a_build_report_the_first_run_lacked(tmp_path):
    card_lib.write(tmp_path, card_lib.kws_card("afkws", ENTRY, FACTS))  # corpus: None
    reported = {"corpus": 1455.7, "corpus_from": "build_report-full.json", "run": 2}
    rerun = card_lib.kws_card("afkws", ENTRY, {**FACTS, "seconds": reported})
    kept = card_lib.kept_times(rerun, tmp_path)["seconds"]
    assert kept == {**reported, "run": FACTS["seconds"]["run"]}
    assert "24.3 min (python -m experiments.build_data, build_report-full.json)" in (
        card_lib.markdown_text({**rerun, "seconds": kept})
    )


def _call_scores(f1: float, calls: int) -> dict:
    stream = {
        "timestep": {"precision": f1, "recall": f1, "f1": f1},
        "instance": {"precision": f1, "recall": f1, "f1": f1 / 2},
        "intervals": {"timestep_f1": [f1 - 0.01, f1 + 0.01], "instance_f1": [0.1, 0.2]},
    }
    return {"calls": calls, "hours": calls / 100, "raw": stream, "smoothed": stream}


CALL_FACTS = {
    "labels": ["none", "address"],
    "corpus": {
        "name": "synthetic_calls/questions-full",
        "size": "full",
        "engines": ["espeak"],
        "heldout_engine": "piper",
        "calls": {"train": 1000, "heldout": 200},
    },
    "training": {"fold": 0, "num_folds": 5, "steps": 3000, "batch_size": 8, "seconds": 400.0},
    "seconds": {"corpus": None, "run": 420.0},
    "command": "python -m experiments.ship --config=experiments/configs/shipped.py:x",
}


@pytest.mark.parametrize(("model", "text"), [("multimodal", "ctc_posteriors"), ("audio", None)])
def test_a_call_card_says_what_the_tracker_reads_and_scores_where(model, text):
    facts = {**CALL_FACTS, "training": {**CALL_FACTS["training"], "text": text}}
    scores = {"test": _call_scores(0.9, 200), "heldout": _call_scores(0.3, 200)}
    card = card_lib.calls_card(model, scores, facts)
    page = card_lib.markdown_text(card)
    assert "trained on the other folds' 800 calls, 3000 steps" in page
    assert "| fold 0, espeak: calls it did not train on (200) | 2.00 | 0.900 [0.89, 0.91]" in page
    assert "| heldout, piper: an engine it never heard (200) | 2.00 | 0.300 [0.29, 0.31]" in page
    assert ("character posteriors of the shipped CTC recogniser" in page) == (text is not None)
    assert any("Text from another recogniser" in item for item in card["not_for"]) == (
        text is not None
    )


def test_a_call_card_shows_early_question_frames_where_its_scores_have_them():
    scores = {"test": _call_scores(0.9, 200), "heldout": _call_scores(0.3, 200)}
    page = card_lib.markdown_text(card_lib.calls_card("audio", scores, CALL_FACTS))
    assert "Early question frames" not in page  # a card scored before they were counted
    early = {
        "margin_s": 0.5,
        "hop_s": 0.04,
        "per_class": [None, 0.125],
        "overall": 0.125,
        "early": [0, 3],
        "predicted": [0, 24],
    }
    scores["test"] = {**scores["test"], "raw": {**scores["test"]["raw"], "early_frames": early}}
    page = card_lib.markdown_text(card_lib.calls_card("audio", scores, CALL_FACTS))
    assert "more than 0.5 s before it is first spoken" in page
    assert "| calls | all classes | address |" in page
    assert "| fold 0, espeak: calls it did not train on | 0.125 (3/24) | 0.125 (3/24) |" in page
    rows = [line for line in page.splitlines() if "(3/24)" in line]
    assert len(rows) == 1  # the streams and splits without them: no row
