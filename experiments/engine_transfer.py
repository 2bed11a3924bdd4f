r"""Leave-one-engine-out keyword spotting: how well AF-KWS hears a synthesiser it never
heard, for every synthesiser installed.

    python -m experiments.engine_transfer --config=experiments/configs/engine_transfer.py:quick \
        --workdir=outputs/engine-transfer --config.data_dir=outputs/tensorflow_datasets

Each engine of the set (`cskws_jax.datasets.render.LEAVE_ONE_OUT`) is held out once: the
CS-KWS experiment (`experiments.cskws`, as `config.cskws` says) trains on the synthetic_kws
corpus of the preset's size whose train and test splits the other engines speak, and
scores on its test split (in-engine: voices of the training engines not heard in
training) and on its heldout split (the left-out engine alone), each with its 95 %
bootstrap interval. The corpora are built when missing (`config.cskws.build_missing`).

Writes WORKDIR/<held-out engine>/ (the CS-KWS run: results.json, models, bundles) and
WORKDIR/results.json: per held-out engine and model, the training engines, the corpus,
the in-engine and held-out mAP with intervals and their ratio (transfer), and per model
the mean held-out mAP and transfer over the engines; prints the matrix as a table.
"""

from __future__ import annotations

import os

import ml_collections

from cskws_jax.datasets import render
from experiments import common, cskws
from experiments.report.markdown import header, number, ratio, row, scored
from speechkit import files, tts

log = common.logger("engine_transfer")
ENGINES = ("auto", *render.LEAVE_ONE_OUT)


def engine_set(choice: str) -> str:
    """The `render.LEAVE_ONE_OUT` set of `config.engines` ("auto": festival where its
    voices are installed, else pip)."""
    if choice not in ENGINES:
        raise ValueError(f"config.engines: expected one of {ENGINES}, got {choice!r}")
    if choice == "auto":
        return "festival" if "festival" in tts.available_engines() else "pip"
    return choice


def cell_config(config, engines: str, heldout: str) -> ml_collections.ConfigDict:
    """The CS-KWS config of the cell that holds `heldout` out of set `engines`."""
    cell = ml_collections.ConfigDict(config.cskws.to_dict())
    name = render.kws_config_name(config.preset, render.LEAVE_ONE_OUT[engines][heldout])
    cell.dataset = f"synthetic_kws/{name}"
    cell.data_dir = config.data_dir
    return cell


def _summary(entry: dict, where: str) -> dict:
    scores = entry if where == "test" else entry[where]
    return {"mAP": scores["mAP"], "mAP_interval": scores["intervals"]["mAP"]}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    engines = engine_set(config.engines)
    cells = render.LEAVE_ONE_OUT[engines]
    for engine in cells:
        tts.require_engine(engine)  # before any work: the error says what to install
    rows = []
    for heldout in cells:
        cell = cell_config(config, engines, heldout)
        trained_on = [e for e in render.KWS_ENGINE_SETS[cells[heldout]][0] if e != heldout]
        log(f"held out: {heldout}; training engines {', '.join(trained_on)}; {cell.dataset}")
        payload = cskws.train_and_evaluate(cell, os.path.join(workdir, heldout))
        for model, entry in payload["models"].items():
            rows.append(
                {
                    "heldout_engine": heldout,
                    "training_engines": trained_on,
                    "dataset": cell.dataset,
                    "model": model,
                    "in_engine": _summary(entry, "test"),
                    "heldout": _summary(entry, "heldout"),
                    "transfer": entry["transfer"],
                }
            )
    results = {"engines": engines, "cells": rows, "models": _means(rows)}
    files.write_json(os.path.join(workdir, "results.json"), results)
    print(table(results))
    return results


def _means(rows: list[dict]) -> dict:
    """Per model: the mean in-engine and held-out mAP and transfer over the cells."""
    means = {}
    for model in dict.fromkeys(cell["model"] for cell in rows):
        mine = [cell for cell in rows if cell["model"] == model]
        transfers = [cell["transfer"] for cell in mine if cell["transfer"] is not None]
        means[model] = {
            "in_engine_mAP": sum(cell["in_engine"]["mAP"] for cell in mine) / len(mine),
            "heldout_mAP": sum(cell["heldout"]["mAP"] for cell in mine) / len(mine),
            "transfer": sum(transfers) / len(transfers) if transfers else None,
        }
    return means


def table(results: dict) -> str:
    """The leave-one-engine-out matrix as a Markdown table."""
    lines = header("held out", "trained on", "model", "in-engine mAP", "held-out mAP", "transfer")
    for cell in results["cells"]:
        lines.append(
            row(
                cell["heldout_engine"],
                ", ".join(cell["training_engines"]),
                cell["model"],
                *(
                    scored(cell[part]["mAP"], cell[part]["mAP_interval"])
                    for part in ("in_engine", "heldout")
                ),
                ratio(cell["transfer"]),
            )
        )
    for model, mean in results["models"].items():
        lines.append(
            row(
                "mean",
                "",
                model,
                number(mean["in_engine_mAP"]),
                number(mean["heldout_mAP"]),
                ratio(mean["transfer"]),
            )
        )
    return "\n".join(lines)


if __name__ == "__main__":
    common.main(train_and_evaluate)
