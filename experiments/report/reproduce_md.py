"""report.md, the main job's report (`write_report`): the data, each MultiQT task's and
the CS-KWS scores beside the papers' figures, in-engine against held-out engine, the KWS
operating points, the studies' verdicts, with the figures in WORKDIR/figures."""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

from cskws_jax import operating_points
from cskws_jax.datasets import render as kws_render
from experiments import multiqt_setup
from experiments.report import figures
from experiments.report.layout import multiqt_folder, multiqt_tasks, task_config
from experiments.report.markdown import (
    early_share_text,
    header,
    interval_text,
    mean_std_text,
    number,
    ratio,
    row,
)
from experiments.report.models import HELDOUT, KWS_NAMES, MULTIQT_NAMES, mean_std
from experiments.scoring.keywords import FRR_BUDGETS
from multiqt_jax import labels
from multiqt_jax.datasets import render as calls_render
from speechkit import files

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


def _compiled_text(compiled: dict) -> str:
    if not compiled:
        return ""
    return "; programs compiled (seconds): " + ", ".join(
        f"{stage} {record['programs']} ({record['compile_seconds']:.0f})"
        for stage, record in compiled.items()
    )


def _beside_text(config) -> str:
    if not config.get("kws_beside_multiqt"):
        return "."
    return (
        ". CS-KWS ran in a second process beside MultiQT: its seconds overlap theirs, and its"
        " RTF was measured while MultiQT trained on the other cores."
    )


def write_report(config, workdir: str, build: dict, seconds: dict, compiled=None) -> str:
    """WORKDIR/report.md and its figures from the main job's results in `workdir`, the
    corpora's build report `build`, the stages' `seconds` and, per training stage, what
    it compiled (`compiled`: `speechkit.compilation.Counter.record()` by stage); returns
    its path."""
    with open(os.path.join(workdir, "cskws", "results.json")) as source:
        kws = json.load(source)
    paths = {
        "pr": _figure_path(workdir, "kws_precision_recall.png"),
        "frr": _figure_path(workdir, "kws_frr_vs_false_alarms.png"),
        "det": _figure_path(workdir, "kws_det.png"),
    }
    figures.kws_figures(workdir, list(kws["models"]), paths)
    figures.kws_det_figure(workdir, kws, paths["det"])
    tasks = multiqt_tasks(config)
    calls = build["configs"].get(f"synthetic_calls/{_corpus(config, tasks[0])}", {})
    kws_build = build["configs"].get(config.cskws.dataset, {})
    lines = [
        f"# Reproduction report ({config.preset})",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} "
        f"({os.cpu_count()} CPUs, {platform.python_version()}); stage seconds: "
        + ", ".join(f"{stage} {value:.0f}" for stage, value in seconds.items())
        + _compiled_text(compiled or {})
        + _beside_text(config),
        "",
        "## Data",
        "",
        "- Calls "
        + " and ".join(f"`synthetic_calls/{_corpus(config, task)}`" for task in tasks)
        + " (one rendering, a label set per task): "
        f"{calls.get('examples', '?')} calls, {calls.get('hours', float('nan')):.2f} h, "
        f"pocketsphinx WER {calls.get('word_error_rate', float('nan')):.1%}; "
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
        "RTF: detection seconds per second of test audio on this machine, after compilation"
        + (" (MultiQT training beside it)." if config.get("kws_beside_multiqt") else "."),
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


def _figure_path(workdir: str, name: str) -> str:
    return os.path.join(workdir, "figures", name)


def _corpus(config, task: str) -> str:
    """The calls corpus (builder config) of a MultiQT task."""
    return multiqt_setup.corpus_name(task_config(config, task))


def _text_stream_line(stream: dict | None, kind: str) -> str:
    if stream is None:
        return f"{kind} text stream."
    return (
        f"{kind} text stream: words emitted {stream['lag_median_s']:.2f} s (median) / "
        f"{stream['lag_p90_s']:.2f} s (90th percentile) after they end, "
        f"{stream['nonblank_text_frames_causal']:.0%} of causal text frames non-blank "
        f"({stream['nonblank_text_frames_offline']:.0%} offline)."
    )


# ----------------------------------------------------------------------------- MultiQT


def multiqt_section(config, workdir: str, task: str) -> list[str]:
    """The report's section of one MultiQT task: table, transfer table, figures."""
    folder = multiqt_folder(task)
    with open(os.path.join(workdir, folder, "results.json")) as source:
        mq = json.load(source)
    suffix = "" if task == "questions" else f"_{task}"
    per_class = _figure_path(workdir, f"multiqt{suffix}_per_class_f1.png")
    figures.per_class_figure(mq["models"], list(labels.classes(task)), per_class)
    lines = [
        f"## MultiQT: {task}, {mq['num_folds']}-fold cross-validation (mean ± std)",
        "",
        *multiqt_table(mq["models"]),
        "",
        text_source_line(mq),
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
        *early_frames_lines(mq["models"], list(labels.classes(task))),
    ]
    if task == "questions":
        timeline = _first_timeline(os.path.join(workdir, folder), mq)
        if timeline is not None:
            figures.timeline_figure(timeline, _figure_path(workdir, "multiqt_timeline.png"))
            lines += ["![timeline](figures/multiqt_timeline.png)", ""]
    return lines


def early_frames_lines(results: dict, classes: list[str]) -> list[str]:
    """Each MultiQT model's early question frames (results.json "early_frames"), raw and
    smoothed; nothing for results recorded without them."""
    found = []  # (row label, "early_frames")
    for name, summary in results.items():
        label = MULTIQT_NAMES.get(name, name)
        for suffix, scores in (("", summary), (", smoothed", summary.get("smoothed", {}))):
            if "early_frames" in scores:
                found.append((label + suffix, scores["early_frames"]))
    if not found:
        return []
    margin_s = found[0][1]["margin_s"]
    return [
        "### Early question frames",
        "",
        f"Share of each class's predicted frames that come more than {margin_s:g} s before "
        "the class is first spoken in the call (all of them where the call never has it), "
        "with early / predicted frames, the folds' test calls pooled: a tracker that "
        "follows the speech rather than the clock of the call keeps these near 0 "
        "(`metrics.early_frames`).",
        "",
        *header("Model", "all classes", *classes[1:]),
        *(_early_frames_row(label, early) for label, early in found),
        "",
    ]


def _early_frames_row(label: str, early: dict) -> str:
    classes = range(1, len(early["per_class"]))
    return row(label, early_share_text(early), *(early_share_text(early, c) for c in classes))


def text_source_line(mq: dict) -> str:
    """What the text models read: which recogniser's words, and how good they were."""
    name = mq.get("text_recogniser") or ""
    ctc = (
        "the CTC character recogniser (`ctc_jax`; the shipped bundle unless "
        "`--config.multiqt.ctc_bundle` names another)"
    )
    words = f"the {mq.get('text_stream', 'causal')} words of"
    source = {
        "": f"{words} the corpus's recogniser (pocketsphinx)",
        "ctc": f"{words} {ctc}",
        "ctc_posteriors": f"the causal 20 ms character posteriors of {ctc}",
    }.get(name, f"{words} pocketsphinx's `{name}` variant")
    line = f"Text input: {source}"
    scores = mq.get("text_scores")
    if scores:
        words = "its greedy words" if name == "ctc_posteriors" else "the words"
        line += f"; {words} on the calls: WER {scores['wer']:.1%}, CER {scores['cer']:.1%}"
        if scores.get("lag_median_s") is not None:
            line += f", each word emitted {scores['lag_median_s']:.2f} s (median) after its end"
    return line + "."


def _first_timeline(folder: str, mq: dict):
    for name in mq["models"]:
        path = os.path.join(folder, name, "timeline.json")
        if os.path.exists(path):
            with open(path) as source:
                return json.load(source)
    return None


def _cell(summary: dict, score: str, part: str) -> str:
    return mean_std_text(mean_std(summary, score, part))


def multiqt_table(results: dict) -> list[str]:
    """Each MultiQT model's TIMESTEP and INSTANCE precision, recall and F1 (mean ± std
    over folds), and again smoothed where the results hold smoothed scores."""
    lines = header(
        "Model",
        *(f"{score} {part}" for score in ("TIMESTEP", "INSTANCE") for part in ("P", "R", "F1")),
    )
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
    return row(
        label,
        *(
            _cell(summary, score, part)
            for score in ("timestep", "instance")
            for part in ("precision", "recall", "f1")
        ),
    )


def multiqt_transfer_table(mq: dict) -> list[str]:
    """In-engine (cross-validation) vs held-out-engine TIMESTEP F1 (mean ± std over the
    folds' models), with the transfer ratio of the means."""
    models = {name: s for name, s in mq["models"].items() if HELDOUT in s}
    if not models:
        return ["No held-out-engine calls in this corpus: in-engine scores only."]
    engine = mq.get("heldout_engine") or calls_render.RenderConfig().heldout_engine
    calls = mq.get("heldout_calls")
    lines = [
        _engine_sentence(engine, "in the cross-validation calls")
        + (f" Each fold's model is scored on all {calls} held-out calls." if calls else ""),
        "",
        *header("Model", "in-engine TIMESTEP F1", "held-out engine TIMESTEP F1", "transfer"),
    ]
    for name, summary in models.items():
        lines.append(
            row(
                MULTIQT_NAMES.get(name, name),
                _cell(summary, "timestep", "f1"),
                _cell(summary[HELDOUT], "timestep", "f1"),
                ratio(summary.get("transfer", {}).get("timestep_f1")),
            )
        )
    return lines


def _engine_sentence(engine: str | None, where: str) -> str:
    held = f"`{engine}`" if engine else "one synthesiser"
    return (
        f"The held-out engine is {held}: it speaks only the held-out split and is never "
        f"heard {where}; transfer = held-out score / in-engine score (n/a where the "
        "in-engine score is 0)."
    )


def class_instances(config, task: str) -> tuple[dict[str, float], int]:
    """({class: labelled instances per call}, calls) of a task's train split, from the
    corpus's label frames: what a model of that task gets to learn from."""
    source = multiqt_setup.load_corpus(task_config(config, task))[0]
    classes = labels.classes(task)
    counts = np.zeros(len(classes))
    for i in range(len(source)):
        frames = np.asarray(source[i]["labels"])
        starts = frames[np.r_[True, frames[1:] != frames[:-1]]]
        counts += np.bincount(starts, minlength=len(classes))
    per_call = {name: counts[c] / len(source) for c, name in enumerate(classes) if c > 0}
    return per_call, len(source)


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


# ------------------------------------------------------------------------------ CS-KWS


def kws_table(results: dict) -> list[str]:
    """The CS-KWS scores per model (with their bootstrap intervals, when results hold
    them, and the paper's numbers), then what the intervals are and how many false
    alarms FRR@5 and FRR@25 allow on the test hours."""
    columns = ("mAP", "AP@0.05", "AP@0.75", "FRR@5", "FRR@25", "RTF")
    lines = header("Model", *columns)
    for name, scores in results.items():
        paper = KWS_PAPER.get(name, {})
        intervals = scores.get("intervals", {})
        cells = []
        for column in columns:
            cell = f"{scores[column]:.3f}" if column != "RTF" else f"{scores[column]:.4f}"
            cell += interval_text(intervals.get(column))
            if column in paper:
                cell += f" (paper {paper[column]})"
            cells.append(cell)
        lines.append(row(KWS_NAMES.get(name, name), *cells))
    if any("intervals" in scores for scores in results.values()):
        lines += [
            "",
            "[lo, hi]: 95 % percentile bootstrap interval over test utterances (utterances "
            "resampled with replacement, the detector fixed; "
            "`experiments.scoring.evaluators.detection.bootstrap_intervals`): how much the score "
            "moves with which utterances made up a test split this size.",
        ]
    if results:
        scores = next(iter(results.values()))
        hours = scores["test_hours"]
        allowed = scores.get("allowed_false_alarms") or {
            key: budget * hours for key, budget in FRR_BUDGETS.items()
        }
        counts = [
            f"{key} ({budget:g} FA/h) allows {allowed[key]:.2f}, i.e. at most "
            f"{operating_points.allowed_false_alarms(budget, hours)}"
            for key, budget in FRR_BUDGETS.items()
        ]
        lines += [
            "",
            f"False alarms on the {hours:.2f} h of test audio, all keywords together: "
            + "; ".join(counts)
            + ".",
        ]
    return lines


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


def kws_transfer_table(kws: dict) -> list[str]:
    """In-engine (test split) vs held-out-engine mAP per model, with the transfer
    ratio; a line saying so when the results have no held-out scores."""
    models = {name: s for name, s in kws["models"].items() if HELDOUT in s}
    if not models:
        return [f"No held-out-engine split in `{kws['dataset']}`: in-engine scores only."]
    engine = kws.get("heldout_engine") or kws_render.KwsRenderConfig().heldout_engine
    lines = [
        _engine_sentence(engine, "in the train or test split"),
        "",
        *header("Model", "in-engine mAP", "held-out engine mAP", "transfer"),
    ]
    for name, scores in models.items():
        lines.append(
            row(
                KWS_NAMES.get(name, name),
                f"{scores['mAP']:.3f}",
                f"{scores[HELDOUT]['mAP']:.3f}",
                ratio(scores.get("transfer")),
            )
        )
    return lines


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
        *header(
            "Model | budget (FA/h) | allowed FAs on test (per keyword) | test miss rate | "
            "test FA/h | shared-threshold miss rate | held-out miss rate | held-out FA/h"
        ),
    ]
    for name, summary in models.items():
        for entry in summary["budgets"]:
            test, heldout = entry["test"], entry.get(HELDOUT)
            lines.append(
                row(
                    KWS_NAMES.get(name, name),
                    f"{entry['fa_per_hour']:g}",
                    f"{entry['allowed_false_alarms']} ({entry['allowed_per_keyword']})",
                    number(test["miss_rate"]),
                    f"{test['fa_per_hour']:.2f}",
                    number(entry["shared_threshold_miss_rate"]),
                    *(
                        (number(heldout["miss_rate"]), f"{heldout['fa_per_hour']:.2f}")
                        if heldout
                        else ("-", "-")
                    ),
                )
            )
    return lines


# ----------------------------------------------------------------------------- studies


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
        *header("claim", "verdict"),
    ]
    lines += [row(c["claim"], c["verdict"]) for c in payload["claims"]]
    return lines + [""]
