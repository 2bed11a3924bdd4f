"""experiments.engine_transfer: the leave-one-engine-out cells hold out each engine once,
and the matrix is assembled from the CS-KWS runs (here stand-in payloads, so no training)."""

import json

import pytest

from cskws_jax.datasets import render, synthetic_kws
from experiments import engine_transfer
from experiments.configs import engine_transfer as configs


@pytest.mark.parametrize("engines", sorted(render.LEAVE_ONE_OUT))
def test_each_engine_is_held_out_once_by_a_built_config(engines):
    cells = render.LEAVE_ONE_OUT[engines]
    all_engines = set(cells)
    for heldout, engine_set in cells.items():
        speakers, held = render.KWS_ENGINE_SETS[engine_set]
        assert held == heldout and set(speakers) == all_engines
        name = render.kws_config_name("quick", engine_set)
        built = synthetic_kws.SyntheticKws.builder_configs[name].render_config
        assert built.heldout_engine == heldout and set(built.engines) == all_engines
        assert heldout not in render.split_engines(built.engines, heldout, "train")
    with pytest.raises(ValueError, match="engine_set"):
        render.kws_config_name("quick", "no-piper")


def _payload(in_engine: float, heldout: float) -> dict:
    def scores(value):
        return {"mAP": value, "intervals": {"mAP": [value - 0.05, value + 0.05]}}

    entry = {**scores(in_engine), "heldout": scores(heldout), "transfer": heldout / in_engine}
    return {"models": {"afkws": entry}}


def test_the_matrix_has_a_row_per_held_out_engine(tmp_path, monkeypatch, capsys):
    scores = {"espeak": (0.4, 0.1), "piper": (0.5, 0.2)}
    seen = []

    def fake_run(cell, workdir):
        heldout = "espeak" if cell.dataset.endswith("no-espeak") else "piper"
        seen.append((cell.dataset, cell.data_dir, workdir))
        return _payload(*scores[heldout])

    monkeypatch.setattr(engine_transfer.cskws, "train_and_evaluate", fake_run)
    config = configs.get_config("smoke")
    config.engines, config.data_dir = "pip", "/data"
    results = engine_transfer.train_and_evaluate(config, str(tmp_path))
    assert [s[0] for s in seen] == ["synthetic_kws/smoke-pip-no-espeak", "synthetic_kws/smoke"]
    assert {s[1] for s in seen} == {"/data"}
    assert seen[0][2] == str(tmp_path / "espeak")
    rows = {row["heldout_engine"]: row for row in results["cells"]}
    assert rows["espeak"]["training_engines"] == ["piper"]
    assert rows["piper"]["heldout"]["mAP"] == 0.2
    assert results["models"]["afkws"]["heldout_mAP"] == pytest.approx(0.15)
    assert results["models"]["afkws"]["transfer"] == pytest.approx((0.25 + 0.4) / 2)
    assert json.loads((tmp_path / "results.json").read_text()) == results
    printed = capsys.readouterr().out
    assert "| espeak | piper | afkws | 0.400 [0.35, 0.45] | 0.100 [0.05, 0.15] | 0.25 |" in printed
    config.engines = "all"
    with pytest.raises(ValueError, match="config.engines"):
        engine_transfer.train_and_evaluate(config, str(tmp_path))


def test_an_evaluation_can_score_a_slice_of_a_split(smoke_build):
    """A development half to choose settings on, the other half scored once."""
    import tensorflow_datasets as tfds

    from experiments.scoring import evals

    data_dir = str(smoke_build[0])
    sources = tfds.data_source("synthetic_kws/smoke", data_dir=data_dir)
    halves = [
        evals.split_of(
            evals.Evaluation(name, split), "synthetic_kws/smoke", sources, print, data_dir
        )
        for name, split in (("dev", "heldout[:50%]"), ("final", "heldout[50%:]"))
    ]
    whole = sources["heldout"]
    assert [len(h) for h in halves] == [len(whole) // 2, len(whole) - len(whole) // 2]
    ids = [r["utterance_id"] for h in halves for r in (h[i] for i in range(len(h)))]
    assert ids == [whole[i]["utterance_id"] for i in range(len(whole))]
    assert evals.base_split("heldout[:50%]") == "heldout"
    with pytest.raises(ValueError, match="config.evals.bad"):
        evals.split_of(
            evals.Evaluation("bad", "heldout[:x]"), "synthetic_kws/smoke", sources, print, data_dir
        )
