"""docs/results.md, written from the result JSON committed in the repository (`render`).

    python -m experiments.report.results_doc            # writes docs/results.md
    python -m experiments.report.results_doc --check    # exit 1 when it differs
    python -m experiments.report.results_doc --record docs/results/studies.json \\
        --date 2026-12-04 --commit 0123abc --command "make studies"

The sources and their date, commit and command are in docs/results/provenance.json (the
result files do not record them); each entry holds the file's sha256, and a file whose
content differs from its entry is refused until `--record` records the new run. The
studies' section appears once docs/results/studies.json is there.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from experiments.report.markdown import header, number, ratio, row, scored
from experiments.report.markdown import mean_std_text as _ms
from speechkit import files

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = "docs/results.md"
PROVENANCE = "docs/results/provenance.json"
STUDIES = "docs/results/studies.json"
STUDIES_COMMAND = (
    "make studies  # python -m experiments.studies --config=experiments/configs/studies.py:quick "
    "--workdir=outputs/studies --config.data_dir=outputs/tensorflow_datasets"
)
MULTIQT_MODELS = {
    "multimodal": "MultiQT (audio + text)",
    "audio": "MultiQT (audio only)",
    "text": "MultiQT (text only)",
    "rf": "Random forest (segments, sliding)",
    "fnn": "Feed-forward net (segments, sliding)",
}
KWS_MODELS = {
    "afkws": "AF-KWS",
    "afkws_no_unknown": "AF-KWS without unknown class",
    "sliding_window": "Sliding-window CNN classifier",
}


class ProvenanceError(ValueError):
    """A cited result file without a provenance entry, or changed since it was recorded."""


def load(root: pathlib.Path = ROOT) -> tuple[dict, dict]:
    """(provenance, {source name: its JSON}), each file checked against its sha256."""
    provenance = json.loads((root / PROVENANCE).read_text())
    data = {}
    for name, source in provenance["sources"].items():
        path = root / source["path"]
        if files.sha256(path) != source["sha256"]:
            raise ProvenanceError(
                f"{source['path']}: its content differs from the run recorded in {PROVENANCE}; "
                "record the run that wrote it: python -m experiments.report.results_doc "
                f"--record {source['path']} --date ... --commit ... --command ..."
            )
        data[name] = json.loads(path.read_text())
    if (root / STUDIES).exists() and "studies" not in data:
        raise ProvenanceError(
            f"{STUDIES} has no entry in {PROVENANCE}: python -m experiments.report.results_doc "
            f"--record {STUDIES} --date ... --commit ... --command 'make studies'"
        )
    return provenance, data


def _link(path: str) -> str:
    """A repository path as a link from docs/."""
    target = path[len("docs/") :] if path.startswith("docs/") else f"../{path}"
    return f"[{path}]({target})"


def _source_line(source: dict) -> str:
    return (
        f"Source: {_link(source['path'])}; {source['date']}, commit `{source['commit'][:7]}`; "
        f"`{source['command']}`."
    )


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def _sources(provenance: dict) -> list[str]:
    lines = [
        "## Sources",
        "",
        "Each table below names the file it is read from. The files do not record their "
        f"commit or date; {_link(PROVENANCE)} does. For the main job the commit is the "
        "code that ran; for the benchmarks it is the commit that recorded the file.",
        "",
        *header("file", "what", "date", "commit", "command"),
    ]
    for source in provenance["sources"].values():
        lines.append(
            row(
                _link(source["path"]),
                source["what"],
                source["date"],
                f"`{source['commit'][:7]}`",
                f"`{source['command']}`",
            )
        )
    return lines + [""]


def _demo_run(provenance: dict, data: dict) -> list[str]:
    run = provenance["runs"]["demo"]
    compiled = data["demo-compilation"]
    programs = sum(stage["programs"] for stage in compiled.values())
    seconds = sum(stage["compile_seconds"] for stage in compiled.values())
    return [
        "## The main job (`make demo`)",
        "",
        f"The run: {run['what']}. Wall time {_minutes(run['wall_seconds'])} "
        f"(user CPU {_minutes(run['user_seconds'])}, "
        f"system {_minutes(run['system_seconds'])}), peak memory "
        f"{run['max_rss_kb'] / 1e6:.1f} GB; stages: "
        + ", ".join(f"{k} {_minutes(v)}" for k, v in run["stage_seconds"].items())
        + f". {programs} programs compiled in {seconds:.0f} s ("
        + ", ".join(
            f"{stage} {r['programs']} in {r['compile_seconds']:.0f} s, {r['cache_hits']} from "
            "the cache"
            for stage, r in compiled.items()
        )
        + f"). The times are transcribed from {run['transcribed_from']} into "
        f"{_link(PROVENANCE)}, the compilation counts read from its compilation.json. "
        + _source_line(provenance["sources"]["demo-compilation"]),
        "",
    ]


def _corpora(provenance: dict, data: dict) -> list[str]:
    report = data["demo-build-report"]
    lines = [
        f"### Corpora (`{report['size']}`)",
        "",
        *header("corpus", "split", "items", "hours", "speakers", "WER", "build"),
    ]
    for name, corpus in report["configs"].items():
        if name.startswith("synthetic_calls/"):
            for split, part in (("train", corpus), ("heldout", corpus.get("heldout"))):
                if not part:
                    continue
                engines = part["engines"]
                lines.append(
                    row(
                        name,
                        split,
                        f"{part['examples']} calls",
                        f"{part['hours']:.2f}",
                        ", ".join(f"{e} {v['speakers']}" for e, v in engines.items()),
                        f"{part['word_error_rate']:.3f}",
                        _minutes(corpus["build_seconds"]) if split == "train" else "",
                    )
                )
        else:
            for split in ("train", "test", "heldout"):
                part = corpus[split]
                lines.append(
                    row(
                        name,
                        split,
                        f"{part['utterances']} utterances, {part['keyword_occurrences']} keywords",
                        f"{part['hours']:.2f}",
                        ", ".join(f"{e} {v['speakers']}" for e, v in part["engines"].items()),
                        "",
                        _minutes(corpus["build_seconds"]) if split == "train" else "",
                    )
                )
    stream = report["configs"]["synthetic_calls/questions-quick"]["text_stream"]
    kws = report["configs"]["synthetic_kws/quick"]
    lines += [
        "",
        "WER: the recogniser (pocketsphinx, causal) against the words said. Speakers: "
        "distinct voice variants and speed warps per engine. The causal text stream of "
        f"questions-quick: words emitted {stream['lag_median_s']:.2f} s (median) / "
        f"{stream['lag_p90_s']:.2f} s (90th percentile) after they end, "
        f"{stream['within_1s']:.1%} within 1 s; {stream['nonblank_text_frames_causal']:.1%} of "
        "the causal text frames hold letters. Keyword intervals from the aligner: "
        + ", ".join(f"{s} {kws[s]['mean_aligned_fraction']:.1%}" for s in ("train", "heldout"))
        + ". Synthesis speed (seconds per second of speech, one core): "
        + ", ".join(
            f"{engine} {v['real_time_factor']:.3f}"
            for engine, v in report["synthesis_speed"].items()
        )
        + ".",
        "",
        _source_line(provenance["sources"]["demo-build-report"]),
        "",
    ]
    return lines


def _text_scores_text(scores: dict | None) -> str:
    if not scores:
        return ""
    return f" (on the calls WER {scores['wer']:.1%}, CER {scores['cer']:.1%})"


def _multiqt(provenance: dict, data: dict, name: str) -> list[str]:
    results = data[name]
    smoothing = results["smoothing"]
    lines = [
        f"### MultiQT, {results['task']} ({results['num_folds']}-fold cross-validation)",
        "",
        "Mean ± std over the folds, each fold's model on its own test fold (in-engine: "
        f"espeak-ng) and on all {results['heldout_calls']} calls of the held-out synthesiser "
        f"({results['heldout_engine']}); smoothed: the causal minimum-duration rule at "
        f"{smoothing['min_frames']} frames ({smoothing['latency_ms']:.0f} ms latency); transfer: "
        "held-out mean / in-engine mean. Text: the causal stream of "
        + TEXT_SOURCES.get(results.get("text_recogniser", ""), results.get("text_recogniser"))
        + _text_scores_text(results.get("text_scores"))
        + ".",
        "",
        *header(
            "model | TIMESTEP F1 | INSTANCE F1 | INSTANCE F1 smoothed | held-out TIMESTEP F1 | "
            "held-out INSTANCE F1 smoothed | transfer (TIMESTEP)"
        ),
    ]
    for model, label in MULTIQT_MODELS.items():
        summary = results["models"].get(model)
        if summary is None:
            continue
        held = summary["heldout"]

        def cell(part, score):
            return _ms({k: part[k][score]["f1"] for k in ("mean", "std")})

        lines.append(
            row(
                label,
                cell(summary, "timestep"),
                cell(summary, "instance"),
                cell(summary["smoothed"], "instance"),
                cell(held, "timestep"),
                cell(held["smoothed"], "instance"),
                ratio(summary["transfer"]["timestep_f1"]),
            )
        )
    return lines + ["", _source_line(provenance["sources"][name]), ""]


def _cskws(provenance: dict, data: dict) -> list[str]:
    results = data["demo-cskws"]
    first = next(iter(results["models"].values()))
    lines = [
        f"### CS-KWS, `{results['dataset']}`",
        "",
        f"{results['training_utterances']} training utterances, {len(results['keywords'])} "
        f"keywords; test split {first['test_hours']:.2f} h (espeak-ng voices not heard in "
        f"training), held-out split {first['heldout']['test_hours']:.2f} h "
        f"({results['heldout_engine']}). 95 % bootstrap intervals over utterances in "
        "brackets; FRR@B is the miss rate at B false alarms per hour (on the test split "
        f"FRR@5 allows {first['allowed_false_alarms']['FRR@5']:.1f} false alarm); transfer: "
        "held-out mAP / test mAP.",
        "",
        *header(
            "model | mAP | AP@0.05 | AP@0.75 | FRR@5 | FRR@25 | held-out mAP | held-out FRR@5 | "
            "transfer | RTF"
        ),
    ]
    for model, label in KWS_MODELS.items():
        m = results["models"].get(model)
        if m is None:
            continue
        held = m["heldout"]
        lines.append(
            row(
                label,
                scored(m["mAP"], m["intervals"].get("mAP")),
                number(m["AP@0.05"]),
                number(m["AP@0.75"]),
                number(m["FRR@5"]),
                number(m["FRR@25"]),
                scored(held["mAP"], held["intervals"].get("mAP")),
                number(held["FRR@5"]),
                ratio(m["transfer"]),
                f"{m['RTF']:.5f}",
            )
        )
    return lines + ["", _source_line(provenance["sources"]["demo-cskws"]), ""]


def _fields_text(fields: dict) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in fields.items()) or "the preset"


def _engine_transfer(provenance: dict, data: dict) -> list[str]:
    """AF-KWS on engines it never heard: each table whose result file is recorded."""
    parts = [
        table(provenance, data)
        for table in (
            _kws_levers,
            _kws_final_half,
            _engine_matrix,
            _variation_matrix,
            _unknown_probe,
        )
    ]
    if not any(parts):
        return []
    return ["## AF-KWS on synthesisers it never heard", ""] + [line for p in parts for line in p]


def _kws_levers(provenance: dict, data: dict) -> list[str]:
    """The levers screened on the development split."""
    levers = data.get("kws-levers")
    if levers is None:
        return []
    lines = []
    lines += [
        "### Levers",
        "",
        "Each row one CS-KWS run of the quick preset (AF-KWS, 1,500 steps unless the "
        "lever says otherwise) on synthetic_kws/quick (or the corpus its `dataset` "
        "names: medium holds quick's test and held-out utterances): in-engine = its test split "
        "(espeak-ng voices not heard in training; with Festival, also Festival's ked "
        f"voice); development = `{levers['development_split']}`, the first half of the "
        "Piper utterances, which choose the levers (the other half is scored once, "
        "below). 95 % bootstrap intervals over utterances; transfer = development / "
        "in-engine mAP; `afkws_no_unknown` rows train without the unknown class, so "
        "they do not test the paper's claim that it helps.",
        "",
        *header("lever", "fields", "model", "in-engine mAP", "development mAP", "transfer"),
    ]
    for item in levers["rows"]:
        lines.append(
            row(
                item["lever"],
                _fields_text(item["fields"]),
                item["model"],
                scored(item["in_engine"]["mAP"], item["in_engine"]["interval"]),
                scored(item["development"]["mAP"], item["development"]["interval"]),
                ratio(item["transfer"]),
            )
        )
    lines += ["", _source_line(provenance["sources"]["kws-levers"]), ""]
    return lines


def _kws_final_half(provenance: dict, data: dict) -> list[str]:
    """The chosen setting, scored once on the other half."""
    final = data.get("kws-final-half")
    if final is None:
        return []
    lines = []
    lines += [
        "### The chosen setting, scored once",
        "",
        "The CS-KWS preset before the levers and with the chosen ones (input "
        "normalisation `cmn`, VTLP 0.9-1.1, the unknown class at weight 0.1), each model "
        f"scored on the development half and once on the other half, `{final['final_split']}`, "
        "which chose nothing; transfer = that half's mAP / in-engine mAP.",
        "",
        *header(
            "preset", "model", "in-engine mAP", "development mAP", "final-half mAP", "transfer"
        ),
    ]
    for preset, models in final["presets"].items():
        for model, found in models.items():
            lines.append(
                row(
                    preset,
                    model,
                    *(
                        scored(found[part]["mAP"], found[part]["interval"])
                        for part in ("in_engine", "development", "final")
                    ),
                    ratio(found["transfer"]),
                )
            )
    lines += ["", _source_line(provenance["sources"]["kws-final-half"]), ""]
    return lines


def _engine_matrix(provenance: dict, data: dict) -> list[str]:
    """The leave-one-engine-out matrix."""
    matrix = data.get("engine-transfer")
    if matrix is None:
        return []
    lines = []
    engines = dict.fromkeys(c["heldout_engine"] for r in matrix.values() for c in r["cells"])
    lines += [
        "### Leave one engine out",
        "",
        f"Engines {', '.join(engines)} (`experiments.engine_transfer`): each "
        "engine held out once, AF-KWS trained on the others' training split, scored on "
        "their test split (in-engine) and on the held-out engine's whole heldout split; "
        "the CS-KWS preset before the levers and with them. 95 % bootstrap intervals "
        "over utterances.",
        "",
        *header(
            "preset",
            "held out",
            "trained on",
            "model",
            "in-engine mAP",
            "held-out mAP",
            "transfer",
        ),
    ]
    for preset, run in matrix.items():
        for cell in run["cells"]:
            lines.append(
                row(
                    preset,
                    cell["heldout_engine"],
                    ", ".join(cell["training_engines"]),
                    cell["model"],
                    scored(cell["in_engine"]["mAP"], cell["in_engine"]["mAP_interval"]),
                    scored(cell["heldout"]["mAP"], cell["heldout"]["mAP_interval"]),
                    ratio(cell["transfer"]),
                )
            )
        for model, mean in run["models"].items():
            lines.append(
                row(
                    preset,
                    "mean",
                    "",
                    model,
                    number(mean["in_engine_mAP"]),
                    number(mean["heldout_mAP"]),
                    ratio(mean["transfer"]),
                )
            )
    lines += ["", _source_line(provenance["sources"]["engine-transfer"]), ""]
    return lines


def _variation_matrix(provenance: dict, data: dict) -> list[str]:
    """The leave-one-engine-out matrix of each speech variation."""
    matrix = data.get("variation-matrix")
    if matrix is None:
        return []
    from experiments import variation_matrix  # the runner's own table

    return [
        "### What varied speech buys",
        "",
        "Engines espeak, festival, piper on the corpora all three speak "
        "(`experiments.variation_matrix`, engine set `all`): each engine held out once, "
        "AF-KWS and audio-only MultiQT (questions) trained on the records of the other two "
        "and scored on their test records (in-engine) and on every training-split record of "
        "the held-out engine. Rows: the corpora as they were (`plain`), with the speaker "
        "stage (`speakers`), with the stage and varied scripts and keyword places "
        "(`varied`). AF-KWS: mAP with 95 % bootstrap intervals over utterances; MultiQT: "
        "TIMESTEP F1 with the range over its 5 folds, and the share of predicted question "
        "frames more than 0.5 s before their question's spoken onset (early frames, "
        "in-engine / held-out; the goal is at most 0.05). "
        "Figure: [variation-matrix.png](results/variation-matrix.png).",
        "",
        variation_matrix.table(matrix),
        "",
        _source_line(provenance["sources"]["variation-matrix"]),
        "",
    ]


def _unknown_probe(provenance: dict, data: dict) -> list[str]:
    """What the classes say at the true keywords."""
    probe = data.get("kws-unknown-probe")
    if probe is None:
        return []
    lines = []
    lines += [
        "### What the classes say at the keywords",
        "",
        "`experiments.unknown_probe` on trained AF-KWS bundles: for every true keyword, "
        "the peak probability of its own class, of the best other keyword and of the "
        "unknown class within 2 output frames (80 ms) of its centre; shares above 0.3 "
        "over keywords, and over all valid output frames.",
        "",
        *header(
            "model",
            "split",
            "keywords",
            "own median",
            "own > 0.3",
            "another keyword higher",
            "unknown median",
            "unknown higher",
            "frames: unknown > 0.3",
        ),
    ]
    for model, splits in probe.items():
        for split, found in splits.items():
            lines.append(
                row(
                    model,
                    f"`{split}`",
                    str(found["keywords"]),
                    number(found["own_median"]),
                    ratio(found["own_above"]),
                    ratio(found["other_keyword_higher"]),
                    number(found["unknown_median"]),
                    ratio(found["unknown_higher"]),
                    ratio(found["unknown_frames_above"]),
                )
            )
    lines += ["", _source_line(provenance["sources"]["kws-unknown-probe"]), ""]
    return lines


def _studies(provenance: dict, data: dict) -> list[str]:
    lines = ["## The studies (`make studies`)", ""]
    payload = data.get("studies")
    if payload is None:
        return lines + [
            f"Not recorded yet: {STUDIES} is absent. To add it, run `{STUDIES_COMMAND}`, copy "
            f"outputs/studies/studies.json to {STUDIES}, record its run with "
            f"`python -m experiments.report.results_doc --record {STUDIES} --date DATE "
            "--commit COMMIT --command 'make studies'` and run "
            "`python -m experiments.report.results_doc` again.",
            "",
        ]
    from experiments.report import studies_md  # only when there are studies to show

    lines += [
        f"Preset `{payload['preset']}`; corpora `{payload['corpora']['multiqt']}` and "
        f"`{payload['corpora']['cskws']}`. MultiQT scores: mean ± std over "
        f"{payload['num_folds']} folds. Seconds per study: "
        + ", ".join(f"{k} {v:.0f}" for k, v in payload["seconds"].items())
        + ". "
        + _source_line(provenance["sources"]["studies"]),
        "",
        *header("claim", "verdict", "evidence"),
    ]
    for claim in payload["claims"]:
        lines.append(row(claim["claim"], f"**{claim['verdict']}**", claim["evidence"]))
    lines.append("")
    figureless = {study: "" for study in studies_md.SECTIONS}
    for study, section in studies_md.SECTIONS.items():
        if study in payload["studies"]:
            lines += [
                line.replace("## ", "### ", 1) if line.startswith("## ") else line
                for line in section(payload["studies"][study], payload, figureless)
                if not line.startswith("![")
            ]
    return lines + [""]


def _milliseconds(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _benchmarks(provenance: dict, data: dict) -> list[str]:
    sources = provenance["sources"]
    m = data["bench-metrics"]
    seq, det = m["sequence"], m["detection"]
    machine = m["machine"]
    lines = [
        "## Benchmarks (`make bench`)",
        "",
        "### Metrics",
        "",
        f"{machine['cpu']}, {machine['cores_used']} cores, Python {machine['python']}, jax "
        f"{machine['jax']}, {machine['backend']}; median of repeats (minimum in brackets), "
        "after compilation.",
        "",
        *header("task", "jitted `metrics`", "peer", "ratio"),
        row(
            f"TIMESTEP + INSTANCE, {seq['shape'][0]} x {seq['shape'][1]:,} timesteps, "
            f"{seq['num_classes']} classes",
            f"{_milliseconds(seq['seconds']['jit_timestep_plus_instance'])} "
            f"({_milliseconds(seq['min_seconds']['jit_timestep_plus_instance'])})",
            f"scikit-learn TIMESTEP alone {_milliseconds(seq['seconds']['sklearn_timestep'])}",
            f"{m['ratios']['sklearn_timestep_over_jit_timestep_plus_instance']:.1f}x",
        ),
        row(
            "same, against the NumPy loop reference",
            _milliseconds(seq["seconds"]["jit_timestep_plus_instance"]),
            f"{seq['seconds']['numpy_reference_both']:.2f} s",
            f"{m['ratios']['reference_over_jit_sequence']:.0f}x",
        ),
        row(
            f"`detection_scores`, {det['num_detections']:,} detections, "
            f"{det['num_ground_truths']:,} ground truths, {det['num_classes']} classes",
            f"{_milliseconds(det['seconds']['jit_detection_scores'])} "
            f"({_milliseconds(det['min_seconds']['jit_detection_scores'])})",
            f"ActivityNet-style NumPy AP {det['seconds']['numpy_ap_peer']:.2f} s",
            f"{m['ratios']['numpy_ap_peer_over_jit_detection_scores']:.1f}x",
        ),
        row(
            "same, against the NumPy loop reference",
            _milliseconds(det["seconds"]["jit_detection_scores"]),
            f"{det['seconds']['numpy_reference']:.2f} s",
            f"{m['ratios']['reference_over_jit_detection']:.0f}x",
        ),
        "",
        f"Compile: {seq['seconds']['jit_compile']:.1f} s (sequence), "
        f"{det['seconds']['jit_compile']:.1f} s (detection). Values agree within 1e-6: "
        f"{m['values_agree_within_1e-6']}. " + _source_line(sources["bench-metrics"]),
        "",
    ]
    s = data["bench-streaming"]
    lines += [
        "### Streaming inference",
        "",
        f"One core, {s['stream_seconds']:.0f} s streams, default model sizes, random weights. "
        "Streams per core: the largest power-of-two batch whose step fits in the block.",
        "",
        *header(
            "model | block | RTF | latency median / p99 | streams per core | algorithmic "
            "latency | stream vs offline"
        ),
    ]
    for key in ("multiqt", "afkws"):
        name = s[key]["model"].split(":")[0]
        for block in s[key]["blocks"]:
            agree = f"max diff {block['max_abs_stream_minus_offline']:.1g}"
            if "detections_offline" in block:
                agree += (
                    f"; of {block['detections_offline']:,} detections "
                    f"{block['only_offline']} only offline, {block['only_streamed']} only streamed"
                )
            lines.append(
                row(
                    name,
                    f"{block['block_ms']} ms",
                    f"{block['rtf']:.4f}",
                    f"{block['latency_median_ms']:.2f} / {block['latency_p99_ms']:.2f} ms",
                    f"{block['realtime_streams_per_core']:,}",
                    f"{block['algorithmic_latency_ms']} ms",
                    agree,
                )
            )
    lines += ["", _source_line(sources["bench-streaming"]), ""]
    t = data["bench-train"]
    lines += [
        "### Training",
        "",
        *header("model | batch | step | audio seconds per second"),
    ]
    for key in ("multiqt", "afkws"):
        lines.append(
            row(
                t[key]["model"].split(":")[0],
                t[key]["batch"],
                f"{t[key]['step_seconds'] * 1000:.0f} ms",
                f"{t[key]['audio_seconds_per_second']:.0f}",
            )
        )
    lines += ["", *header("fold form | preset | compile | step | total over the preset's steps")]
    for preset, forms in t.get("fold_forms", {}).items():
        for form, f in forms["forms"].items():
            lines.append(
                row(
                    form,
                    f"{preset} ({forms['folds']} folds, {forms['batch']}, "
                    f"{forms['steps']:,} steps)",
                    f"{f['compile_seconds']:.1f} s",
                    f"{f['step_seconds']:.2f} s",
                    f"{f['total_seconds']:,.0f} s",
                )
            )
    lines += ["", _source_line(sources["bench-train"]), ""]
    d = data["bench-data"]
    lines += ["### Corpus building", "", *header("corpus | stage | audio seconds per second")]
    for corpus in ("synthetic_calls", "synthetic_kws"):
        for stage, speed in d[corpus]["audio_seconds_per_second"].items():
            lines.append(row(corpus, stage, f"{speed:,.1f}"))
    lines += ["", _source_line(sources["bench-data"]), ""]
    c = data["bench-cost"]
    peak = c["cpu_peak"]
    lines += [
        "### Cost",
        "",
        f"XLA cost analysis of the forward pass on 10 s of input; peak {peak['cores']} cores x "
        f"{peak['clock_hz'] / 1e9:.2f} GHz x {peak['flops_per_cycle_per_core']} FLOP/cycle = "
        f"{peak['peak_flops'] / 1e9:.0f} GFLOP/s.",
        "",
        *header("model | MFLOP per audio second (analytic) | achieved | share of peak | top layer"),
    ]
    for key in ("multiqt", "afkws"):
        x = c[key]
        top, share = next(iter(x["layer_shares"].items()))
        lines.append(
            row(
                x["model"].split(":")[0],
                f"{x['xla_flops_per_audio_second'] / 1e6:.1f} "
                f"({x['analytic_flops_per_audio_second'] / 1e6:.1f})",
                f"{x['achieved_flops'] / 1e9:.0f} GFLOP/s",
                f"{x['fraction_of_peak']:.0%}",
                f"{top} {share:.0%}",
            )
        )
    lines += ["", _source_line(sources["bench-cost"]), ""]
    lines += _export_backends(data["export_backends"], sources["export_backends"])
    if "pooling" in data:  # benchmarks.pooling, once recorded
        lines += _pooling(data["pooling"], sources["pooling"])
    if "installs" in data:  # benchmarks.installs, once recorded
        lines += _installs(data["installs"], sources["installs"])
    if "suite" in data:  # benchmarks.suite (make suite-profile), once recorded
        lines += _suite(data["suite"], sources["suite"])
    return lines


def _export_backends(e: dict, source: dict) -> list[str]:
    """The export streamed by jax (StableHLO) and by onnxruntime (ONNX), one core."""
    lines = [
        "### Export backends: StableHLO and ONNX",
        "",
        f"One core, a {e['stream_seconds']:.0f} s stream of 200 ms blocks through an export "
        "folder of a default-size model (random weights): the front end on each block's "
        "samples, then the step (AF-KWS: the detector, step and peak decoding). jax runs the "
        f"StableHLO step; onnx runs the ONNX front end and step in onnxruntime "
        f"{e['onnxruntime']} (one thread).",
        "",
        *header("model | backend | RTF | block latency median / p99 | onnx against jax"),
    ]
    for key, name in (("afkws", "AF-KWS"), ("multiqt", "MultiQT")):
        agree = f"max abs {e[key]['max_abs_difference']:.1g}"
        if "peaks_differing" in e[key]:
            agree += f"; {e[key]['peaks_differing']} peak decision(s) differ"
        for backend, x in e[key]["backends"].items():
            lines.append(
                row(
                    name,
                    backend,
                    f"{x['rtf']:.4f}",
                    f"{x['block_ms_median']:.2f} / {x['block_ms_p99']:.2f} ms",
                    agree,
                )
            )
    lines += ["", *header("model | file | bytes")]
    for key, name in (("afkws", "AF-KWS"), ("multiqt", "MultiQT")):
        for file_name, size in e[key]["file_bytes"].items():
            lines.append(row(name, file_name, f"{size:,}"))
    return lines + ["", _source_line(source), ""]


def _pooling(e: dict, source: dict) -> list[str]:
    """The sliding-window classifier's training step with each max-pool, in turns."""
    forms = {
        "comparisons": ("`baselines.max_pool` (comparisons)", 1.0),
        "flax_reduce_window": ("`flax.linen.max_pool` (reduce_window)", e["flax_over_comparisons"]),
    }
    lines = [
        "### Sliding-window training step: max-pool forms",
        "",
        f"{e['machine']['cpu']}, {e['batch']}, default `WindowConfig`; median (minimum) "
        f"over {e['rounds']} turns of {e['calls_per_round']} steps each, the forms in turns.",
        "",
        *header("max-pool | step | against comparisons"),
    ]
    for form, (label, against) in forms.items():
        step = _milliseconds(e["step_seconds"][form])
        fastest = _milliseconds(e["min_step_seconds"][form])
        lines.append(row(label, f"{step} ({fastest})", f"{against:.2f}x"))
    lines += [
        "",
        "Same parameters after one step from the same state, bit for bit: "
        f"{e['same_parameters_after_one_step']}. " + _source_line(source),
    ]
    return lines + [""]


def _installs(e: dict, source: dict) -> list[str]:
    """Size and import time of the light and the full install, fresh environments."""
    lines = [
        "### Installs",
        "",
        f"Fresh environments (Python {e['python']}, requirements.lock's versions): the light "
        "install `.[infer]`, which runs export folders, and the full one `.[full]` "
        f"(bundles, training, corpora). Import time: the median of {e['repeats']} fresh "
        "processes; `cskws_jax.bundle` is the model code a bundle needs, which detect "
        "imported at start-up before the light install.",
        "",
        *header("install | packages | size | largest | import time"),
    ]
    for extra in ("infer", "full"):
        x = e[extra]
        largest = ", ".join(f"{name} {mb:.0f}" for name, mb in list(x["largest_mb"].items())[:4])
        imports = "; ".join(f"`{module}` {s:.2f} s" for module, s in x["import_s"].items())
        lines.append(
            row(
                f"`.[{extra}]`",
                str(x["packages"]),
                f"{x['size_mb']:,.0f} MB",
                f"{largest} (MB)",
                imports,
            )
        )
    return lines + ["", _source_line(source), ""]


def _suite(e: dict, source: dict, files: int = 12) -> list[str]:
    """Where the test suite's time went: totals, workers, the costliest files."""
    t = e["totals"]
    busy = ", ".join(
        f"{name} {w['busy_seconds']:.0f} s of tests in {w['span_seconds']:.0f} s"
        for name, w in e["workers"].items()
    )
    lines = [
        "### The test suite",
        "",
        f"The suite with the `benchmarks.suite` plugin ({e['machine']['cpus']} CPUs, Python "
        f"{e['machine']['python']}): "
        f"{t['tests']} tests in {_minutes(e['wall_seconds'])} ({busy}). Of the "
        f"{t['seconds']:.0f} s of test time, JAX compiled {t['programs']:,} programs in the "
        f"test processes in {t['compile_seconds']:.0f} s ({t['cache_hits']:,} read from the "
        f"cache) and traced and lowered for {t['trace_and_lower_seconds']:.0f} s; the "
        "experiment tests' subprocesses compile on top, inside their tests' seconds.",
        "",
        *header("file | tests | seconds | compiling | programs"),
    ]
    for name, f in list(e["files"].items())[:files]:
        lines.append(
            row(
                f"`{name}`",
                str(f["tests"]),
                f"{f['seconds']:.0f}",
                f"{f['compile_seconds']:.0f}",
                f"{f['programs']:,}",
            )
        )
    return lines + ["", _source_line(source), ""]


TEXT_SOURCES = {"": "pocketsphinx", "ctc": "CTC words", "ctc_posteriors": "CTC posteriors"}
RECOGNISER_SPLITS = {
    "validation": "recogniser_speech validation",
    "calls": "questions calls (in-engine)",
    "heldout_calls": "questions calls, held-out engine",
}


def _recogniser(provenance: dict, data: dict) -> list[str]:
    """The CTC recogniser's quick run, and MultiQT fed its text beside pocketsphinx's,
    where recorded (sources recogniser-quick and multiqt-TASK-RECOGNISER)."""
    if "recogniser-quick" not in data:
        return []
    run = data["recogniser-quick"]
    lines = [
        "## The CTC recogniser (`ctc_jax`)",
        "",
        f"{run['model']}; trained on `{run['dataset']}` ({run['train_hours']:.2f} h) in "
        f"{_minutes(run['train_seconds'])}; streaming RTF {run['rtf']:.4f} on one core. "
        "Causal greedy decoding; lag: each word's emission after its spoken end.",
        "",
        *header("split | recogniser | CER | WER | lag median / p90 | words"),
    ]
    for split, label in RECOGNISER_SPLITS.items():
        for name in ("ctc", "pocketsphinx"):
            score = run[split].get(name)
            if score is None:
                continue
            lag = (
                f"{score['lag_median_s']:.2f} / {score['lag_p90_s']:.2f} s"
                if score["lag_words"]
                else "–"
            )
            lines.append(
                row(
                    label,
                    "CTC" if name == "ctc" else "pocketsphinx",
                    f"{score['cer']:.1%}" if "cer" in score else "–",
                    f"{score['wer']:.1%}",
                    lag,
                    f"{score['words']:,}",
                )
            )
    lines += ["", _source_line(provenance["sources"]["recogniser-quick"]), ""]
    order = list(TEXT_SOURCES)
    runs = sorted(
        (name for name in provenance["sources"] if name.startswith("multiqt-")),
        key=lambda name: (data[name]["task"], order.index(data[name]["text_recogniser"])),
    )
    if not runs:
        return lines
    lines += [
        "### MultiQT fed the CTC recogniser's text",
        "",
        "Quick corpora, 5 folds; the text input: the causal words of each recogniser "
        "(greedy for the CTC recogniser), or the CTC recogniser's 20 ms character "
        "posteriors; mean ± std over the folds.",
        "",
        *header("task | text from | model | TIMESTEP F1 | held-out TIMESTEP F1"),
    ]
    for name in runs:
        results = data[name]
        source = TEXT_SOURCES.get(results["text_recogniser"], results["text_recogniser"])
        for model, summary in results["models"].items():
            scores = {k: summary[k]["timestep"]["f1"] for k in ("mean", "std")}
            held = {k: summary["heldout"][k]["timestep"]["f1"] for k in ("mean", "std")}
            label = MULTIQT_MODELS[model]
            lines.append(row(results["task"], source, label, _ms(scores), _ms(held)))
    lines.append("")
    lines += [f"- {_source_line(provenance['sources'][name])}" for name in runs]
    return lines + [""]


def _outcome(value) -> str:
    return {True: "yes", False: "no", None: "not measured"}[value]


def _tests_text(tests: dict) -> str:
    text = f"{tests['passed']} passed, {tests['failed']} failed, {tests['skipped']} skipped"
    if tests.get("failed_tests"):
        text += f" (failed: {', '.join(t.rsplit('::', 1)[-1] for t in tests['failed_tests'])})"
    return text


def _accelerator(provenance: dict, data: dict) -> list[str]:
    """The device check's runs (`benchmarks.gpu_check`), where any is recorded: sources
    named gpu-*, each a whole check or a later call's summary."""
    names = [name for name in provenance["sources"] if name.startswith("gpu-")]
    if not names:
        return []
    lines = ["## Accelerators (`benchmarks.gpu_check`)", ""]
    for name in names:
        run, source = data[name], provenance["sources"][name]
        machine = run["machine"]
        if isinstance(machine, dict):
            machine = (
                f"{machine['device_kind']}, jax {machine['jax']} ({machine['platform_version']}), "
                f"Python {machine['python']}"
            )
        lines += [f"### {source['what']}", "", f"{machine}.", ""]
        lines += [f"- Tests: {_tests_text(run['tests'])}."]
        if "contract" in run:
            holds = run["contract"].get("holds")
            lines += [f"- Streaming contract within 1e-5: {_outcome(holds)}."]
        if "determinism" in run:
            identical = run["determinism"].get("identical")
            lines += [f"- Training bit-identical in fresh processes: {_outcome(identical)}."]
        rows = (run.get("streaming") or {}).get("summary") or []
        if rows:
            lines += [
                "",
                *header(
                    "model | block | RTF | latency median / p99 | real-time streams per device "
                    "| stream vs offline"
                ),
            ]
        for block in rows:
            streams = block["realtime_streams_per_device"]
            streams = "not searched (budget)" if streams is None else f"{streams:,}"
            if block["lower_bound"]:
                streams = f">= {streams}"
            lines.append(
                row(
                    {"multiqt": "MultiQT", "afkws": "AF-KWS"}[block["model"]],
                    f"{block['block_ms']} ms",
                    f"{block['rtf']:.4f}",
                    f"{block['latency_median_ms']:.2f} / {block['latency_p99_ms']:.2f} ms",
                    streams,
                    f"max diff {block['max_abs_stream_minus_offline']:.1g}",
                )
            )
        lines += ["", _source_line(source), ""]
    return lines + ["What failed there and why: [gpu.md](gpu.md#measured-on-an-nvidia-h200).", ""]


def render(root: pathlib.Path = ROOT) -> str:
    """docs/results.md's text from the result files under `root`."""
    provenance, data = load(root)
    lines = [
        "# Results",
        "",
        "<!-- Written by `python -m experiments.report.results_doc` from the JSON files it "
        "names; do not edit by hand. tests/test_results_doc.py fails when this file and the "
        "generator's output differ. -->",
        "",
        "Every measured number of the project's documentation is here, read from result "
        "files committed in the repository. All scores are on synthetic speech (see the "
        "README's limitations); compare numbers measured on one machine (XLA:CPU picks its "
        "kernels per processor, and training amplifies last-bit differences).",
        "",
        *_sources(provenance),
        *_demo_run(provenance, data),
        *_corpora(provenance, data),
        *_multiqt(provenance, data, "demo-multiqt-questions"),
        *_multiqt(provenance, data, "demo-multiqt-symptoms"),
        *_cskws(provenance, data),
        *_engine_transfer(provenance, data),
        *_studies(provenance, data),
        *_recogniser(provenance, data),
        *_benchmarks(provenance, data),
        *_accelerator(provenance, data),
    ]
    while lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def record(root: pathlib.Path, path: str, date: str, commit: str, command: str, what: str):
    """Adds or updates the provenance entry of the result file `path` (relative to root)."""
    provenance = json.loads((root / PROVENANCE).read_text())
    name = next(
        (n for n, s in provenance["sources"].items() if s["path"] == path),
        "studies" if path == STUDIES else pathlib.Path(path).stem,
    )
    entry = provenance["sources"].get(name, {"path": path, "what": what or "the studies"})
    entry.update(date=date, commit=commit, command=command, sha256=files.sha256(root / path))
    if what:
        entry["what"] = what
    entry.setdefault("commit_is", "the code that ran")
    provenance["sources"][name] = entry
    (root / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/results.md differs")
    parser.add_argument("--record", metavar="PATH", help="record the run that wrote PATH")
    parser.add_argument("--date", help="with --record: the run's date (YYYY-MM-DD)")
    parser.add_argument("--commit", help="with --record: the commit that ran")
    parser.add_argument("--command", help="with --record: the command that wrote the file")
    parser.add_argument("--what", default="", help="with --record: what the file holds")
    args = parser.parse_args(argv)
    if args.record:
        if not (args.date and args.commit and args.command):
            parser.error("--record needs --date, --commit and --command")
        record(ROOT, args.record, args.date, args.commit, args.command, args.what)
    try:
        text = render(ROOT)
    except ProvenanceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    path = ROOT / DOC
    if args.check:
        same = path.exists() and path.read_text() == text
        print(f"{DOC} is {'up to date' if same else 'out of date: run without --check'}")
        return 0 if same else 1
    path.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
