"""Speed of `experiments.evaluate` (stj-evaluate) on a fresh compilation cache: the
shipped AF-KWS bundle scored on a ~12-minute folder of recordings.

    python -m benchmarks.evaluate_speed --json benchmarks/results/evaluate_speed.json
    python -m benchmarks.evaluate_speed --folder outputs/kws12  # keep (and reuse) the folder

Three ways (before, exact, after: batch lengths and metric scans) each score the folder
in their own subprocess on an empty compilation cache. The folder, the ways and the
JSON's fields: docs/benchmarks.md, "Evaluate".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import soundfile

from benchmarks import common
from speechkit import audio_io, files

SHIPPED_KWS = "cskws_jax/models/afkws-top20"
DATASET = "folder_kws/shipped"
WAYS = {  # name: (batch lengths, scans)
    "before": ("exact", "unrolled"),
    "exact": ("exact", "loop"),
    "after": ("buckets", "loop"),
}
TIMINGS = ("seconds", "RTF")  # results.json fields that are timings

_log = common.logger("evaluate_speed")


def build_folder(folder: str, minutes: float, seed: int = 0) -> dict:
    """Writes `folder/<nnnn>.wav` (16 kHz) of rendered keyword sentences and their
    `keywords.json` until about `minutes` of audio; returns {"files", "seconds"}."""
    from cskws_jax import keywords as keyword_list
    from cskws_jax.datasets import render, text

    keywords = list(keyword_list.load_keywords())
    config = render.KwsRenderConfig(engines=("espeak",), heldout_engine=None)
    os.makedirs(folder, exist_ok=True)
    annotations, seconds = {}, 0.0
    while seconds < minutes * 60:
        rng = np.random.default_rng([seed, len(annotations)])
        words, _ = text.sample_utterance_text(rng, keywords)
        spoken = render.render_utterance(words, rng, "test", config)
        name = f"{len(annotations):04d}.wav"
        audio_io.write_audio(os.path.join(folder, name), spoken.waveform, spoken.sample_rate)
        annotations[name] = [
            {"keyword": w.word, "start": round(w.start, 3), "end": round(w.end, 3)}
            for w in spoken.words
            if w.word in keywords
        ]
        seconds += spoken.duration
    files.write_json(os.path.join(folder, "keywords.json"), annotations)
    return {"files": len(annotations), "seconds": seconds}


def folder_record(folder: str, minutes: float) -> dict:
    """{"path", "files", "seconds", "built_s" (None: reused)} of the benchmark's folder,
    built first when it holds no keywords.json."""
    if os.path.isfile(os.path.join(folder, "keywords.json")):
        annotations = files.load_json(os.path.join(folder, "keywords.json"))
        seconds = sum(soundfile.info(os.path.join(folder, name)).duration for name in annotations)
        return {"path": folder, "files": len(annotations), "seconds": seconds, "built_s": None}
    started = time.perf_counter()
    made = build_folder(folder, minutes)
    return {"path": folder, **made, "built_s": time.perf_counter() - started}


def unrolled_scans() -> None:
    """Puts back the metrics' scans as they were before issue 60: `jax.lax.associative_scan`,
    its tree unrolled (the same values; only the compile time differs)."""
    import jax

    from metrics import detection

    detection._tree_scan = lambda combine, elems: jax.lax.associative_scan(combine, elems)


def run_one(args) -> None:
    """The child: one way of scoring (`--way`) on the prepared corpus, on the compilation
    cache of its environment; writes {"evaluate_s", "scoring_s", "compilation"} to
    `--child_json`."""
    from experiments.scoring import bundles
    from speechkit import compilation

    lengths, scans = WAYS[args.way]
    if scans == "unrolled":
        unrolled_scans()
    compilation.enable_cache()
    settings = bundles.Settings(
        bundle=args.bundle, dataset=DATASET, data_dir=args.data_dir, batch_size=args.batch_size
    )
    started = time.perf_counter()
    with compilation.Counter() as counted:
        payload = bundles.evaluate(settings, args.workdir, batch_lengths=lengths)
    files.write_json(
        args.child_json,
        {
            "evaluate_s": time.perf_counter() - started,
            "scoring_s": payload["seconds"],
            "compilation": counted.record(slowest=6),
        },
    )


def _child(args, way: str, scratch: str, extra=()) -> dict:
    """Runs this script as a child for `way` on a fresh cache; its record with
    "total_s" (the child's wall seconds) and "workdir"."""
    workdir = os.path.join(scratch, way)
    record = os.path.join(scratch, f"{way}.json")
    environ = {**os.environ, "JAX_COMPILATION_CACHE_DIR": tempfile.mkdtemp(dir=scratch)}
    command = [sys.executable, "-m", "benchmarks.evaluate_speed", "--way", way]
    command += ["--child_json", record, "--workdir", workdir, "--data_dir", args.data_dir]
    command += ["--bundle", args.bundle, "--batch_size", str(args.batch_size), *extra]
    started = time.perf_counter()
    done = subprocess.run(command, env=environ, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"evaluate_speed: way {way} failed:\n{done.stderr[-3000:]}")
    return {"total_s": time.perf_counter() - started, **files.load_json(record), "workdir": workdir}


def prepare_corpus(folder: str, data_dir: str) -> float:
    """Builds the folder's corpus in `data_dir` (what `--manual_dir` does); seconds."""
    from experiments.scoring import corpora

    started = time.perf_counter()
    corpora.prepare(corpora.corpus_builder(DATASET, data_dir), folder)
    return time.perf_counter() - started


def same_results(first: str, second: str) -> bool:
    """Whether two evaluate workdirs' results.json agree apart from their timings."""
    loaded = []
    for workdir in (first, second):
        with open(os.path.join(workdir, "results.json")) as stream:
            result = json.load(stream)
        result.pop("seconds")
        for name in TIMINGS:
            result["scores"].pop(name, None)
        loaded.append(result)
    return loaded[0] == loaded[1]


def ratios(runs: dict) -> dict:
    """before / after of the wall and compile figures."""
    before, after = runs["before"], runs["after"]
    pairs = {
        "total_s": (before["total_s"], after["total_s"]),
        "evaluate_s": (before["evaluate_s"], after["evaluate_s"]),
        "compile_s": (
            before["compilation"]["compile_seconds"],
            after["compilation"]["compile_seconds"],
        ),
        "programs": (before["compilation"]["programs"], after["compilation"]["programs"]),
    }
    return {key: b / a if a else None for key, (b, a) in pairs.items()}


def run(args) -> dict:
    """Every way of WAYS on the folder, and what they compare to."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = folder_record(args.folder or os.path.join(scratch, "folder"), args.minutes)
        _log(f"folder: {folder['files']} files, {folder['seconds'] / 60:.1f} min of audio")
        args.data_dir = os.path.join(scratch, "tfds")
        build_s = prepare_corpus(folder["path"], args.data_dir)
        runs = {}
        for way in WAYS:
            runs[way] = _child(args, way, scratch)
            compiled = runs[way]["compilation"]
            _log(
                f"{way}: {runs[way]['total_s']:.1f} s in all, {compiled['programs']} programs "
                f"compiled in {compiled['compile_seconds']:.1f} s"
            )
        first = runs["before"]["workdir"]
        for record in runs.values():
            record["same_results"] = same_results(first, record.pop("workdir"))
    return {
        "machine": common.machine(),
        "bundle": args.bundle,
        "batch_size": args.batch_size,
        "folder": {key: folder[key] for key in ("files", "seconds", "built_s")},
        "corpus_build_s": build_s,
        "runs": runs,
        "ratios": ratios(runs),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/evaluate_speed.json")
    parser.add_argument("--folder", default="", help="the folder_kws folder (built if empty)")
    parser.add_argument("--minutes", type=float, default=12.0, help="audio of a built folder")
    parser.add_argument("--bundle", default=SHIPPED_KWS)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--way", default="", choices=("", *WAYS), help=argparse.SUPPRESS)
    for internal in ("--child_json", "--workdir", "--data_dir"):
        parser.add_argument(internal, default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.way:
        run_one(args)
        return 0
    payload = run(args)
    files.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
