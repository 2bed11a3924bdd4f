r"""What varied speech buys: the leave-one-engine-out matrix of AF-KWS and audio-only
MultiQT on corpora all three engines speak, for each speech variation.

    python -m experiments.variation_matrix --config=experiments/configs/variation_matrix.py:quick \
        --workdir=outputs/variation-matrix --config.data_dir=outputs/tensorflow_datasets

Rows are the variations of `config.variations` (`speechkit.tts.VARIATIONS`: "plain",
the corpora as they were; "speakers", with the speaker stage; "varied", with the stage
and varied scripts and keyword places). Each reads the corpora of engine set "all"
(`synthetic_kws/<size>-all[-<variation>]`, `synthetic_calls/questions-<size>-all[-...]`,
built when missing) and holds each engine out once: the model trains on the records the
other two engines spoke (`config.engines`) and is scored on their test records
(in-engine: the keyword corpus's test split, MultiQT's cross-validation test folds) and
on every training-split record of the held-out engine (`config.evals.heldout` with
`engines`), none of which it heard. Same steps and seeds in every cell.

Writes WORKDIR/<variation>/<task>/<held-out engine>/ (the runs), WORKDIR/results.json
(per cell the in-engine and held-out score with intervals and their ratio; for MultiQT
also the early question frames, `metrics.early_frames`; per variation and task the
means) and WORKDIR/matrix.png (held-out against in-engine score, a marker per cell).
"""

from __future__ import annotations

import os

import ml_collections

from experiments import common, cskws, leave_one_out, multiqt
from experiments.report.markdown import header, number, ratio, row, scored
from speechkit import files, tts

log = common.logger("variation_matrix")
ENGINES = leave_one_out.ENGINES
TASKS = ("kws", "questions")


def chosen(config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(variations, tasks) of the config, checked."""
    variations = tuple(name.strip() for name in config.variations.split(",") if name.strip())
    tasks = tuple(name.strip() for name in config.tasks.split(",") if name.strip())
    for name, values, allowed in (
        ("variations", variations, tts.VARIATIONS),
        ("tasks", tasks, TASKS),
    ):
        unknown = set(values) - set(allowed)
        if unknown or not values:
            raise ValueError(f"config.{name}: expected some of {list(allowed)}, got {values}")
    return variations, tasks


def kws_cell(config, variation: str, heldout: str) -> ml_collections.ConfigDict:
    """The CS-KWS config of the cell that holds `heldout` out of `variation`'s corpus."""
    base = ml_collections.ConfigDict(config.cskws.to_dict())
    base.dataset = f"synthetic_kws/{tts.corpus_config_name(config.preset, 'all', variation)}"
    base.data_dir = config.data_dir
    return leave_one_out.cell(base, heldout)


def calls_cell(config, variation: str, heldout: str) -> ml_collections.ConfigDict:
    """The MultiQT config of the cell that holds `heldout` out of `variation`'s calls."""
    base = ml_collections.ConfigDict(config.multiqt.to_dict())
    base.data_dir = config.data_dir
    base.engine_set, base.variation = "all", variation
    return leave_one_out.cell(base, heldout)


def run_cell(config, variation: str, task: str, heldout: str, workdir: str) -> dict:
    """One cell's run (trained, or its saved scores read) and its row."""
    folder = os.path.join(workdir, variation, task, heldout)
    trained_on = [e for e in ENGINES if e != heldout]
    log(f"{variation} / {task}: held out {heldout}, trained on {', '.join(trained_on)}")
    if task == "kws":
        found = leave_one_out.kws_row(
            cskws.train_and_evaluate(kws_cell(config, variation, heldout), folder)
        )
    else:
        cell = calls_cell(config, variation, heldout)
        found = leave_one_out.calls_row(multiqt.train_and_evaluate(cell, folder))
    return {
        "variation": variation,
        "task": task,
        "heldout_engine": heldout,
        "training_engines": trained_on,
        **found,
    }


def means(rows: list[dict]) -> list[dict]:
    """Per variation and task: the mean in-engine and held-out score and transfer."""
    out = []
    for key in dict.fromkeys((r["variation"], r["task"]) for r in rows):
        mine = [r for r in rows if (r["variation"], r["task"]) == key]
        transfers = [r["transfer"] for r in mine if r["transfer"] is not None]
        out.append(
            {
                "variation": key[0],
                "task": key[1],
                "cells": len(mine),
                "in_engine": sum(r["in_engine"]["score"] for r in mine) / len(mine),
                "heldout": sum(r["heldout"]["score"] for r in mine) / len(mine),
                "transfer": sum(transfers) / len(transfers) if transfers else None,
            }
        )
    return out


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    variations, tasks = chosen(config)
    for engine in ENGINES:
        tts.require_engine(engine)  # before any work: the error says what to install
    rows, results = [], {}
    for variation in variations:
        for task in tasks:
            for heldout in ENGINES:
                rows.append(run_cell(config, variation, task, heldout, workdir))
                # written after every cell, so a stopped run shows what it measured
                results = {"preset": config.preset, "cells": rows, "means": means(rows)}
                files.write_json(os.path.join(workdir, "results.json"), results)
    draw(results, os.path.join(workdir, "matrix.png"))
    print(table(results))
    return results


def table(results: dict) -> str:
    """The matrix as a Markdown table: a row per cell, then the means."""
    lines = header(
        "variation", "task", "held out", "in-engine", "held-out", "transfer", "early frames"
    )
    for cell in results["cells"]:
        lines.append(
            row(
                cell["variation"],
                cell["task"],
                cell["heldout_engine"],
                *(scored(cell[p]["score"], cell[p]["interval"]) for p in ("in_engine", "heldout")),
                ratio(cell["transfer"]),
                _early_text(cell.get("early_frames")),
            )
        )
    for mean in results["means"]:
        lines.append(
            row(
                mean["variation"],
                mean["task"],
                "mean",
                number(mean["in_engine"]),
                number(mean["heldout"]),
                ratio(mean["transfer"]),
                "",
            )
        )
    return "\n".join(lines)


def _early_text(early: dict | None) -> str:
    """ "in-engine / held-out" overall shares of early question frames; "" without."""
    if not early or not early.get("heldout"):
        return ""
    return " / ".join(
        number(early[part]["overall"]) if early.get(part) else "-"
        for part in ("in_engine", "heldout")
    )


def draw(results: dict, path: str) -> None:
    """Held-out against in-engine score, a panel per task, a colour per variation."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    tasks = list(dict.fromkeys(cell["task"] for cell in results["cells"]))
    figure, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4.5), squeeze=False)
    for axis, task in zip(axes[0], tasks, strict=True):
        for variation in dict.fromkeys(c["variation"] for c in results["cells"]):
            mine = [c for c in results["cells"] if (c["task"], c["variation"]) == (task, variation)]
            x = [c["in_engine"]["score"] for c in mine]
            y = [c["heldout"]["score"] for c in mine]
            axis.scatter(x, y, label=variation)
            for cell, xi, yi in zip(mine, x, y, strict=True):
                axis.annotate(cell["heldout_engine"], (xi, yi), fontsize=7)
        top = max(
            0.6, 1.15 * max(c["in_engine"]["score"] for c in results["cells"] if c["task"] == task)
        )
        axis.plot([0, top], [0, top], color="grey", linewidth=0.8)
        axis.plot([0, top], [0, 0.6 * top], color="grey", linestyle="--", linewidth=0.8)
        metric = "mAP" if task == "kws" else "TIMESTEP F1"
        axis.set(xlim=(0, top), ylim=(0, top), title=task, xlabel=f"in-engine {metric}")
        axis.set(ylabel=f"held-out engine {metric}")
        axis.legend(title="variation (-- 0.6x)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    common.main(train_and_evaluate)
