"""experiments.ship: the leave-one-engine-out figures of a shipped AF-KWS model that every
engine trained (the runner here a stand-in, so no training)."""

import pytest

from experiments import leave_one_out, ship
from experiments.configs import shipped
from experiments.report import card as card_lib


def _payload(in_engine: float, heldout: float) -> dict:
    def scores(value):
        return {"mAP": value, "intervals": {"mAP": [value - 0.05, value + 0.05]}}

    entry = {**scores(in_engine), "heldout": scores(heldout), "transfer": heldout / in_engine}
    return {"models": {"afkws": {**entry, "seconds": 60.0}}}


def test_the_shipped_detector_is_trained_again_without_each_engine(tmp_path, monkeypatch):
    config = shipped.get_config("afkws-top20")
    assert config.leave_one_out and config.dataset.endswith("-all-speakers")
    assert config.eval.choose_on == "dev"
    seen = []

    def fake(cell, workdir):
        seen.append((cell.engines, cell.evals.to_dict(), cell.eval.choose_on, workdir))
        return _payload(0.8, 0.4 if cell.engines == "festival,piper" else 0.6)

    monkeypatch.setattr(ship.cskws, "train_and_evaluate", fake)
    rows = ship.leave_one_out_rows(config, str(tmp_path))
    assert [engines for engines, *_ in seen] == [
        "festival,piper",
        "espeak,piper",
        "espeak,festival",
    ]
    for (_, evals, choose_on, folder), heldout in zip(seen, leave_one_out.ENGINES, strict=True):
        assert evals == {"heldout": {"split": "train", "engines": heldout}}  # dev, final gone
        assert choose_on == "" and folder == str(tmp_path / "leave-one-out" / heldout)
    assert [row["heldout_engine"] for row in rows] == list(leave_one_out.ENGINES)
    assert rows[0]["training_engines"] == ["festival", "piper"]
    assert rows[0]["transfer"] == pytest.approx(0.5) and rows[1]["heldout"]["score"] == 0.6
    assert config.engines == "" and "dev" in config.evals  # the shipped config is untouched


def test_the_card_gives_the_leave_one_out_figures_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(ship.cskws, "train_and_evaluate", lambda cell, workdir: _payload(0.8, 0.4))
    rows = ship.leave_one_out_rows(shipped.get_config("afkws-top20"), str(tmp_path))
    entry = {
        "mAP": 0.8,
        "FRR@5": 0.2,
        "FRR@25": 0.1,
        "test_hours": 3.0,
        "intervals": {},
        "seconds": 300.0,
        "operating_points": {"budgets": []},
    }
    facts = {
        "keywords": ["about"],
        "corpus": {
            "name": "synthetic_kws/large-all-speakers",
            "size": "large",
            "engines": ["espeak", "festival", "piper"],
            "heldout_engine": None,
            "utterances": {"train": 2560, "test": 2400},
        },
        "training": {"steps": 6000, "batch_size": 16, "init": None},
        "seconds": {"corpus": 60.0, "run": 400.0},
        "command": "python -m experiments.ship",
    }
    page = card_lib.markdown_text(card_lib.kws_card("afkws", entry, facts, rows))
    assert "## Leave one engine out" in page and "Every engine trained this model" in page
    assert "| espeak | festival, piper | 0.800 [0.75, 0.85] | 0.400 [0.35, 0.45] | 0.50 |" in page
    assert "Mean held out / in-engine: 0.50." in page
    assert "Training and scoring the 3 took 3.0 min" in page
    assert "its recipe's leave-one-engine-out figures are the only measure" in page
    without = card_lib.markdown_text(card_lib.kws_card("afkws", entry, facts))
    assert "Leave one engine out" not in without
    assert "It was not scored on an engine it never heard." in without


def _calls_payload(in_engine: float, heldout: float) -> dict:
    def scores(value):
        early = {"overall": 0.25, "early": [0, 1], "predicted": [0, 4], "margin_s": 0.5}
        return {"folds": [{"timestep": {"f1": value}}], "mean": {"timestep": {"f1": value}}}, early

    (inside, early), (outside, _) = scores(in_engine), scores(heldout)
    entry = {**inside, "early_frames": early, "heldout": {**outside, "early_frames": early}}
    return {"models": {"audio": {**entry, "transfer": {"timestep_f1": heldout / in_engine}}}}


def test_a_tracker_recipe_is_trained_again_without_each_engine(tmp_path, monkeypatch):
    config = shipped.get_config("multiqt-questions-audio")
    config.leave_one_out = True
    seen = []

    def fake(cell, workdir):
        seen.append((cell.engines, cell.evals.heldout.to_dict(), cell.folds, workdir))
        return _calls_payload(0.8, 0.6)

    monkeypatch.setattr(ship.multiqt, "train_and_evaluate", fake)
    rows = ship.leave_one_out_rows(config, str(tmp_path))
    assert [s[0] for s in seen] == ["festival,piper", "espeak,piper", "espeak,festival"]
    assert seen[0][1] == {"split": "train", "engines": "espeak"} and seen[0][2] == "0"
    assert seen[2][3] == str(tmp_path / "leave-one-out" / "piper")
    assert rows[0]["transfer"] == pytest.approx(0.75) and rows[0]["metric"] == "TIMESTEP F1"
    assert rows[0]["seconds"] is not None  # measured by ship: the runner keeps none
    card = {"leave_one_engine_out": rows}
    lines = card_lib.leave_one_out_lines(card)
    assert "the range over the folds trained" in lines[0]
    assert "| espeak | festival, piper | 0.800 [0.80, 0.80] | 0.600 [0.60, 0.60] | 0.75 |" in (
        "\n".join(lines)
    )
    assert "0.250 (1/4) / 0.250 (1/4)" in "\n".join(lines)
