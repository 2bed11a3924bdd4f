"""A trained bundle scored on a corpus, without training: what `python -m
experiments.evaluate` (stj-evaluate) runs, and ship, measure_points and the speed
benchmark call.

    settings = bundles.Settings(bundle=folder, dataset="folder_kws/shipped",
                                manual_dir="/data/my_keywords")
    payload = bundles.evaluate(settings, workdir)      # also WORKDIR/results.json

The task comes from the bundle's bundle.json: an AF-KWS bundle is scored by
`experiments.scoring.bundle_keywords`, a MultiQT bundle or folder of fold bundles by
`experiments.scoring.bundle_calls`; the corpus and split by `experiments.scoring.corpora`.
"""

from __future__ import annotations

import dataclasses
import os
import time

from cskws_jax import bundle as kws_bundle
from ctc_jax import bundle as ctc_bundle
from experiments import common
from experiments.scoring import bundle_calls, bundle_keywords, corpora, evals
from multiqt_jax import bundle as calls_bundle
from multiqt_jax.datasets.features import NUM_FOLDS
from speechkit import batching, files
from speechkit.bundle import MANIFEST, BundleError


def _option(default, help_text: str):
    return dataclasses.field(default=default, metadata={"help": help_text})


@dataclasses.dataclass(frozen=True)
class Settings:
    """What to score and how; the command line has a flag per field (and --workdir)."""

    bundle: str = _option("", "a bundle folder, or a folder of bundle-fold<k>")
    dataset: str = _option("", "TFDS name with config, e.g. folder_kws/shipped")
    split: str = _option("", "default: test (keyword corpus), train (call corpus)")
    data_dir: str = _option("", "TFDS data folder (default ~/tensorflow_datasets)")
    manual_dir: str = _option("", "build the corpus from this folder first")
    keywords: str = _option(
        "shared", f"keyword mismatch policy, one of {bundle_keywords.KEYWORD_POLICIES}"
    )
    batch_size: int = _option(16, "utterances or calls per evaluation batch")
    num_folds: int = _option(NUM_FOLDS, "folds of the bundles' cross-validation")
    min_frames: int = _option(3, "MultiQT: frames a class must hold when smoothed (1: off)")
    missing: str = _option("", "MultiQT: mark this modality missing in every call (audio, text)")
    engines: str = _option(
        "", "keyword corpus: only the utterances these engines spoke (comma-separated, e.g. piper)"
    )
    ctc_bundle: str = _option(
        "", "MultiQT: the CTC recogniser of a bundle trained on its text (default: the shipped)"
    )


def bundle_task(path: str) -> str:
    """The task of a bundle folder, or of the first fold bundle in a folder of them."""
    folders = bundle_calls.bundle_folders(path)
    manifest = os.path.join(folders[0][1], MANIFEST)
    try:
        payload = files.load_json(manifest)
    except files.JsonFileError as err:
        raise BundleError(str(err)) from None
    task = payload.get("task") if isinstance(payload, dict) else None
    if task not in (kws_bundle.TASK, calls_bundle.TASK):
        raise BundleError(f"{manifest}: task: {task!r} is not one this runner scores")
    return task


def evaluate(settings: Settings, workdir: str, batch_lengths: str = corpora.BATCH_LENGTHS) -> dict:
    """Scores `settings.bundle` on `settings.dataset`; writes WORKDIR/results.json and
    returns what it holds.

    batch_lengths: how the evaluation batches are padded along time
    (`speechkit.batching.LENGTHS`): "buckets" (the default) to a few fixed lengths
    (pad_multiple x 2^k frames, masked), so that one compiled program of the model serves
    every batch of a bucket; "exact" to each batch's own length, one program per length
    (as before the buckets; `benchmarks.evaluate_speed` compares the two)."""
    batching.check_lengths(batch_lengths)
    os.makedirs(workdir, exist_ok=True)
    task = bundle_task(settings.bundle)
    kws = task == kws_bundle.TASK
    bundle_calls.check_missing(settings.missing)
    if kws and settings.missing:
        raise corpora.EvaluationError(
            "--missing: only a MultiQT bundle reads more than one modality"
        )
    builder = corpora.corpus_builder(settings.dataset, common.data_dir(settings))
    corpora.check_corpus_kind(builder, kws, settings.dataset)
    corpora.prepare(builder, settings.manual_dir)
    split = settings.split or ("test" if kws else "train")
    source = corpora.split_source(builder, split, slices=kws)
    if settings.engines:
        if not kws:
            raise corpora.EvaluationError("--engines: a call corpus is scored whole (its folds)")
        try:
            source = evals.of_engines(source, settings.engines, "--engines")
        except ValueError as err:
            raise corpora.EvaluationError(str(err)) from None
    started = time.perf_counter()
    if kws:
        result = bundle_keywords.evaluate_kws(
            settings.bundle,
            builder,
            source,
            settings,
            workdir,
            f"{settings.dataset}:{split}",
            batch_lengths,
        )
    else:
        result = bundle_calls.evaluate_calls(
            settings.bundle, builder, source, settings, settings.dataset, split, batch_lengths
        )
        result["missing"] = settings.missing or None  # a modality marked missing in every call
        result["ctc_bundle"] = settings.ctc_bundle or ctc_bundle.SHIPPED  # what CTC-text reads
    payload = {
        "task": task,
        "bundle": os.path.abspath(settings.bundle),
        "dataset": settings.dataset,
        "split": split,
        **({"engines": settings.engines} if settings.engines else {}),
        **result,
        "seconds": time.perf_counter() - started,
    }
    files.write_json(os.path.join(workdir, "results.json"), payload)
    return payload
