"""Builds every embedded corpus of one size (TFDS ArrayRecord), with a build report.

    python -m experiments.build_data --size=quick --data_dir=~/tensorflow_datasets
    python -m experiments.build_data --size=smoke --corpora=kws
    python -m experiments.build_data --size=medium --corpora=kws   # synthetic_kws only
    python -m experiments.build_data --size=quick --engine_set=festival   # + Festival
    python -m experiments.build_data --size=quick --engine_set=all --variation=speakers
    python -m experiments.build_data --size=quick --corpora=recogniser   # optional corpus

Builds `calls` and `kws` by default, `recogniser` when named, prints progress and writes
`<data_dir>/build_report-<size>[-<set>][-<variation>].json`.

Specification (sizes, corpora, engine sets, variations, the report's fields):
docs/experiments.md#building-the-corpora.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from cskws_jax.datasets import synthetic_kws
from cskws_jax.datasets import text as kws_text
from ctc_jax.datasets import recogniser_speech
from multiqt_jax import labels
from multiqt_jax.datasets import synthetic_calls
from multiqt_jax.datasets.features import FEATURES, NUM_FOLDS, recognised_words
from speechkit import asr, compilation, error_rates, files, prepared, progress, tts
from speechkit.corpus import speaker_engine

SPEED_TEXTS = (
    "Where are you calling from? My father fell down the stairs.",
    "Is he awake and is he breathing? Okay, stay on the line with me.",
)


def _log(message: str) -> None:
    print(f"[build_data] {message}", file=sys.stderr, flush=True)


def synthesis_speed() -> dict:
    """Per installed engine: seconds of synthesis per second of speech (real-time factor)
    on SPEED_TEXTS with its default voice, after one warm-up call."""
    voices = {
        "espeak": tts.EspeakVoice(),
        "piper": tts.PiperVoice(),
        "festival": tts.FestivalVoice(),
    }
    speed = {}
    for engine in tts.available_engines():
        tts.synthesize("Warm up.", voices[engine])
        started, seconds = time.perf_counter(), 0.0
        for text in SPEED_TEXTS:
            seconds += tts.synthesize(text, voices[engine]).duration
        spent = time.perf_counter() - started
        speed[engine] = {
            "real_time_factor": spent / seconds,
            "voices": len(tts.engine_voices(engine)),
        }
    return speed


def corpus_report(source, class_names) -> dict:
    """Hours, class counts (10 ms frames and instances), ASR error rates and what the
    causal text stream holds (`asr.emission_report`: emission lag, non-blank frames)."""
    frames = np.zeros(len(class_names), np.int64)
    instances = np.zeros(len(class_names), np.int64)
    per_fold = np.zeros((NUM_FOLDS, len(class_names)), np.int64)
    references, hypotheses, seconds, streams = [], [], 0.0, []
    speakers: dict[str, set[str]] = {}
    calls_per_engine: dict[str, int] = {}
    first_class, first_onset_s = np.zeros(len(class_names), np.int64), []
    for index in range(len(source)):
        record = source[index]
        names = _text(record["speakers"]).split("|")
        for name in names:
            speakers.setdefault(speaker_engine(name), set()).add(name)
        calls_per_engine[speaker_engine(names[0])] = (
            calls_per_engine.get(speaker_engine(names[0]), 0) + 1
        )
        streams.append((recognised_words(record), np.shape(record["audio"])[0] // 2))
        label = np.asarray(record["labels"])
        frames += np.bincount(label, minlength=len(class_names))
        starts = np.flatnonzero(np.diff(np.concatenate([[0], label])) != 0)
        labelled = starts[label[starts] != 0]
        if labelled.size:
            first_class[label[labelled[0]]] += 1
            first_onset_s.append(float(labelled[0]) * FEATURES.hop_s)
        for start in starts:
            if label[start] != 0:
                instances[label[start]] += 1
                per_fold[int(record["fold"]), label[start]] += 1
        seconds += float(record["duration"])
        transcript = record["transcript"]
        transcript = transcript.decode() if isinstance(transcript, bytes) else transcript
        references.append(asr.normalise_words(transcript))
        hypotheses.append([w.decode() if isinstance(w, bytes) else w for w in record["asr_word"]])
    return {
        "examples": len(source),
        "hours": seconds / 3600,
        "frames_per_class": dict(zip(class_names, frames.tolist(), strict=True)),
        "instances_per_class": dict(zip(class_names, instances.tolist(), strict=True)),
        "instances_per_fold": {
            f"fold {fold}": dict(zip(class_names[1:], row[1:].tolist(), strict=True))
            for fold, row in enumerate(per_fold)
        },
        "word_error_rate": error_rates.error_rate(references, hypotheses),
        "character_error_rate": error_rates.error_rate(
            [" ".join(r) for r in references], [" ".join(h) for h in hypotheses]
        ),
        "text_stream": asr.emission_report(streams),
        "first_class": first_class_report(first_class, first_onset_s, class_names),
        "engines": {
            engine: {
                "calls": calls_per_engine.get(engine, 0),
                "speakers": len(names),
                "speaker_stage": tts.speaker_distribution(sorted(names)),
            }
            for engine, names in sorted(speakers.items())
        },
    }


def first_class_report(counts: np.ndarray, onsets_s: list[float], class_names) -> dict:
    """What a model could learn from a call's clock: per class the share of calls whose
    first labelled span is of it, and the first span's onset (s: p10, median, p90)."""
    total = max(int(counts.sum()), 1)
    onsets = np.asarray(onsets_s) if onsets_s else np.zeros(1)
    p10, p50, p90 = (float(v) for v in np.percentile(onsets, [10, 50, 90]))
    return {
        "share": {
            name: int(n) / total for name, n in zip(class_names[1:], counts[1:], strict=True)
        },
        "onset_s": {"p10": p10, "median": p50, "p90": p90},
    }


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def kws_report(source, keywords) -> dict:
    """Utterances, hours, keyword occurrences per keyword and other words of a split,
    where its keywords stand (`cskws_jax.datasets.text.text_report`), and per engine its
    utterances, speakers, aligned share and what the speaker stage drew."""
    counts = np.zeros(len(keywords), np.int64)
    seconds, other_words, aligned, speakers = 0.0, 0, 0.0, set()
    engines: dict[str, dict] = {}
    texts = []
    for index in range(len(source)):
        record = source[index]
        labels_here = np.asarray(record["keyword_label"])[np.asarray(record["keyword_valid"])]
        counts += np.bincount(labels_here, minlength=len(keywords))
        other_words += int(np.size(record["other_start"]))
        seconds += float(record["duration"])
        aligned += float(record["aligned_fraction"])
        speaker = _text(record["speaker"])
        speakers.add(speaker)
        texts.append(_text(record["text"]).split())
        entry = engines.setdefault(
            speaker_engine(speaker), {"utterances": 0, "speakers": set(), "aligned": 0.0}
        )
        entry["utterances"] += 1
        entry["speakers"].add(speaker)
        entry["aligned"] += float(record["aligned_fraction"])
    return {
        "utterances": len(source),
        "hours": seconds / 3600,
        "speakers": len(speakers),
        "keyword_occurrences": int(counts.sum()),
        "keywords": dict(zip(keywords, counts.tolist(), strict=True)),
        "other_words": other_words,
        "mean_aligned_fraction": aligned / max(len(source), 1),
        "text": kws_text.text_report(texts, keywords),
        "engines": {
            engine: {
                "utterances": entry["utterances"],
                "speakers": len(entry["speakers"]),
                "mean_aligned_fraction": entry["aligned"] / entry["utterances"],
                "speaker_stage": tts.speaker_distribution(sorted(entry["speakers"])),
            }
            for engine, entry in sorted(engines.items())
        },
    }


def build_calls(
    size: str, data_dir: str, engine_set: str = "pip", variation: str = "plain"
) -> dict:
    """Both synthetic_calls configs of a size, engine set and variation; their report
    entries."""
    configs = {}
    for task in labels.TASKS:
        name = tts.corpus_config_name(f"{task}-{size}", engine_set, variation)
        _log(f"building synthetic_calls/{name} in {data_dir}")
        started = time.perf_counter()
        builder = synthetic_calls.SyntheticCalls(
            config=name, data_dir=data_dir, file_format="array_record"
        )
        seconds = _prepare(builder, started)
        sources = prepared.data_source(f"synthetic_calls/{name}", data_dir=data_dir)
        entry = {"build_seconds": seconds, **corpus_report(sources["train"], labels.classes(task))}
        entry["scripts"] = synthetic_calls.scripts_report(size, builder.builder_config.script)
        if "heldout" in sources:
            entry["heldout"] = corpus_report(sources["heldout"], labels.classes(task))
        configs[f"synthetic_calls/{name}"] = entry
        _log(
            f"synthetic_calls/{name}: {_took(seconds)}, {entry['hours']:.3f} h, "
            f"WER {entry['word_error_rate']:.3f}, word emission lag median "
            f"{entry['text_stream']['lag_median_s']:.2f} s / p90 "
            f"{entry['text_stream']['lag_p90_s']:.2f} s"
        )
    return configs


def build_kws(size: str, data_dir: str, engine_set: str = "pip", variation: str = "plain") -> dict:
    """The synthetic_kws config of a size, engine set and variation; its report entry."""
    config = tts.corpus_config_name(size, engine_set, variation)
    name = f"synthetic_kws/{config}"
    _log(f"building {name} in {data_dir}")
    started = time.perf_counter()
    builder = synthetic_kws.SyntheticKws(
        config=config, data_dir=data_dir, file_format="array_record"
    )
    seconds = _prepare(builder, started)
    keywords = list(builder.info.metadata["keywords"])
    sources = prepared.data_source(name, data_dir=data_dir)
    splits = {split: kws_report(sources[split], keywords) for split in sorted(sources)}
    hours = sum(entry["hours"] for entry in splits.values())
    _log(
        f"{name}: {_took(seconds)}, {hours:.3f} h, keywords per split "
        + ", ".join(f"{split} {entry['keyword_occurrences']}" for split, entry in splits.items())
    )
    return {name: {"build_seconds": seconds, "hours": hours, "keyword_list": keywords, **splits}}


def build_recogniser(
    size: str, data_dir: str, engine_set: str = "pip", variation: str = "plain"
) -> dict:
    """The recogniser_speech config of a size and engine set (it comes plain only); its
    report entry."""
    if variation != "plain":
        raise ValueError(f"variation {variation!r}: the recogniser corpus comes plain only")
    config = tts.corpus_config_name(size, engine_set)
    name = f"recogniser_speech/{config}"
    _log(f"building {name} in {data_dir}")
    started = time.perf_counter()
    builder = recogniser_speech.RecogniserSpeech(
        config=config, data_dir=data_dir, file_format="array_record"
    )
    seconds = _prepare(builder, started)
    sources = prepared.data_source(name, data_dir=data_dir)
    splits = {split: recogniser_speech.corpus_report(sources[split]) for split in sorted(sources)}
    hours = sum(entry["hours"] for entry in splits.values())
    _log(
        f"{name}: {_took(seconds)}, {hours:.3f} h, "
        + ", ".join(f"{split} {entry['utterances']} utterances" for split, entry in splits.items())
    )
    return {name: {"build_seconds": seconds, "hours": hours, **splits}}


BUILDERS = {"calls": build_calls, "kws": build_kws, "recogniser": build_recogniser}
DEFAULT_CORPORA = ("calls", "kws")  # what a build without --corpora (and `make demo`) makes
CORPUS_SIZES = {
    "calls": synthetic_calls.SIZES,
    "kws": synthetic_kws.SIZES,
    "recogniser": recogniser_speech.SIZES,
}


def _prepare(builder, started: float) -> float | None:
    """Builds what `builder` lacks; the seconds it took since `started`, or None when the
    corpus was already there (a rerun measures nothing). The build holds a lock on the
    corpus (a file in data_dir), so it can remove what an interrupted build left (TFDS's
    `incomplete.*` folders) without touching a build in progress."""
    if builder.is_prepared():
        return None
    folder = Path(builder.data_path).parent  # <data_dir>/<name>/<config>
    data_dir = folder.parents[1]
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / f".build_data-{folder.parent.name}-{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if builder.is_prepared():  # another process built it meanwhile
            return None
        for stale in sorted(folder.glob("incomplete.*")):
            _log(f"removing {stale}: left by an interrupted build")
            shutil.rmtree(stale)
        builder.download_and_prepare()
    return time.perf_counter() - started


def _took(seconds: float | None) -> str:
    return "already built" if seconds is None else f"{seconds:.1f} s"


def _merged(previous: dict, built: dict) -> dict:
    """Report entries of a build: a corpus found already built keeps the build time a
    previous report measured (its "build_seconds" None otherwise)."""
    merged = dict(built)
    for name, entry in built.items():
        before = previous.get(name, {}).get("build_seconds")
        if entry["build_seconds"] is None and before is not None:
            merged[name] = {**entry, "build_seconds": before}
    return merged


def build(
    size: str,
    data_dir: str,
    corpora=DEFAULT_CORPORA,
    engine_set: str = "pip",
    variation: str = "plain",
) -> dict:
    """Builds `corpora` of one size, engine set (`speechkit.tts.ENGINE_SETS`) and
    variation (`speechkit.tts.VARIATIONS`) into data_dir; writes and returns the report
    (an existing report of the size keeps the entries of corpora not rebuilt, and the
    build times and synthesis speeds of corpora a rerun finds already built)."""
    unknown = set(corpora) - set(BUILDERS)
    if unknown:
        raise ValueError(f"corpora: unknown {sorted(unknown)}; expected some of {list(BUILDERS)}")
    for corpus in corpora:
        if size not in CORPUS_SIZES[corpus]:
            raise ValueError(
                f"size {size!r}: corpus {corpus!r} has sizes {sorted(CORPUS_SIZES[corpus])}"
            )
    report_name = tts.corpus_config_name(size, engine_set, variation)  # checks both
    for engine in tts.ENGINE_SETS[engine_set][0]:
        tts.require_engine(engine)  # before any work: the error says what to install
    path = os.path.join(data_dir, f"build_report-{report_name}.json")
    report, previous = {"size": size, "configs": {}}, {}
    if os.path.exists(path):
        with open(path) as file:
            previous = json.load(file)
        report["configs"].update(previous.get("configs", {}))
    built = False
    for corpus in corpora:
        entries = BUILDERS[corpus](size, data_dir, engine_set, variation)
        built |= any(entry["build_seconds"] is not None for entry in entries.values())
        report["configs"].update(_merged(previous.get("configs", {}), entries))
    # Measured when something was synthesised (the speeds of that build); a rerun that
    # found everything built keeps them.
    speed = previous.get("synthesis_speed")
    report["synthesis_speed"] = synthesis_speed() if built or not speed else speed
    _log(
        "synthesis seconds per second of speech: "
        + ", ".join(
            f"{e} {v['real_time_factor']:.3f}" for e, v in report["synthesis_speed"].items()
        )
    )
    files.write_json(path, report)
    _log(f"wrote {path}")
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: python -m experiments.build_data --size quick --data_dir /data/tfds "
        "(stj-build-data --size quick --data-dir /data/tfds). Exit status: 0 built; 2 bad "
        "arguments or a synthesiser that is not installed.",
    )
    parser.add_argument(
        "--size",
        choices=sorted(set(synthetic_calls.SIZES) | set(synthetic_kws.SIZES)),
        default="quick",
        help="corpus size (medium: synthetic_kws only, so with --corpora=kws)",
    )
    parser.add_argument(
        "--data_dir",
        default=os.path.expanduser("~/tensorflow_datasets"),
        help="TFDS data dir (default: TFDS's)",
    )
    parser.add_argument(
        "--corpora",
        default=",".join(DEFAULT_CORPORA),
        help=f"comma-separated, some of {','.join(BUILDERS)} (default: "
        f"{','.join(DEFAULT_CORPORA)}; recogniser only when named)",
    )
    parser.add_argument(
        "--engine_set",
        choices=sorted(tts.ENGINE_SETS),
        default="pip",
        help="synthesisers (speechkit.tts.ENGINE_SETS): pip (espeak-ng and Piper, the "
        "default), festival (adds Debian's Festival for training; make voices installs "
        "it) or all (all three train; no heldout split)",
    )
    parser.add_argument(
        "--variation",
        choices=tts.VARIATIONS,
        default="plain",
        help="how far the speech varies (speechkit.tts.VARIATIONS): plain (the default), "
        "speakers (the speaker stage: formants, pitch, tempo per speaker) or varied "
        "(speakers and varied call scripts and keyword places)",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bars (drawn on a terminal only)"
    )
    args = parser.parse_args(argv)
    progress.quiet(args.quiet)
    corpora = tuple(name for name in args.corpora.split(",") if name)
    compilation.enable_cache()
    build(args.size, os.path.expanduser(args.data_dir), corpora, args.engine_set, args.variation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
