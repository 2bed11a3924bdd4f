"""The reports' figures (matplotlib, Agg), each written by `write`: the studies' (one per
study, `study_figures`) and report.md's (per-class F1, a call's timeline, the KWS
precision-recall, FRR and DET curves)."""

from __future__ import annotations

import os

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.report.markdown import point_text  # noqa: E402
from experiments.report.models import KWS_MODELS, KWS_NAMES, MULTIQT_NAMES  # noqa: E402
from speechkit import files  # noqa: E402

DPI = 120


def write(figure, path: str) -> None:
    """`figure` laid out and saved to `path` as a PNG: through a temporary file beside it,
    renamed onto `path` once complete (`speechkit.files.atomic_path`, which makes the
    folder and removes the temporary file on an error; `speechkit.files.save_figure`), so a
    failed save leaves no partial PNG. The figure is closed, also on an error."""
    try:
        figure.tight_layout()
        files.save_figure(figure, path, dpi=DPI, format="png")
    finally:
        plt.close(figure)


# ----------------------------------------------------------------------------- studies


def curve_figure(path: str, title: str, axis: str, points, curves: dict, ylabel: str) -> None:
    """One line per model: mean with std error bars against the swept points."""
    xs = list(range(len(points)))
    figure, ax = plt.subplots(figsize=(6, 3.6))
    for name, curve in curves.items():
        ax.errorbar(xs, curve["mean"], yerr=curve["std"], marker="o", capsize=3, label=name)
    ax.set_xticks(xs, [point_text(point) for point in points])
    _label_and_write(figure, ax, path, title=title, xlabel=axis, ylabel=ylabel)


def _label_and_write(
    figure, ax, path: str, *, title: str, xlabel: str, ylabel: str, legend_size=8
) -> None:
    """Labels, grid and legend on `ax`, then `figure` written to `path`."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size)
    write(figure, path)


def asr_quality_figure(record: dict, path: str) -> None:
    """TIMESTEP F1 against the text's word error rate: per text-reading model a line over
    the oracle transcript's substitution sweep, a dashed line over the causal recognisers
    (the corpus's and the worse ones; squares), an open square for the offline stream,
    audio-only as a band (mean ± std)."""
    figure, ax = plt.subplots(figsize=(6, 3.6))
    by_wer = lambda rows: sorted(rows, key=lambda row: row["wer"])  # noqa: E731
    oracle = by_wer(row for row in record["rows"] if row["variant"].startswith("oracle"))
    recognisers = [row for row in record["rows"] if not row["variant"].startswith("oracle")]
    causal = by_wer(row for row in recognisers if row["causal"])
    offline = [row for row in recognisers if not row["causal"]]
    for name, color in (("multimodal", "C0"), ("text", "C2")):
        for rows, fmt, mfc, label in (
            (oracle, "o-", color, "oracle transcript"),
            (causal, "s--", color, "recognisers, causal"),
            (offline, "s", "none", "recogniser, offline"),
        ):
            if rows:
                ax.errorbar(
                    [row["wer"] for row in rows],
                    [row[name]["timestep_f1"]["mean"] for row in rows],
                    yerr=[row[name]["timestep_f1"]["std"] for row in rows],
                    fmt=fmt,
                    color=color,
                    mfc=mfc,
                    capsize=3,
                    label=f"{name}, {label}",
                )
    audio = record["audio"]["timestep_f1"]
    ax.axhspan(audio["mean"] - audio["std"], audio["mean"] + audio["std"], color="C1", alpha=0.2)
    ax.axhline(audio["mean"], color="C1", label="audio-only")
    _label_and_write(
        figure,
        ax,
        path,
        title="MultiQT: transcript quality",
        xlabel="word error rate of the text stream",
        ylabel="TIMESTEP F1 (mean ± std over folds)",
        legend_size=6,
    )


def lookahead_figure(rows: list[dict], path: str) -> None:
    """mAP and 1 - FRR@5 of the look-ahead study's rows against their algorithmic
    latency, each point marked with its delay."""
    figure, ax = plt.subplots(figsize=(6, 3.6))
    latency = [row["algorithmic_latency_s"] for row in rows]
    ax.plot(latency, [row["mAP"] for row in rows], marker="o", label="mAP")
    ax.plot(latency, [1 - row["FRR@5"] for row in rows], marker="s", label="1 - FRR@5")
    for row, x in zip(rows, latency, strict=True):
        ax.annotate(f"delay {row['delay']}", (x, row["mAP"]), fontsize=7)
    _label_and_write(
        figure,
        ax,
        path,
        title="AF-KWS: look-ahead",
        xlabel="algorithmic latency (s)",
        ylabel="test split score",
    )


def unknown_class_figure(cells: list[dict], path: str) -> None:
    """The unknown-class study's mAP against training steps, with and without the
    unknown class, one colour per training set: test split and held-out engine."""
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    panels = (("mAP", "test split"), ("heldout_mAP", "held-out engine"))
    for ax, (key, split) in zip(axes, panels, strict=True):
        for colour, (utterances, chosen) in enumerate(_by_training_set(cells)):
            for m, style in zip(KWS_MODELS, ("-", "--"), strict=True):
                ax.plot(
                    [c["steps"] for c in chosen],
                    [c[m][key] for c in chosen],
                    style,
                    color=f"C{colour}",
                    marker="o",
                    label=f"{m}, {utterances} utterances",
                )
        ax.set_xscale("log")
        ticks = sorted({c["steps"] for c in cells})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("training steps")
        ax.set_ylabel(f"mAP ({split})")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    figure.suptitle("AF-KWS: unknown class (solid) and without it (dashed) against scale")
    write(figure, path)


def levers_figure(rows: list[dict], path: str, goal: float = 0.5) -> None:
    """The AF-KWS levers (`experiments.kws_levers` rows): development (held-out engine)
    against in-engine mAP, each with its 95 % interval, and the line where the held-out
    score is `goal` times the in-engine one. Rows without the unknown class are hollow."""
    figure, ax = plt.subplots(figsize=(6.4, 4.4))
    for item in rows:
        x, y = item["in_engine"]["mAP"], item["development"]["mAP"]
        (x_low, x_high), (y_low, y_high) = (
            item[part]["interval"] for part in ("in_engine", "development")
        )
        unknown = item["model"] == "afkws"
        ax.errorbar(
            x,
            y,
            xerr=[[x - x_low], [x_high - x]],
            yerr=[[y - y_low], [y_high - y]],
            fmt="o",
            color="C0" if unknown else "C1",
            mfc="C0" if unknown else "none",
            ms=4,
            elinewidth=0.6,
            alpha=0.8,
        )
        ax.annotate(item["lever"], (x, y), fontsize=5, xytext=(2, 2), textcoords="offset points")
    reach = max(item["in_engine"]["interval"][1] for item in rows)
    span = np.array([0.0, reach * 1.05])
    ax.plot(span, goal * span, "k--", lw=0.8, label=f"held-out = {goal:g} x in-engine")
    ax.plot([], [], "o", color="C0", label="afkws")
    ax.plot([], [], "o", color="C1", mfc="none", label="afkws_no_unknown")
    _label_and_write(
        figure,
        ax,
        path,
        title="AF-KWS levers: held-out engine against in-engine",
        xlabel="in-engine mAP (test split)",
        ylabel="held-out engine mAP (development split)",
    )


def _by_training_set(cells: list[dict]) -> list[tuple[str, list[dict]]]:
    """The unknown-class cells grouped by training set (corpus and share), in cell order,
    each labelled with its utterance count."""
    groups: dict[tuple, list[dict]] = {}
    for cell in cells:
        groups.setdefault((cell.get("dataset"), cell["train_fraction"]), []).append(cell)
    return [(str(chosen[0]["training_utterances"]), chosen) for chosen in groups.values()]


def study_figures(records: dict, folder: str) -> dict[str, str]:
    """FOLDER/figures/<study>.png for every study run that has a figure (the studies'
    `records`); {study: path relative to FOLDER}."""
    paths = {}

    def path(study: str) -> str:
        paths[study] = f"figures/{study}.png"
        return os.path.join(folder, paths[study])

    for study in ("text_lag", "noise", "data_size"):
        if study in records:
            r = records[study]
            curve_figure(
                path(study),
                f"MultiQT: {study.replace('_', ' ')}",
                r["axis"],
                r["points"],
                r["curves"]["timestep_f1"],
                "TIMESTEP F1 (mean ± std over folds)",
            )
    if "smoothing" in records:
        r = records["smoothing"]
        curve_figure(
            path("smoothing"),
            "MultiQT: minimum-duration smoothing",
            "min_frames (40 ms)",
            r["points"],
            r["curves"]["instance_f1"],
            "INSTANCE F1 (mean ± std over folds)",
        )
    if "asr_quality" in records:
        asr_quality_figure(records["asr_quality"], path("asr_quality"))
    if "kws_noise" in records:
        r = records["kws_noise"]
        curves = {
            m: {"mean": [p["mAP"] for p in rows], "std": [0.0] * len(rows)}
            for m, rows in r["rows"].items()
        }
        curve_figure(
            path("kws_noise"), "AF-KWS: test-time noise", "snr_db", r["points"], curves, "mAP"
        )
    if "lookahead" in records:
        lookahead_figure(records["lookahead"]["rows"], path("lookahead"))
    if "unknown_class" in records:
        unknown_class_figure(records["unknown_class"]["cells"], path("unknown_class"))
    return paths


# -------------------------------------------------------------------------- report.md


def per_class_figure(results: dict, classes: list[str], path: str) -> None:
    """Bars of each MultiQT model's TIMESTEP F1 per class (mean over folds)."""
    names = list(results)
    width = 0.8 / max(len(names), 1)
    figure, axes = plt.subplots(figsize=(10, 4))
    positions = np.arange(len(classes))
    for i, name in enumerate(names):
        values = [np.nan if v is None else v for v in results[name]["timestep_f1_per_class"]]
        axes.bar(positions + i * width, values, width, label=MULTIQT_NAMES.get(name, name))
    axes.set_xticks(positions + width * (len(names) - 1) / 2, classes, rotation=30, ha="right")
    axes.set_ylabel("TIMESTEP F1 (mean over folds)")
    axes.set_ylim(0, 1)
    axes.legend(fontsize=8)
    axes.set_title("MultiQT: per-class TIMESTEP F1")
    write(figure, path)


def timeline_figure(timeline: dict, path: str) -> None:
    """One call's gold and predicted classes over time, the recognised words below."""
    hop, classes = timeline["hop_s"], timeline["classes"]
    times = np.arange(len(timeline["gold"])) * hop
    figure, axes = plt.subplots(figsize=(12, 3.5))
    axes.step(times, timeline["gold"], where="post", label="gold", linewidth=2)
    axes.step(times, timeline["predicted"], where="post", label="predicted", alpha=0.8)
    axes.set_yticks(range(len(classes)), classes, fontsize=7)
    for word, start, _ in timeline["words"]:
        if start <= times[-1] if len(times) else False:
            axes.text(start, -0.9, word, rotation=90, fontsize=6, va="top")
    axes.set_ylim(-2.5, len(classes) - 0.5)
    axes.set_xlabel("seconds (recognised words below)")
    axes.legend(loc="upper right", fontsize=8)
    axes.set_title("One held-out call: gold vs predicted (MultiQT, fold 0)")
    write(figure, path)


def kws_figures(workdir: str, models: list[str], paths: dict) -> None:
    """Each model's pooled precision-recall (to paths["pr"]) and DET curves (FRR against
    false alarms per hour, to paths["frr"]) from its `detection_curves.json`
    (`experiments.scoring.evaluators.detection`)."""
    pr, pr_axes = plt.subplots(figsize=(5, 4))
    frr, frr_axes = plt.subplots(figsize=(5, 4))
    for name in models:
        curves = files.read_json(os.path.join(workdir, "cskws", name, "detection_curves.json"))
        if curves is None:
            continue
        label = KWS_NAMES.get(name, name)
        pr_axes.plot(curves["pr"]["recall"], curves["pr"]["precision"], label=label)
        frr_axes.plot(curves["det"]["fa_per_hour"], curves["det"]["miss_rate"], label=label)
    pr_axes.set(xlabel="recall", ylabel="precision", title="KWS precision-recall (IoU 0.5)")
    pr_axes.set_xlim(0, 1)
    pr_axes.set_ylim(0, 1.02)
    frr_axes.set(
        xlabel="false alarms per hour", ylabel="false rejection rate", title="KWS FRR (IoU 0.05)"
    )
    frr_axes.set_xscale("symlog")
    frr_axes.set_ylim(0, 1.02)
    for figure, axes, key in ((pr, pr_axes, "pr"), (frr, frr_axes, "frr")):
        axes.legend(fontsize=7)
        write(figure, paths[key])


def kws_det_figure(workdir: str, kws: dict, path: str) -> None:
    """The pooled test DET curve (FA/h on a log axis against miss rate, one shared
    threshold) of each model with a bundle (the AF-KWS ones; `det.json` of
    `experiments.cskws`), with its operating points (per-keyword thresholds) marked."""
    figure, axes = plt.subplots(figsize=(5.5, 4))
    budgets = set()
    for name, scores in kws["models"].items():
        folder = os.path.join(workdir, "cskws", name)
        det = files.read_json(os.path.join(folder, "det.json"))
        if det is None or not os.path.exists(os.path.join(folder, "bundle", "bundle.json")):
            continue
        pooled = det["pooled"]
        fa = np.array([np.nan if v is None else v for v in pooled["fa_per_hour"]])
        miss = np.array([np.nan if v is None else v for v in pooled["miss_rate"]])
        (line,) = axes.plot(fa, miss, label=KWS_NAMES.get(name, name))
        for entry in scores.get("operating_points", {}).get("budgets", []):
            budgets.add(entry["fa_per_hour"])
            test = entry["test"]
            if test["fa_per_hour"] > 0 and test["miss_rate"] is not None:
                axes.plot(test["fa_per_hour"], test["miss_rate"], "o", color=line.get_color())
    for budget in sorted(budgets):
        axes.axvline(budget, color="grey", linestyle=":", linewidth=0.8)
    axes.set_xscale("log", nonpositive="mask")
    axes.set(
        xlabel="false alarms per hour (log; dotted: budgets)",
        ylabel="miss rate",
        title="KWS DET, pooled (IoU 0.05); dots: operating points",
    )
    axes.set_ylim(0, 1.02)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7)
    write(figure, path)
