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
    for model in dict.fromkeys(row["model"] for row in rows):
        mine = [row for row in rows if row["model"] == model]
        transfers = [row["transfer"] for row in mine if row["transfer"] is not None]
        means[model] = {
            "in_engine_mAP": sum(row["in_engine"]["mAP"] for row in mine) / len(mine),
            "heldout_mAP": sum(row["heldout"]["mAP"] for row in mine) / len(mine),
            "transfer": sum(transfers) / len(transfers) if transfers else None,
        }
    return means


def table(results: dict) -> str:
    """The leave-one-engine-out matrix as a Markdown table."""

    def score(part: dict) -> str:
        low, high = part["mAP_interval"]
        return f"{part['mAP']:.3f} [{low:.2f}, {high:.2f}]"

    lines = [
        "| held out | trained on | model | in-engine mAP | held-out mAP | transfer |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["cells"]:
        transfer = "n/a" if row["transfer"] is None else f"{row['transfer']:.2f}"
        lines.append(
            f"| {row['heldout_engine']} | {', '.join(row['training_engines'])} | "
            f"{row['model']} | {score(row['in_engine'])} | {score(row['heldout'])} | "
            f"{transfer} |"
        )
    for model, mean in results["models"].items():
        transfer = "n/a" if mean["transfer"] is None else f"{mean['transfer']:.2f}"
        lines.append(
            f"| mean | | {model} | {mean['in_engine_mAP']:.3f} | {mean['heldout_mAP']:.3f} "
            f"| {transfer} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    common.main(train_and_evaluate)
