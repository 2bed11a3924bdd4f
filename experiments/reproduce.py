r"""The main job: corpora, MultiQT cross-validation, CS-KWS, and a report to open.

    python -m experiments.reproduce --config=experiments/configs/reproduce.py:quick \
        --workdir=outputs/reproduce

Stages (each timed and reported): build any missing corpus (experiments.build_data),
experiments.multiqt once per task of `config.multiqt_tasks` (questions in
WORKDIR/multiqt, symptoms in WORKDIR/multiqt-symptoms), experiments.cskws, then
`WORKDIR/report.md` with the tables beside the papers' figures, each task's in-engine
vs held-out-engine scores (models scored on a synthesiser never heard in training, with
the transfer ratio), the KWS operating points (per-keyword thresholds for false-alarm
budgets: a DET table and figure), the studies' verdicts where `make studies` has run
(`config.studies_dir`), and PNG figures in `WORKDIR/figures/`; training curves are in
`WORKDIR/*/*/tensorboard` (`tensorboard --logdir WORKDIR`). Rerunning resumes: finished
stages are read back, interrupted training continues from its checkpoints.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import time

import matplotlib
import numpy as np
from absl import app, flags
from ml_collections import config_flags

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from cskws_jax import operating_points  # noqa: E402
from cskws_jax.datasets import render as kws_render  # noqa: E402
from experiments import build_data, common, cskws, multiqt  # noqa: E402
from multiqt_jax import labels  # noqa: E402
from multiqt_jax.datasets import render as calls_render  # noqa: E402
from speechkit import files, tts  # noqa: E402

log = common.logger("reproduce")

# AF-KWS paper (Zhao et al. 2022), LibriTop-20 test set.
KWS_PAPER = {
    "afkws": {
        "mAP": 0.860,
        "AP@0.05": 0.952,
        "AP@0.75": 0.886,
        "FRR@5": 0.140,
        "FRR@25": 0.049,
        "RTF": 0.031,
    },
    "afkws_no_unknown": {"AP@0.05": 0.867},
    "sliding_window": {"mAP": "0.398 / 0.426"},
}
MULTIQT_NAMES = {
    "multimodal": "MultiQT (audio + text)",
    "audio": "MultiQT (audio only)",
    "text": "MultiQT (text only)",
    "rf": "Random forest (segments, sliding)",
    "fnn": "Feed-forward net (segments, sliding)",
}
KWS_NAMES = {
    "afkws": "AF-KWS",
    "afkws_no_unknown": "AF-KWS without unknown class",
    "sliding_window": "Sliding-window CNN classifier",
}


def multiqt_tasks(config) -> list[str]:
    """config.multiqt_tasks: comma-separated MultiQT tasks, questions first if run."""
    tasks = [t.strip() for t in config.multiqt_tasks.split(",") if t.strip()]
    known = list(labels.TASKS)
    if not tasks or set(tasks) - set(known) or len(set(tasks)) < len(tasks):
        raise ValueError(
            f"config.multiqt_tasks: expected distinct tasks of {tuple(known)}, "
            f"got {config.multiqt_tasks!r}"
        )
    return sorted(tasks, key=known.index)


def multiqt_folder(task: str) -> str:
    """A task's MultiQT sub-workdir: "multiqt" (questions), "multiqt-<task>" otherwise."""
    return "multiqt" if task == "questions" else f"multiqt-{task}"


def _with_task(config, task: str):
    sub = copy.deepcopy(config)
    sub.task = task
    return sub


def run(config, workdir: str) -> str:
    os.makedirs(workdir, exist_ok=True)
    data_dir = os.path.expanduser(config.data_dir or "~/tensorflow_datasets")
    seconds = {}

    count = len(multiqt_tasks(config)) + 3  # corpora, MultiQT per task, CS-KWS, report
    started = time.perf_counter()
    log(f"stage 1/{count}: corpora ({config.size}, engine set {config.engine_set}) in {data_dir}")
    build = build_data.build(config.size, data_dir, engine_set=config.engine_set)
    seconds["corpora"] = time.perf_counter() - started

    config.multiqt.size, config.multiqt.engine_set = config.size, config.engine_set
    for sub in (config.multiqt, config.cskws):
        sub.data_dir, sub.build_missing = data_dir, False
    config.cskws.dataset = f"synthetic_kws/{tts.corpus_config_name(config.size, config.engine_set)}"
    stages = [
        (multiqt_folder(task), multiqt, _with_task(config.multiqt, task))
        for task in multiqt_tasks(config)
    ] + [("cskws", cskws, config.cskws)]
    for stage, (name, module, sub) in enumerate(stages, start=2):
        started = time.perf_counter()
        log(f"stage {stage}/{count}: {name}")
        module.train_and_evaluate(sub, os.path.join(workdir, name))
        seconds[name] = time.perf_counter() - started

    started = time.perf_counter()
    log(f"stage {count}/{count}: report")
    path = write_report(config, workdir, build, seconds)
    seconds["report"] = time.perf_counter() - started
    log(
        "done: "
        + ", ".join(f"{stage} {value:.0f} s" for stage, value in seconds.items())
        + f"; open {path}"
    )
    return path


# ------------------------------------------------------------------------------- figures


def _figure_path(workdir: str, name: str) -> str:
    os.makedirs(os.path.join(workdir, "figures"), exist_ok=True)
    return os.path.join(workdir, "figures", name)


def per_class_figure(results: dict, classes: list[str], path: str) -> None:
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
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def timeline_figure(timeline: dict, path: str) -> None:
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
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def kws_figures(workdir: str, models: list[str], paths: dict) -> None:
    """Each model's pooled precision-recall and DET curves (`detection_curves.json` of
    `experiments.evaluators.detection`)."""
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
        figure.tight_layout()
        figure.savefig(paths[key], dpi=120)
        plt.close(figure)


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
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


# -------------------------------------------------------------------------------- report


def _cell(summary: dict, score: str, part: str) -> str:
    return f"{summary['mean'][score][part]:.3f} ± {summary['std'][score][part]:.3f}"


def multiqt_table(results: dict) -> list[str]:
    lines = [
        "| Model | TIMESTEP P | TIMESTEP R | TIMESTEP F1 | INSTANCE P | INSTANCE R | INSTANCE F1 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, summary in results.items():
        label = MULTIQT_NAMES.get(name, name)
        lines.append(_multiqt_row(label, summary))
        if "smoothed" in summary:
            latency_ms = summary["smoothed"]["smoothing"]["latency_ms"]
            lines.append(
                _multiqt_row(f"{label}, smoothed (+{latency_ms:g} ms)", summary["smoothed"])
            )
    return lines


def _multiqt_row(label: str, summary: dict) -> str:
    cells = [
        _cell(summary, score, part)
        for score in ("timestep", "instance")
        for part in ("precision", "recall", "f1")
    ]
    return f"| {label} | " + " | ".join(cells) + " |"


def _interval(bounds) -> str:
    """The text " [lo, hi]" of a bootstrap interval (2 decimals); "" when there is none."""
    if not bounds or any(bound is None for bound in bounds):
        return ""
    return f" [{bounds[0]:.2f}, {bounds[1]:.2f}]"


def kws_table(results: dict) -> list[str]:
    """The CS-KWS scores per model (with their bootstrap intervals, when results hold
    them, and the paper's numbers), then what the intervals are and how many false
    alarms FRR@5 and FRR@25 allow on the test hours."""
    columns = ("mAP", "AP@0.05", "AP@0.75", "FRR@5", "FRR@25", "RTF")
    lines = ["| Model | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, scores in results.items():
        paper = KWS_PAPER.get(name, {})
        intervals = scores.get("intervals", {})
        cells = []
        for column in columns:
            cell = f"{scores[column]:.3f}" if column != "RTF" else f"{scores[column]:.4f}"
            cell += _interval(intervals.get(column))
            if column in paper:
                cell += f" (paper {paper[column]})"
            cells.append(cell)
        lines.append(f"| {KWS_NAMES.get(name, name)} | " + " | ".join(cells) + " |")
    if any("intervals" in scores for scores in results.values()):
        lines += [
            "",
            "[lo, hi]: 95 % percentile bootstrap interval over test utterances (utterances "
            "resampled with replacement, the detector fixed; "
            "`experiments.evaluators.detection.bootstrap_intervals`): how much the score "
            "moves with which utterances made up a test split this size.",
        ]
    if results:
        scores = next(iter(results.values()))
        hours = scores["test_hours"]
        allowed = scores.get("allowed_false_alarms") or {
            key: budget * hours for key, budget in cskws.FRR_BUDGETS.items()
        }
        counts = [
            f"{key} ({budget:g} FA/h) allows {allowed[key]:.2f}, i.e. at most "
            f"{operating_points.allowed_false_alarms(budget, hours)}"
            for key, budget in cskws.FRR_BUDGETS.items()
        ]
        lines += [
            "",
            f"False alarms on the {hours:.2f} h of test audio, all keywords together: "
            + "; ".join(counts)
            + ".",
        ]
    return lines


def _rate(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def kws_det_table(kws: dict) -> list[str]:
    """Per model and false-alarm budget: the false alarms the budget allows on the test
    hours, the test miss rate and FA/h of the per-keyword operating points (chosen on
    the test split), the miss rate of one shared threshold there, and what the same
    thresholds give on the held-out engine's split (when there is one)."""
    models = {n: s["operating_points"] for n, s in kws["models"].items() if "operating_points" in s}
    if not models:
        return ["No operating points in these results."]
    hours = next(iter(models.values()))["test_hours"]
    lines = [
        f"Thresholds per keyword for a budget of B false alarms per hour, all keywords "
        f"together: each keyword gets B / {len(kws['keywords'])} and its lowest score cut "
        f"within that share on the test split ({hours:.2f} h; `cskws_jax.operating_points`). "
        "Chosen and read on the same split, the test columns meet the budget by "
        "construction and are optimistic; the held-out engine's are out of sample. "
        "Shared threshold: the pooled DET curve's miss rate at the budget (FRR@B).",
        "",
        "| Model | budget (FA/h) | allowed FAs on test (per keyword) | test miss rate | "
        "test FA/h | shared-threshold miss rate | held-out miss rate | held-out FA/h |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, summary in models.items():
        for entry in summary["budgets"]:
            test, heldout = entry["test"], entry.get(cskws.HELDOUT)
            lines.append(
                f"| {KWS_NAMES.get(name, name)} | {entry['fa_per_hour']:g} | "
                f"{entry['allowed_false_alarms']} ({entry['allowed_per_keyword']}) | "
                f"{_rate(test['miss_rate'])} | {test['fa_per_hour']:.2f} | "
                f"{_rate(entry['shared_threshold_miss_rate'])} | "
                + (
                    f"{_rate(heldout['miss_rate'])} | {heldout['fa_per_hour']:.2f} |"
                    if heldout
                    else "- | - |"
                )
            )
    return lines


def _ratio(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _engine_sentence(engine: str | None, where: str) -> str:
    held = f"`{engine}`" if engine else "one synthesiser"
    return (
        f"The held-out engine is {held}: it speaks only the held-out split and is never "
        f"heard {where}; transfer = held-out score / in-engine score (n/a where the "
        "in-engine score is 0)."
    )


def kws_transfer_table(kws: dict) -> list[str]:
    """In-engine (test split) vs held-out-engine mAP per model, with the transfer
    ratio; a line saying so when the results have no held-out scores."""
    models = {name: s for name, s in kws["models"].items() if cskws.HELDOUT in s}
    if not models:
        return [f"No held-out-engine split in `{kws['dataset']}`: in-engine scores only."]
    engine = kws.get("heldout_engine") or _default_engine("kws")
    lines = [
        _engine_sentence(engine, "in the train or test split"),
        "",
        "| Model | in-engine mAP | held-out engine mAP | transfer |",
        "|---|---|---|---|",
    ]
    for name, scores in models.items():
        lines.append(
            f"| {KWS_NAMES.get(name, name)} | {scores['mAP']:.3f} | "
            f"{scores[cskws.HELDOUT]['mAP']:.3f} | {_ratio(scores.get('transfer'))} |"
        )
    return lines


def multiqt_transfer_table(mq: dict) -> list[str]:
    """In-engine (cross-validation) vs held-out-engine TIMESTEP F1 (mean ± std over the
    folds' models), with the transfer ratio of the means."""
    models = {name: s for name, s in mq["models"].items() if multiqt.HELDOUT in s}
    if not models:
        return ["No held-out-engine calls in this corpus: in-engine scores only."]
    engine = mq.get("heldout_engine") or _default_engine("calls")
    calls = mq.get("heldout_calls")
    lines = [
        _engine_sentence(engine, "in the cross-validation calls")
        + (f" Each fold's model is scored on all {calls} held-out calls." if calls else ""),
        "",
        "| Model | in-engine TIMESTEP F1 | held-out engine TIMESTEP F1 | transfer |",
        "|---|---|---|---|",
    ]
    for name, summary in models.items():
        lines.append(
            f"| {MULTIQT_NAMES.get(name, name)} | {_cell(summary, 'timestep', 'f1')} | "
            f"{_cell(summary[multiqt.HELDOUT], 'timestep', 'f1')} | "
            f"{_ratio(summary.get('transfer', {}).get('timestep_f1'))} |"
        )
    return lines


def _default_engine(corpus: str) -> str | None:
    """The builders' default held-out engine, for results that do not name theirs."""
    if corpus == "kws":
        return kws_render.KwsRenderConfig().heldout_engine
    return calls_render.RenderConfig().heldout_engine


def class_instances(config, task: str) -> tuple[dict[str, float], int]:
    """({class: labelled instances per call}, calls) of a task's train split, from the
    corpus's label frames: what a model of that task gets to learn from."""
    source = multiqt.load_corpus(_with_task(config.multiqt, task))[0]
    classes = labels.classes(task)
    counts = np.zeros(len(classes))
    for i in range(len(source)):
        frames = np.asarray(source[i]["labels"])
        starts = frames[np.r_[True, frames[1:] != frames[:-1]]]
        counts += np.bincount(starts, minlength=len(classes))
    per_call = {name: counts[c] / len(source) for c, name in enumerate(classes) if c > 0}
    return per_call, len(source)


def multiqt_section(config, workdir: str, task: str) -> list[str]:
    """The report's section of one MultiQT task: table, transfer table, figures."""
    folder = multiqt_folder(task)
    with open(os.path.join(workdir, folder, "results.json")) as source:
        mq = json.load(source)
    suffix = "" if task == "questions" else f"_{task}"
    per_class = _figure_path(workdir, f"multiqt{suffix}_per_class_f1.png")
    per_class_figure(mq["models"], list(labels.classes(task)), per_class)
    lines = [
        f"## MultiQT: {task}, {mq['num_folds']}-fold cross-validation (mean ± std)",
        "",
        *multiqt_table(mq["models"]),
        "",
    ]
    if task == "questions":
        lines += [
            "The MultiQT paper's figures are on its private emergency-call corpus, which "
            "this toolkit cannot score, so none are shown beside these. The smoothed rows "
            "score the same predictions after `multiqt_jax.decode.smooth` (a class must "
            f"hold {mq.get('smoothing', {}).get('min_frames', '?')} frames before the "
            "output switches to it), at the latency it costs.",
            "",
        ]
    else:
        lines += [*learnability_lines(config, task), ""]
    lines += [
        "### In-engine vs held-out engine",
        "",
        *multiqt_transfer_table(mq),
        "",
        f"![per-class F1](figures/{os.path.basename(per_class)})",
        "",
    ]
    if task == "questions":
        timeline = _first_timeline(os.path.join(workdir, folder), mq)
        if timeline is not None:
            timeline_figure(timeline, _figure_path(workdir, "multiqt_timeline.png"))
            lines += ["![timeline](figures/multiqt_timeline.png)", ""]
    return lines


def learnability_lines(config, task: str) -> list[str]:
    """What the task's models had to learn from, beside the questions task's."""
    mine, calls = class_instances(config, task)
    questions, _ = class_instances(config, "questions")
    per_fold = calls * (config.multiqt.num_folds - 1) / config.multiqt.num_folds
    rarest = min(mine, key=mine.get)
    return [
        f"What there is to learn from: the {task} task has {len(mine)} classes and "
        f"{sum(mine.values()):.2f} labelled instances per call "
        f"({np.mean(list(mine.values())) * per_fold:.0f} per class in a fold's "
        f"{per_fold:.0f} training calls; the rarest, {rarest}, "
        f"{mine[rarest] * per_fold:.0f}); the questions task has {len(questions)} classes "
        f"and {np.mean(list(questions.values())) * per_fold:.0f} instances per class. "
        "A class seen a few dozen times in synthetic speech with recogniser errors is "
        "barely learnt at this scale; more calls per class (the full preset has ten "
        "times as many) is what the task needs first. This is not measured here.",
    ]


def studies_lines(config, workdir: str) -> list[str]:
    """A link to the studies' report and its verdicts, when `make studies` has run."""
    folder = config.studies_dir or os.path.join(
        os.path.dirname(os.path.abspath(workdir)), "studies"
    )
    payload = files.read_json(os.path.join(folder, "studies.json"))
    link = os.path.relpath(os.path.join(folder, "studies.md"), os.path.abspath(workdir))
    lines = ["## Studies: when the papers' claims hold", ""]
    if payload is None:
        return lines + [
            "Not run yet: `make studies` (`experiments.studies`) writes its report, "
            f"figures and verdicts to `{link}`.",
            "",
        ]
    lines += [
        f"From [the studies' report]({link}) ({payload['preset']} preset; each verdict "
        "is worked out from the numbers there):",
        "",
        "| claim | verdict |",
        "|---|---|",
    ]
    lines += [f"| {c['claim']} | {c['verdict']} |" for c in payload["claims"]]
    return lines + [""]


def kws_test_size_lines(kws: dict) -> list[str]:
    """Why the test split is too small for FRR@5 to allow ten false alarms, when it is."""
    hours = next(iter(kws["models"].values())).get("test_hours", 0.0)
    allowed = operating_points.allowed_false_alarms(5.0, hours)
    if allowed >= 10:
        return []
    return [
        f"The test split holds {hours:.2f} h, so FRR@5 allows {allowed} false alarm(s); "
        "ten need 2 h of test audio. The quick corpus keeps its test split small to keep "
        "`make demo` short: 2 h more would add about 8 minutes of synthesis and "
        "alignment on two cores (about 4 minutes per hour of audio, measured for the "
        "quick corpus). The `full` preset's test split (2,000 utterances, about 2.6 h) "
        "allows 12. Read FRR at these budgets with the intervals above.",
        "",
    ]


def write_report(config, workdir: str, build: dict, seconds: dict) -> str:
    with open(os.path.join(workdir, "cskws", "results.json")) as source:
        kws = json.load(source)
    figures = {
        "pr": _figure_path(workdir, "kws_precision_recall.png"),
        "frr": _figure_path(workdir, "kws_frr_vs_false_alarms.png"),
        "det": _figure_path(workdir, "kws_det.png"),
    }
    kws_figures(workdir, list(kws["models"]), figures)
    kws_det_figure(workdir, kws, figures["det"])
    tasks = multiqt_tasks(config)
    calls = build["configs"].get(
        f"synthetic_calls/{multiqt.corpus_name(_with_task(config.multiqt, tasks[0]))}", {}
    )
    kws_build = build["configs"].get(config.cskws.dataset, {})
    lines = [
        f"# Reproduction report ({config.preset})",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} "
        f"({os.cpu_count()} CPUs, {platform.python_version()}); stage seconds: "
        + ", ".join(f"{stage} {value:.0f}" for stage, value in seconds.items()),
        "",
        "## Data",
        "",
        "- Calls "
        + " and ".join(
            f"`synthetic_calls/{multiqt.corpus_name(_with_task(config.multiqt, task))}`"
            for task in tasks
        )
        + " (one rendering, a label set per task): "
        f"{calls.get('examples', '?')} calls, {calls.get('hours', float('nan')):.2f} h, "
        f"recogniser WER {calls.get('word_error_rate', float('nan')):.1%}; "
        + _text_stream_line(calls.get("text_stream"), config.multiqt.text_stream),
        f"- Keywords `{config.cskws.dataset}`: {kws_build.get('hours', float('nan')):.2f} h, "
        f"{kws_build.get('train', {}).get('keyword_occurrences', '?')} training and "
        f"{kws_build.get('test', {}).get('keyword_occurrences', '?')} test keyword occurrences.",
        "",
    ]
    for task in tasks:
        lines += multiqt_section(config, workdir, task)
    lines += [
        f"## CS-KWS: `{kws['dataset']}` test split (paper: LibriTop-20)",
        "",
        *kws_table(kws["models"]),
        "",
        "RTF: detection seconds per second of test audio on this machine, after compilation.",
        "",
        *kws_test_size_lines(kws),
        "### In-engine vs held-out engine",
        "",
        *kws_transfer_table(kws),
        "",
        "![precision-recall](figures/kws_precision_recall.png)",
        "![FRR](figures/kws_frr_vs_false_alarms.png)",
        "",
        "### Operating points (DET)",
        "",
        *kws_det_table(kws),
        "",
        "![DET](figures/kws_det.png)",
        "",
        *studies_lines(config, workdir),
        "Training curves: `tensorboard --logdir " + os.path.abspath(workdir) + "`.",
        "",
    ]
    path = os.path.join(workdir, "report.md")
    with files.atomic_open(path) as out:
        out.write("\n".join(lines))
    return path


def _text_stream_line(stream: dict | None, kind: str) -> str:
    if stream is None:
        return f"{kind} text stream."
    return (
        f"{kind} text stream: words emitted {stream['lag_median_s']:.2f} s (median) / "
        f"{stream['lag_p90_s']:.2f} s (90th percentile) after they end, "
        f"{stream['nonblank_text_frames_causal']:.0%} of causal text frames non-blank "
        f"({stream['nonblank_text_frames_offline']:.0%} offline)."
    )


def _first_timeline(folder: str, mq: dict):
    for name in mq["models"]:
        path = os.path.join(folder, name, "timeline.json")
        if os.path.exists(path):
            with open(path) as source:
                return json.load(source)
    return None


def main(argv) -> None:
    del argv
    common.cli_main(run, _CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":  # flags only here: the runners import each other
    _CONFIG = config_flags.DEFINE_config_file(
        "config", None, "experiments/configs/reproduce.py:PRESET"
    )
    _WORKDIR = flags.DEFINE_string("workdir", "outputs/reproduce", "output folder")
    app.run(main)
