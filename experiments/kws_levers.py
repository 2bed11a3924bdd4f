r"""Screens the AF-KWS engine-transfer levers on a development split.

    python -m experiments.kws_levers --config=experiments/configs/kws_levers.py:quick \
        --workdir=outputs/kws-levers --config.data_dir=outputs/tensorflow_datasets

Each lever of `config.levers` (`experiments.configs.kws_levers.CATALOGUE`: dotted fields
of the CS-KWS config) is a CS-KWS run (`experiments.cskws`) in WORKDIR/<lever>/ (resumed
and not redone on a rerun; a folder trained with another config is refused), scored on
the in-engine test split and on the evaluation `config.cskws.evals.heldout` (the first
half of the held-out engine's split by default), with 95 % bootstrap intervals. Writes
WORKDIR/results.json (a row per lever: its fields, the model, the corpus, in-engine and
development mAP with intervals, their ratio, seconds), prints the table and draws the
levers as points, development against in-engine mAP with the line where the one is
half the other (WORKDIR/levers.png).
"""

from __future__ import annotations

import os

import ml_collections

from experiments import common, cskws
from experiments.configs import kws_levers as levers_config
from experiments.report import figures
from experiments.report.markdown import header, ratio, row, scored
from speechkit import files

log = common.logger("kws_levers")


def lever_names(config) -> list[str]:
    names = [name.strip() for name in config.levers.split(",") if name.strip()]
    unknown = [name for name in names if name not in levers_config.CATALOGUE]
    if unknown or not names:
        raise ValueError(
            f"config.levers: unknown {unknown or 'none given'}; expected some of "
            f"{', '.join(levers_config.CATALOGUE)}"
        )
    return names


def lever_config(config, name: str) -> ml_collections.ConfigDict:
    """The CS-KWS config of lever `name`."""
    base = ml_collections.ConfigDict(config.cskws.to_dict())
    base.data_dir = config.data_dir
    return common.variant(base, levers_config.CATALOGUE[name])


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    rows = []
    for name in lever_names(config):
        lever = lever_config(config, name)
        folder = os.path.join(workdir, name)
        common.check_variant(folder, lever)
        log(f"{name}: {levers_config.CATALOGUE[name] or 'the preset as it is'}")
        payload = cskws.train_and_evaluate(lever, folder)
        for model, entry in payload["models"].items():
            rows.append(
                {
                    "lever": name,
                    "fields": {k: _plain(v) for k, v in levers_config.CATALOGUE[name].items()},
                    "model": model,
                    "dataset": lever.dataset,
                    "in_engine": {"mAP": entry["mAP"], "interval": entry["intervals"]["mAP"]},
                    "development": {
                        "mAP": entry["heldout"]["mAP"],
                        "interval": entry["heldout"]["intervals"]["mAP"],
                    },
                    "transfer": entry["transfer"],
                    "seconds": entry.get("seconds"),
                }
            )
    results = {"development_split": config.cskws.evals.heldout.split, "rows": rows}
    files.write_json(os.path.join(workdir, "results.json"), results)
    figures.levers_figure(rows, os.path.join(workdir, "levers.png"))
    print(table(results))
    return results


def _plain(value):
    return [_plain(v) for v in value] if isinstance(value, tuple | list) else value


def table(results: dict) -> str:
    """The levers as a Markdown table."""
    lines = header("lever", "model", "in-engine mAP", "development mAP", "transfer")
    for item in results["rows"]:
        lines.append(
            row(
                item["lever"],
                item["model"],
                *(
                    scored(item[part]["mAP"], item[part]["interval"])
                    for part in ("in_engine", "development")
                ),
                ratio(item["transfer"]),
            )
        )
    return "\n".join(lines)


if __name__ == "__main__":
    common.main(train_and_evaluate)
