"""Leave one engine out on a corpus all engines speak: the same recipe trained on the
records of the other engines and scored on theirs (in-engine) and on the held-out
engine's.

    cell = kws_cell(config, "festival")   # a runner config that never hears Festival
    row = kws_row(cskws.train_and_evaluate(cell, folder))

The held-out engine is scored on every record of the training split it spoke
(`heldout_evaluation`), none of which the cell's model heard. Used by
`experiments.variation_matrix` (a cell per variation) and `experiments.ship` (the
leave-one-engine-out figures of a shipped model that every engine trained).
"""

from __future__ import annotations

import ml_collections

ENGINES = ("espeak", "festival", "piper")  # speechkit.tts.ENGINE_SETS["all"]


def heldout_evaluation(heldout: str) -> ml_collections.ConfigDict:
    """The held-out engine's evaluation: every record of the training split it spoke."""
    return ml_collections.ConfigDict({"heldout": {"split": "train", "engines": heldout}})


def cell(config: ml_collections.ConfigDict, heldout: str) -> ml_collections.ConfigDict:
    """A copy of runner config `config` (its corpus spoken by every engine of `ENGINES`)
    that trains on the other engines' records and declares the held-out evaluation as its
    only one."""
    if heldout not in ENGINES:
        raise ValueError(f"held-out engine: expected one of {ENGINES}, got {heldout!r}")
    found = ml_collections.ConfigDict(config.to_dict())
    found.engines = ",".join(engine for engine in ENGINES if engine != heldout)
    found.evals = heldout_evaluation(heldout)
    return found


def kws_cell(config: ml_collections.ConfigDict, heldout: str) -> ml_collections.ConfigDict:
    """`cell` of an `experiments.cskws` config: its operating points chosen on the
    in-engine test records (the config's own evaluations to choose them on are gone)."""
    found = cell(config, heldout)
    found.eval.choose_on = ""
    found.eval.measure_on = ""
    return found


def kws_row(payload: dict, model: str = "afkws") -> dict:
    """{"metric", "in_engine", "heldout" (each {"score", "interval"}), "transfer"} of an
    `experiments.cskws` cell's results."""
    entry = payload["models"][model]
    return {
        "metric": "mAP",
        "in_engine": {"score": entry["mAP"], "interval": entry["intervals"]["mAP"]},
        "heldout": {
            "score": entry["heldout"]["mAP"],
            "interval": entry["heldout"]["intervals"]["mAP"],
        },
        "transfer": entry["transfer"],
    }


def _fold_spread(summary: dict) -> list[float]:
    """[lowest, highest] TIMESTEP F1 over the folds (MultiQT's scores have no bootstrap)."""
    values = [fold["timestep"]["f1"] for fold in summary["folds"]]
    return [min(values), max(values)]


def calls_row(payload: dict, model: str = "audio") -> dict:
    """`kws_row` of an `experiments.multiqt` cell (TIMESTEP F1, its range over the folds),
    with the early question frames in-engine and held out."""
    entry = payload["models"][model]
    return {
        "metric": "TIMESTEP F1",
        "in_engine": {"score": entry["mean"]["timestep"]["f1"], "interval": _fold_spread(entry)},
        "heldout": {
            "score": entry["heldout"]["mean"]["timestep"]["f1"],
            "interval": _fold_spread(entry["heldout"]),
        },
        "transfer": entry["transfer"]["timestep_f1"],
        "early_frames": {
            "in_engine": entry.get("early_frames"),
            "heldout": entry["heldout"].get("early_frames"),
        },
    }
