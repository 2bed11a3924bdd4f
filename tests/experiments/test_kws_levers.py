"""experiments.kws_levers: every lever names real fields that build, and the table is
assembled (and drawn) from the CS-KWS runs (stand-in payloads here, so no training)."""

import json

import pytest

from cskws_jax import losses, model, train
from experiments import common, kws_levers
from experiments.configs import kws_levers as configs


@pytest.mark.parametrize("name", sorted(configs.CATALOGUE))
def test_each_lever_sets_fields_that_build(name):
    config = configs.get_config("quick")
    lever = kws_levers.lever_config(config, name)
    assert lever.evals.heldout.split == "heldout[:50%]"
    for section, cls in (
        ("model", model.AfKwsConfig),
        ("augment", train.AugmentConfig),
        ("loss", losses.LossConfig),
        ("decode", train.PeakDecodingConfig),
    ):
        common.build(
            cls,
            lever[section],
            f"config.{section}",
            **({"num_keywords": 20} if cls is model.AfKwsConfig else {}),
        )
    for path, value in configs.CATALOGUE[name].items():
        node = lever
        for part in path.split("."):
            node = node[part]
        assert node == value or tuple(node) == tuple(value), path


def test_the_table_has_a_row_per_lever(tmp_path, monkeypatch, capsys):
    def fake_run(cell, workdir):
        scores = {"mAP": 0.4, "intervals": {"mAP": [0.35, 0.45]}}
        held = {
            "mAP": 0.1 if cell.model.normalise == "none" else 0.2,
            "intervals": {"mAP": [0.05, 0.25]},
        }
        return {"models": {cell.models: {**scores, "heldout": held, "transfer": held["mAP"] / 0.4}}}

    monkeypatch.setattr(kws_levers.cskws, "train_and_evaluate", fake_run)
    config = configs.get_config("smoke")
    config.levers = "base, cmn_vtlp_nounk"
    results = kws_levers.train_and_evaluate(config, str(tmp_path))
    assert [(r["lever"], r["model"]) for r in results["rows"]] == [
        ("base", "afkws"),
        ("cmn_vtlp_nounk", "afkws_no_unknown"),
    ]
    assert results["rows"][1]["fields"]["augment.vtlp"] == [0.9, 1.1]
    assert results["rows"][1]["development"]["mAP"] == 0.2
    assert json.loads((tmp_path / "results.json").read_text()) == results
    assert (tmp_path / "levers.png").read_bytes().startswith(b"\x89PNG")
    assert (
        "| cmn_vtlp_nounk | afkws_no_unknown | 0.400 [0.35, 0.45] | 0.200 [0.05, 0.25] | 0.50 |"
        in capsys.readouterr().out
    )
    config.levers = "base,louder"
    with pytest.raises(ValueError, match="config.levers: unknown"):
        kws_levers.train_and_evaluate(config, str(tmp_path))
