"""Builds every embedded corpus of one size (TFDS ArrayRecord), with a build report.

    python -m experiments.build_data --size=quick --data_dir=~/tensorflow_datasets

Sizes: smoke (tests, seconds), quick (the main job's default), full. Calls are rendered
once per size and shared by the `questions` and `symptoms` configs. Prints progress and
writes `<data_dir>/build_report-<size>.json`: build seconds per config and per stage,
corpus hours, class counts, and the recogniser's word and character error rates.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import tensorflow_datasets as tfds

from multiqt_jax import labels
from multiqt_jax.datasets import synthetic_calls
from multiqt_jax.datasets.features import NUM_FOLDS
from speechkit import asr, lm


def _log(message: str) -> None:
    print(f"[build_data] {message}", file=sys.stderr, flush=True)


def corpus_report(source, class_names) -> dict:
    """Hours, class counts (10 ms frames and instances) and ASR error rates of a split."""
    frames = np.zeros(len(class_names), np.int64)
    instances = np.zeros(len(class_names), np.int64)
    per_fold = np.zeros((NUM_FOLDS, len(class_names)), np.int64)
    references, hypotheses, seconds = [], [], 0.0
    for index in range(len(source)):
        record = source[index]
        label = np.asarray(record["labels"])
        frames += np.bincount(label, minlength=len(class_names))
        starts = np.flatnonzero(np.diff(np.concatenate([[0], label])) != 0)
        for start in starts:
            if label[start] != 0:
                instances[label[start]] += 1
                per_fold[int(record["fold"]), label[start]] += 1
        seconds += float(record["duration"])
        transcript = record["transcript"]
        transcript = transcript.decode() if isinstance(transcript, bytes) else transcript
        references.append(asr.normalise(transcript))
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
        "word_error_rate": lm.error_rate(references, hypotheses),
        "character_error_rate": lm.error_rate(
            [" ".join(r) for r in references], [" ".join(h) for h in hypotheses]
        ),
    }


def build(size: str, data_dir: str) -> dict:
    report = {"size": size, "configs": {}}
    for task in labels.TASKS:
        name = f"{task}-{size}"
        _log(f"building synthetic_calls/{name} in {data_dir}")
        started = time.perf_counter()
        builder = synthetic_calls.SyntheticCalls(
            config=name, data_dir=data_dir, file_format="array_record"
        )
        builder.download_and_prepare()
        seconds = time.perf_counter() - started
        source = tfds.data_source(f"synthetic_calls/{name}", data_dir=data_dir)["train"]
        report["configs"][name] = {
            "build_seconds": seconds,
            **corpus_report(source, labels.classes(task)),
        }
        _log(
            f"synthetic_calls/{name}: {seconds:.1f} s, {report['configs'][name]['hours']:.3f} h, "
            f"WER {report['configs'][name]['word_error_rate']:.3f}"
        )
    path = os.path.join(data_dir, f"build_report-{size}.json")
    with open(path + ".tmp", "w") as out:
        json.dump(report, out, indent=2)
    os.replace(path + ".tmp", path)
    _log(f"wrote {path}")
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(synthetic_calls.SIZES), default="quick")
    parser.add_argument(
        "--data_dir",
        default=os.path.expanduser("~/tensorflow_datasets"),
        help="TFDS data dir (default: TFDS's)",
    )
    args = parser.parse_args(argv)
    build(args.size, os.path.expanduser(args.data_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
