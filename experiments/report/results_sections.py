"""The sections of docs/results.md that share a shape, as data: a `results_tables.Section`
per result file (title, intro, table columns and rows, note) with the row functions of its
tables, and the tables that `results_doc` places itself (`MULTIQT_BY_TEXT`,
`GPU_STREAMING`). `results_doc.DOCUMENT` puts them in order."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from experiments.report.markdown import mean_std_text as _ms
from experiments.report.markdown import number, ratio, scored
from experiments.report.results_tables import Section, Table, chapter, milliseconds, minutes

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
MODEL_NAMES = {"afkws": "AF-KWS", "multiqt": "MultiQT"}  # the benchmarks' keys
TEXT_SOURCES = {"": "pocketsphinx", "ctc": "CTC words", "ctc_posteriors": "CTC posteriors"}
RECOGNISER_SPLITS = {
    "validation": "recogniser_speech validation",
    "calls": "questions calls (in-engine)",
    "heldout_calls": "questions calls, held-out engine",
}


def _present(models: dict, labels: dict):
    """(label, summary) of each model in `labels` that `models` holds."""
    return ((label, models[key]) for key, label in labels.items() if models.get(key) is not None)


def _f1(part: dict, score: str) -> str:
    return _ms({k: part[k][score]["f1"] for k in ("mean", "std")})


def _maps(found: dict, parts: Sequence[str], interval: str = "interval") -> list[str]:
    return [scored(found[part]["mAP"], found[part][interval]) for part in parts]


def _timed(median: float, minimum: float) -> str:
    return f"{milliseconds(median)} ({milliseconds(minimum)})"


def _block(block: dict) -> tuple[str, str, str]:
    """A streamed block's size, RTF and latency cells."""
    latency = f"{block['latency_median_ms']:.2f} / {block['latency_p99_ms']:.2f} ms"
    return f"{block['block_ms']} ms", f"{block['rtf']:.4f}", latency


def _text_source(results: dict) -> str:
    """Where a MultiQT run's text came from."""
    text = results.get("text_recogniser", "")
    return TEXT_SOURCES.get(text, text)


def _corpus_rows(report: dict):
    for name, corpus in report["configs"].items():
        calls = name.startswith("synthetic_calls/")
        for split in ("train", "heldout") if calls else ("train", "test", "heldout"):
            part = corpus if calls and split == "train" else corpus.get(split)
            if not part:
                continue
            yield (
                name,
                split,
                f"{part['examples']} calls"
                if calls
                else f"{part['utterances']} utterances, {part['keyword_occurrences']} keywords",
                f"{part['hours']:.2f}",
                ", ".join(f"{e} {v['speakers']}" for e, v in part["engines"].items()),
                f"{part['word_error_rate']:.3f}" if calls else "",
                minutes(corpus["build_seconds"]) if split == "train" else "",
            )


CORPORA = Section(
    "demo-build-report",
    "### Corpora (`{d[size]}`)",
    columns="corpus | split | items | hours | speakers | WER | build",
    rows=_corpus_rows,
    note="WER: the recogniser (pocketsphinx, causal) against the words said. Speakers: "
    "distinct voice variants and speed warps per engine. The causal text stream of "
    "questions-quick: words emitted {stream[lag_median_s]:.2f} s (median) / "
    "{stream[lag_p90_s]:.2f} s (90th percentile) after they end, {stream[within_1s]:.1%} "
    "within 1 s; {stream[nonblank_text_frames_causal]:.1%} of the causal text frames hold "
    "letters. Keyword intervals from the aligner: {aligned}. Synthesis speed (seconds per "
    "second of speech, one core): {speeds}.\n\n{source}",
    names=lambda d: {
        "stream": d["configs"]["synthetic_calls/questions-quick"]["text_stream"],
        "aligned": ", ".join(
            f"{s} {d['configs']['synthetic_kws/quick'][s]['mean_aligned_fraction']:.1%}"
            for s in ("train", "heldout")
        ),
        "speeds": ", ".join(
            f"{engine} {v['real_time_factor']:.3f}" for engine, v in d["synthesis_speed"].items()
        ),
    },
)

MULTIQT_QUESTIONS = Section(
    "demo-multiqt-questions",
    "### MultiQT, {d[task]} ({d[num_folds]}-fold cross-validation)",
    intro="Mean ± std over the folds, each fold's model on its own test fold (in-engine: "
    "espeak-ng) and on all {d[heldout_calls]} calls of the held-out synthesiser "
    "({d[heldout_engine]}); smoothed: the causal minimum-duration rule at "
    "{d[smoothing][min_frames]} frames ({d[smoothing][latency_ms]:.0f} ms latency); transfer: "
    "held-out mean / in-engine mean. Text: the causal stream of {text}.",
    columns="model | TIMESTEP F1 | INSTANCE F1 | INSTANCE F1 smoothed | held-out TIMESTEP F1 | "
    "held-out INSTANCE F1 smoothed | transfer (TIMESTEP)",
    rows=lambda d: (
        (
            label,
            _f1(s, "timestep"),
            _f1(s, "instance"),
            _f1(s["smoothed"], "instance"),
            _f1(s["heldout"], "timestep"),
            _f1(s["heldout"]["smoothed"], "instance"),
            ratio(s["transfer"]["timestep_f1"]),
        )
        for label, s in _present(d["models"], MULTIQT_MODELS)
    ),
    names=lambda d: {
        "text": _text_source(d)
        + (
            " (on the calls WER {wer:.1%}, CER {cer:.1%})".format(**d["text_scores"])
            if d.get("text_scores")
            else ""
        )
    },
)
MULTIQT_SYMPTOMS = dataclasses.replace(MULTIQT_QUESTIONS, source="demo-multiqt-symptoms")

CSKWS = Section(
    "demo-cskws",
    "### CS-KWS, `{d[dataset]}`",
    intro="{d[training_utterances]} training utterances, {keywords} keywords; test split "
    "{first[test_hours]:.2f} h (espeak-ng voices not heard in training), held-out split "
    "{first[heldout][test_hours]:.2f} h ({d[heldout_engine]}). 95 % bootstrap intervals over "
    "utterances in brackets; FRR@B is the miss rate at B false alarms per hour (on the test "
    "split FRR@5 allows {first[allowed_false_alarms][FRR@5]:.1f} false alarm); transfer: "
    "held-out mAP / test mAP.",
    columns="model | mAP | AP@0.05 | AP@0.75 | FRR@5 | FRR@25 | held-out mAP | held-out FRR@5 | "
    "transfer | RTF",
    rows=lambda d: (
        (
            label,
            scored(m["mAP"], m["intervals"].get("mAP")),
            *(number(m[key]) for key in ("AP@0.05", "AP@0.75", "FRR@5", "FRR@25")),
            scored(m["heldout"]["mAP"], m["heldout"]["intervals"].get("mAP")),
            number(m["heldout"]["FRR@5"]),
            ratio(m["transfer"]),
            f"{m['RTF']:.5f}",
        )
        for label, m in _present(d["models"], KWS_MODELS)
    ),
    names=lambda d: {"first": next(iter(d["models"].values())), "keywords": len(d["keywords"])},
)

LEVERS = Section(
    "kws-levers",
    "### Levers",
    intro="Each row one CS-KWS run of the quick preset (AF-KWS, 1,500 steps unless the lever "
    "says otherwise) on synthetic_kws/quick (or the corpus its `dataset` names: medium holds "
    "quick's test and held-out utterances): in-engine = its test split (espeak-ng voices not "
    "heard in training; with Festival, also Festival's ked voice); development = "
    "`{d[development_split]}`, the first half of the Piper utterances, which choose the levers "
    "(the other half is scored once, below). 95 % bootstrap intervals over utterances; "
    "transfer = development / in-engine mAP; `afkws_no_unknown` rows train without the "
    "unknown class, so they do not test the paper's claim that it helps.",
    columns="lever | fields | model | in-engine mAP | development mAP | transfer",
    rows=lambda d: (
        (
            r["lever"],
            ", ".join(f"`{k}={v}`" for k, v in r["fields"].items()) or "the preset",
            r["model"],
            *_maps(r, ("in_engine", "development")),
            ratio(r["transfer"]),
        )
        for r in d["rows"]
    ),
)

FINAL_HALF = Section(
    "kws-final-half",
    "### The chosen setting, scored once",
    intro="The CS-KWS preset before the levers and with the chosen ones (input normalisation "
    "`cmn`, VTLP 0.9-1.1, the unknown class at weight 0.1), each model scored on the "
    "development half and once on the other half, `{d[final_split]}`, which chose nothing; "
    "transfer = that half's mAP / in-engine mAP.",
    columns="preset | model | in-engine mAP | development mAP | final-half mAP | transfer",
    rows=lambda d: (
        (preset, model, *_maps(f, ("in_engine", "development", "final")), ratio(f["transfer"]))
        for preset, models in d["presets"].items()
        for model, f in models.items()
    ),
)


def _engine_rows(matrix: dict):
    for preset, run in matrix.items():
        for c in run["cells"]:
            trained_on = ", ".join(c["training_engines"])
            mAPs = _maps(c, ("in_engine", "heldout"), "mAP_interval")
            yield (preset, c["heldout_engine"], trained_on, c["model"], *mAPs, ratio(c["transfer"]))
        for model, mean in run["models"].items():
            mAPs = (number(mean["in_engine_mAP"]), number(mean["heldout_mAP"]))
            yield (preset, "mean", "", model, *mAPs, ratio(mean["transfer"]))


def _variation_table(matrix: dict) -> str:
    from experiments import variation_matrix  # the runner's own table

    return variation_matrix.table(matrix)


ENGINE_TRANSFER = chapter(
    "AF-KWS on synthesisers it never heard",
    LEVERS,
    FINAL_HALF,
    Section(
        "engine-transfer",
        "### Leave one engine out",
        intro="Engines {engines} (`experiments.engine_transfer`): each engine held out once, "
        "AF-KWS trained on the others' training split, scored on their test split (in-engine) "
        "and on the held-out engine's whole heldout split; the CS-KWS preset before the levers "
        "and with them. 95 % bootstrap intervals over utterances.",
        columns="preset | held out | trained on | model | in-engine mAP | held-out mAP | transfer",
        rows=_engine_rows,
        names=lambda d: {
            "engines": ", ".join(
                dict.fromkeys(c["heldout_engine"] for r in d.values() for c in r["cells"])
            )
        },
    ),
    Section(
        "variation-matrix",
        "### What varied speech buys",
        intro="Engines espeak, festival, piper on the corpora all three speak "
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
        more=(_variation_table,),
    ),
    Section(
        "kws-unknown-probe",
        "### What the classes say at the keywords",
        intro="`experiments.unknown_probe` on trained AF-KWS bundles: for every true keyword, "
        "the peak probability of its own class, of the best other keyword and of the unknown "
        "class within 2 output frames (80 ms) of its centre; shares above 0.3 over keywords, "
        "and over all valid output frames.",
        columns="model | split | keywords | own median | own > 0.3 | another keyword higher | "
        "unknown median | unknown higher | frames: unknown > 0.3",
        rows=lambda d: (
            (
                model,
                f"`{split}`",
                str(f["keywords"]),
                number(f["own_median"]),
                *(ratio(f[k]) for k in ("own_above", "other_keyword_higher")),
                number(f["unknown_median"]),
                *(ratio(f[k]) for k in ("unknown_higher", "unknown_frames_above")),
            )
            for model, splits in d.items()
            for split, f in splits.items()
        ),
    ),
)


def _recogniser_rows(run: dict):
    for split, label in RECOGNISER_SPLITS.items():
        for name in ("ctc", "pocketsphinx"):
            if (s := run[split].get(name)) is None:
                continue
            lag = f"{s['lag_median_s']:.2f} / {s['lag_p90_s']:.2f} s" if s["lag_words"] else "–"
            cer = f"{s['cer']:.1%}" if "cer" in s else "–"
            recogniser = "CTC" if name == "ctc" else name
            yield (label, recogniser, cer, f"{s['wer']:.1%}", lag, f"{s['words']:,}")


RECOGNISER = Section(
    "recogniser-quick",
    "## The CTC recogniser (`ctc_jax`)",
    intro="{d[model]}; trained on `{d[dataset]}` ({d[train_hours]:.2f} h) in "
    "{d[train_seconds]:minutes}; streaming RTF {d[rtf]:.4f} on one core. Causal greedy "
    "decoding; lag: each word's emission after its spoken end.",
    columns="split | recogniser | CER | WER | lag median / p90 | words",
    rows=_recogniser_rows,
)


MULTIQT_BY_TEXT = Table(  # of the runs multiqt-TASK-RECOGNISER
    "task | text from | model | TIMESTEP F1 | held-out TIMESTEP F1",
    lambda runs: (
        (
            r["task"],
            _text_source(r),
            MULTIQT_MODELS[model],
            _f1(s, "timestep"),
            _f1(s["heldout"], "timestep"),
        )
        for r in runs
        for model, s in r["models"].items()
    ),
)


def _metrics_rows(m: dict):
    """Per task: the jitted metrics against their peer, then against the NumPy loops."""
    seq, det, ratios = m["sequence"], m["detection"], m["ratios"]
    tasks = [
        (
            f"TIMESTEP + INSTANCE, {seq['shape'][0]} x {seq['shape'][1]:,} timesteps, "
            f"{seq['num_classes']} classes",
            seq,
            "jit_timestep_plus_instance",
            f"scikit-learn TIMESTEP alone {milliseconds(seq['seconds']['sklearn_timestep'])}",
            ratios["sklearn_timestep_over_jit_timestep_plus_instance"],
            "numpy_reference_both",
            ratios["reference_over_jit_sequence"],
        ),
        (
            f"`detection_scores`, {det['num_detections']:,} detections, "
            f"{det['num_ground_truths']:,} ground truths, {det['num_classes']} classes",
            det,
            "jit_detection_scores",
            f"ActivityNet-style NumPy AP {det['seconds']['numpy_ap_peer']:.2f} s",
            ratios["numpy_ap_peer_over_jit_detection_scores"],
            "numpy_reference",
            ratios["reference_over_jit_detection"],
        ),
    ]
    for task, part, jit, peer, over_peer, reference, over_reference in tasks:
        seconds = part["seconds"]
        yield task, _timed(seconds[jit], part["min_seconds"][jit]), peer, f"{over_peer:.1f}x"
        yield (
            "same, against the NumPy loop reference",
            milliseconds(seconds[jit]),
            f"{seconds[reference]:.2f} s",
            f"{over_reference:.0f}x",
        )


def _streaming_rows(s: dict):
    for key in ("multiqt", "afkws"):
        for b in s[key]["blocks"]:
            agree = f"max diff {b['max_abs_stream_minus_offline']:.1g}"
            if "detections_offline" in b:
                agree += (
                    f"; of {b['detections_offline']:,} detections {b['only_offline']} only "
                    f"offline, {b['only_streamed']} only streamed"
                )
            streams, latency = f"{b['realtime_streams_per_core']:,}", b["algorithmic_latency_ms"]
            yield (s[key]["model"].split(":")[0], *_block(b), streams, f"{latency} ms", agree)


def _cost_rows(c: dict):
    for x in (c["multiqt"], c["afkws"]):
        top, share = next(iter(x["layer_shares"].items()))
        yield (
            x["model"].split(":")[0],
            f"{x['xla_flops_per_audio_second'] / 1e6:.1f} "
            f"({x['analytic_flops_per_audio_second'] / 1e6:.1f})",
            f"{x['achieved_flops'] / 1e9:.0f} GFLOP/s",
            f"{x['fraction_of_peak']:.0%}",
            f"{top} {share:.0%}",
        )


def _export_rows(e: dict):
    for key, name in MODEL_NAMES.items():
        agree = f"max abs {e[key]['max_abs_difference']:.1g}"
        if "peaks_differing" in e[key]:
            agree += f"; {e[key]['peaks_differing']} peak decision(s) differ"
        for backend, x in e[key]["backends"].items():
            latency = f"{x['block_ms_median']:.2f} / {x['block_ms_p99']:.2f} ms"
            yield (name, backend, f"{x['rtf']:.4f}", latency, agree)


def _install_rows(e: dict):
    for extra in ("infer", "full"):
        x = e[extra]
        largest = ", ".join(f"{name} {mb:.0f}" for name, mb in list(x["largest_mb"].items())[:4])
        imports = "; ".join(f"`{module}` {s:.2f} s" for module, s in x["import_s"].items())
        size = f"{x['size_mb']:,.0f} MB"
        yield (f"`.[{extra}]`", str(x["packages"]), size, f"{largest} (MB)", imports)


POOLING_FORMS = {
    "comparisons": "`baselines.max_pool` (comparisons)",
    "flax_reduce_window": "`flax.linen.max_pool` (reduce_window)",
}

BENCHMARKS = chapter(
    "Benchmarks (`make bench`)",
    Section(
        "bench-metrics",
        "### Metrics",
        intro="{d[machine][cpu]}, {d[machine][cores_used]} cores, Python {d[machine][python]}, "
        "jax {d[machine][jax]}, {d[machine][backend]}; median of repeats (minimum in "
        "brackets), after compilation.",
        columns="task | jitted `metrics` | peer | ratio",
        rows=_metrics_rows,
        note="Compile: {d[sequence][seconds][jit_compile]:.1f} s (sequence), "
        "{d[detection][seconds][jit_compile]:.1f} s (detection). Values agree within 1e-6: "
        "{d[values_agree_within_1e-6]}. {source}",
    ),
    Section(
        "bench-streaming",
        "### Streaming inference",
        intro="One core, {d[stream_seconds]:.0f} s streams, default model sizes, random "
        "weights. Streams per core: the largest power-of-two batch whose step fits in the "
        "block.",
        columns="model | block | RTF | latency median / p99 | streams per core | algorithmic "
        "latency | stream vs offline",
        rows=_streaming_rows,
    ),
    Section(
        "bench-train",
        "### Training",
        columns="model | batch | step | audio seconds per second",
        rows=lambda t: (
            (
                x["model"].split(":")[0],
                x["batch"],
                f"{x['step_seconds'] * 1000:.0f} ms",
                f"{x['audio_seconds_per_second']:.0f}",
            )
            for x in (t["multiqt"], t["afkws"])
        ),
        more=(
            Table(
                "fold form | preset | compile | step | total over the preset's steps",
                lambda t: (
                    (
                        form,
                        f"{preset} ({p['folds']} folds, {p['batch']}, {p['steps']:,} steps)",
                        f"{f['compile_seconds']:.1f} s",
                        f"{f['step_seconds']:.2f} s",
                        f"{f['total_seconds']:,.0f} s",
                    )
                    for preset, p in t.get("fold_forms", {}).items()
                    for form, f in p["forms"].items()
                ),
            ),
        ),
    ),
    Section(
        "bench-data",
        "### Corpus building",
        columns="corpus | stage | audio seconds per second",
        rows=lambda d: (
            (corpus, stage, f"{speed:,.1f}")
            for corpus in ("synthetic_calls", "synthetic_kws")
            for stage, speed in d[corpus]["audio_seconds_per_second"].items()
        ),
    ),
    Section(
        "bench-cost",
        "### Cost",
        intro="XLA cost analysis of the forward pass on 10 s of input; peak "
        "{d[cpu_peak][cores]} cores x {ghz:.2f} GHz x {d[cpu_peak][flops_per_cycle_per_core]} "
        "FLOP/cycle = {gflops:.0f} GFLOP/s.",
        columns="model | MFLOP per audio second (analytic) | achieved | share of peak | top layer",
        rows=_cost_rows,
        names=lambda d: {
            "ghz": d["cpu_peak"]["clock_hz"] / 1e9,
            "gflops": d["cpu_peak"]["peak_flops"] / 1e9,
        },
    ),
    Section(
        "export_backends",
        "### Export backends: StableHLO and ONNX",
        intro="One core, a {d[stream_seconds]:.0f} s stream of 200 ms blocks through an export "
        "folder of a default-size model (random weights): the front end on each block's "
        "samples, then the step (AF-KWS: the detector, step and peak decoding). jax runs the "
        "StableHLO step; onnx runs the ONNX front end and step in onnxruntime "
        "{d[onnxruntime]} (one thread).",
        columns="model | backend | RTF | block latency median / p99 | onnx against jax",
        rows=_export_rows,
        more=(
            Table(
                "model | file | bytes",
                lambda e: (
                    (name, file_name, f"{size:,}")
                    for key, name in MODEL_NAMES.items()
                    for file_name, size in e[key]["file_bytes"].items()
                ),
            ),
        ),
    ),
    Section(
        "pooling",
        "### Sliding-window training step: max-pool forms",
        intro="{d[machine][cpu]}, {d[batch]}, default `WindowConfig`; median (minimum) over "
        "{d[rounds]} turns of {d[calls_per_round]} steps each, the forms in turns.",
        columns="max-pool | step | against comparisons",
        rows=lambda e: (
            (
                label,
                _timed(e["step_seconds"][form], e["min_step_seconds"][form]),
                f"{1.0 if form == 'comparisons' else e['flax_over_comparisons']:.2f}x",
            )
            for form, label in POOLING_FORMS.items()
        ),
        note="Same parameters after one step from the same state, bit for bit: "
        "{d[same_parameters_after_one_step]}. {source}",
    ),
    Section(
        "installs",
        "### Installs",
        intro="Fresh environments (Python {d[python]}, requirements.lock's versions): the "
        "light install `.[infer]`, which runs export folders, and the full one `.[full]` "
        "(bundles, training, corpora). Import time: the median of {d[repeats]} fresh "
        "processes; `cskws_jax.bundle` is the model code a bundle needs, which detect "
        "imported at start-up before the light install.",
        columns="install | packages | size | largest | import time",
        rows=_install_rows,
    ),
    Section(
        "suite",
        "### The test suite",
        intro="The suite with the `benchmarks.suite` plugin ({d[machine][cpus]} CPUs, Python "
        "{d[machine][python]}): {t[tests]} tests in {d[wall_seconds]:minutes} ({busy}). Of the "
        "{t[seconds]:.0f} s of test time, JAX compiled {t[programs]:,} programs in the test "
        "processes in {t[compile_seconds]:.0f} s ({t[cache_hits]:,} read from the cache) and "
        "traced and lowered for {t[trace_and_lower_seconds]:.0f} s; the experiment tests' "
        "subprocesses compile on top, inside their tests' seconds.",
        columns="file | tests | seconds | compiling | programs",
        rows=lambda e: (  # the 12 costliest files
            (
                f"`{name}`",
                str(f["tests"]),
                f"{f['seconds']:.0f}",
                f"{f['compile_seconds']:.0f}",
                f"{f['programs']:,}",
            )
            for name, f in list(e["files"].items())[:12]
        ),
        names=lambda e: {
            "t": e["totals"],
            "busy": ", ".join(
                f"{name} {w['busy_seconds']:.0f} s of tests in {w['span_seconds']:.0f} s"
                for name, w in e["workers"].items()
            ),
        },
    ),
)


def _gpu_rows(blocks: list):
    for b in blocks:
        streams = b["realtime_streams_per_device"]
        streams = "not searched (budget)" if streams is None else f"{streams:,}"
        streams = f">= {streams}" if b["lower_bound"] else streams
        agree = f"max diff {b['max_abs_stream_minus_offline']:.1g}"
        yield (MODEL_NAMES[b["model"]], *_block(b), streams, agree)


GPU_STREAMING = Table(  # of a device check's run
    "model | block | RTF | latency median / p99 | real-time streams per device | stream vs offline",
    _gpu_rows,
)
