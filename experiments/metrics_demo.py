"""Metrics demo on generated data: every metric on three synthetic systems, no training
(the experiments themselves: `experiments.reproduce`).

    python -m experiments.metrics_demo --out outputs/metrics_demo

Three synthetic "systems" of rising difficulty are scored at once: every metric runs
inside one `jax.jit`, `vmap`-ed over the systems, and is checked against the NumPy loop
reference. Prints a results table and writes:

  results.json        all numbers, with the data sizes and seed
  frr_vs_fa.png       false rejection rate against false alarms per hour, per system
  timeline.png        gold vs predicted labels of one call, per system
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

import metrics
from metrics import reference, synthetic
from speechkit import compilation, files

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)

DIFFICULTIES = (0.2, 0.5, 0.9)
FA_GRID = tuple(float(x) for x in np.round(np.geomspace(0.5, 200, 25), 3))


def _log(message: str) -> None:
    print(f"[metrics_demo] {message}", file=sys.stderr, flush=True)


def make_data(seed: int, args) -> dict:
    """Gold data shared by all systems, predictions per system (stacked on axis 0)."""
    streams, detection_sets = [], []
    for difficulty in DIFFICULTIES:
        # The generators draw gold first: one seed gives every system the same gold.
        pred, gold, mask = synthetic.label_streams(
            np.random.default_rng(seed), args.calls, args.timesteps, args.classes, difficulty
        )
        streams.append(pred)
        dets, truth = synthetic.detection_sets(
            np.random.default_rng(seed),
            args.utterances,
            40,
            8,
            args.keywords,
            duration=args.seconds,
            difficulty=difficulty,
        )
        detection_sets.append(dets)
    return {
        "pred": np.stack(streams),
        "gold": gold,
        "mask": mask,
        "detections": jax.tree.map(lambda *x: np.stack(x), *detection_sets),
        "ground_truth": truth,
    }


def evaluate(data: dict, args) -> dict:
    """All metrics for all systems in one jitted, vmapped call."""
    total_hours = args.utterances * args.seconds / 3600

    def one_system(pred, detections):
        scores = metrics.detection_scores(
            detections,
            data["ground_truth"],
            num_classes=args.keywords,
            total_hours=total_hours,
            fa_per_hour=(5.0, 25.0, *FA_GRID),
        )
        return {
            "timestep": metrics.timestep_prf(
                pred, data["gold"], data["mask"], num_classes=args.classes
            ),
            "instance": metrics.instance_prf(
                pred, data["gold"], data["mask"], num_classes=args.classes
            ),
            **scores,
        }

    run = jax.jit(jax.vmap(one_system))
    start = time.perf_counter()
    result = jax.block_until_ready(run(jnp.asarray(data["pred"]), data["detections"]))
    _log(
        f"evaluated {len(DIFFICULTIES)} systems in {time.perf_counter() - start:.2f} s "
        "(including compilation)"
    )
    return jax.tree.map(np.asarray, result)


def check_against_reference(data: dict, result: dict, args) -> float:
    """Largest |jitted - NumPy reference| over all reported numbers and systems."""
    worst = 0.0
    total_hours = args.utterances * args.seconds / 3600
    for s in range(len(DIFFICULTIES)):
        pred = data["pred"][s]
        expected = {
            "timestep": reference.timestep_prf(
                pred, data["gold"], data["mask"], num_classes=args.classes
            ),
            "instance": reference.instance_prf(
                pred, data["gold"], data["mask"], num_classes=args.classes
            ),
            **reference.detection_scores(
                jax.tree.map(lambda x, s=s: x[s], data["detections"]),
                data["ground_truth"],
                num_classes=args.keywords,
                total_hours=total_hours,
            ),
        }
        for key, value in expected.items():
            got = [x[s] for x in result[key]] if key in ("timestep", "instance") else result[key][s]
            worst = max(worst, float(np.nanmax(np.abs(np.asarray(got) - np.asarray(value)))))
    return worst


def print_table(result: dict) -> list[dict]:
    header = (
        "system",
        "TIMESTEP P/R/F1",
        "INSTANCE P/R/F1",
        "mAP",
        "AP@5",
        "AP@75",
        "FRR@5",
        "FRR@25",
    )
    rows = []
    print(f"{header[0]:<16}{header[1]:>20}{header[2]:>20}" + "".join(f"{h:>8}" for h in header[3:]))
    for s, difficulty in enumerate(DIFFICULTIES):
        row = {
            "system": f"difficulty {difficulty}",
            "timestep": [float(x[s]) for x in result["timestep"]],
            "instance": [float(x[s]) for x in result["instance"]],
            **{k: float(result[k][s]) for k in ("mAP", "AP@0.05", "AP@0.75", "FRR@5", "FRR@25")},
        }
        rows.append(row)
        prf = ["/".join(f"{v:.2f}" for v in row[k]) for k in ("timestep", "instance")]
        numbers = "".join(
            f"{row[k]:>8.3f}" for k in ("mAP", "AP@0.05", "AP@0.75", "FRR@5", "FRR@25")
        )
        print(f"{row['system']:<16}{prf[0]:>20}{prf[1]:>20}{numbers}")
    return rows


def plot_frr(result: dict, path: str) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for s, difficulty in enumerate(DIFFICULTIES):
        frr = [result[f"FRR@{b:g}"][s] for b in FA_GRID]
        ax.plot(FA_GRID, frr, marker=".", label=f"difficulty {difficulty}")
    for budget in (5, 25):
        ax.axvline(budget, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("false alarms per hour")
    ax.set_ylabel("false rejection rate")
    ax.set_title("Keyword detection: FRR against the false-alarm budget")
    ax.legend()
    fig.tight_layout()
    files.save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_timeline(data: dict, path: str, num_classes: int, span: int = 3000) -> None:
    systems = len(DIFFICULTIES)
    fig, axes = plt.subplots(systems + 1, 1, figsize=(9, 1.1 * (systems + 1)), sharex=True)
    rows = [("gold", data["gold"][0])] + [
        (f"difficulty {d}", data["pred"][s][0]) for s, d in enumerate(DIFFICULTIES)
    ]
    colours = ["#eeeeee", *plt.get_cmap("tab10").colors][:num_classes]
    cmap = matplotlib.colors.ListedColormap(colours)
    for ax, (name, labels) in zip(axes, rows, strict=True):
        ax.imshow(
            labels[None, :span],
            aspect="auto",
            cmap=cmap,
            vmin=-0.5,
            vmax=num_classes - 0.5,
            interpolation="nearest",
        )
        ax.set_yticks([])
        ax.set_ylabel(name, rotation=0, ha="right", va="center", fontsize=8)
    axes[-1].set_xlabel("timestep (grey = background, colours = question classes)")
    fig.suptitle("Question tracking: gold vs predicted labels, first call", fontsize=10)
    fig.tight_layout()
    files.save_figure(fig, path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="outputs/metrics_demo", help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--calls", type=int, default=32, help="label streams per system")
    parser.add_argument("--timesteps", type=int, default=6000)
    parser.add_argument("--classes", type=int, default=7, help="question classes + background")
    parser.add_argument("--utterances", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=20.0, help="duration per utterance")
    parser.add_argument("--keywords", type=int, default=20)
    args = parser.parse_args(argv)
    compilation.enable_cache()
    os.makedirs(args.out, exist_ok=True)
    _log(f"generating data (seed {args.seed}) ...")
    data = make_data(args.seed, args)
    result = evaluate(data, args)
    _log("checking against the NumPy loop reference ...")
    difference = check_against_reference(data, result, args)
    rows = print_table(result)
    print(f"max |jitted - reference| over every number above: {difference:.2e}")
    plot_frr(result, os.path.join(args.out, "frr_vs_fa.png"))
    plot_timeline(data, os.path.join(args.out, "timeline.png"), args.classes)
    files.write_json(
        os.path.join(args.out, "results.json"),
        {
            "arguments": vars(args),
            "systems": rows,
            "max_abs_difference_vs_reference": difference,
        },
    )
    _log(f"wrote results.json, frr_vs_fa.png and timeline.png to {args.out}")
    return 0 if difference <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
