"""experiments.report.card: an AF-KWS model card from a results.json entry."""

import json

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
