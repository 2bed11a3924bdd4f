"""A MultiQT bundle, or a folder of fold bundles, scored on a call corpus
(`experiments.scoring.bundles`) by `experiments.scoring.calls`, raw and smoothed.

    payload = bundle_calls.evaluate_calls(folder, builder, source, settings, dataset, split)
    payload["scores"]["mean"]["timestep"]["f1"], payload["bundles"]

A fold bundle (`bundle-fold<k>`) scores only its own held-out fold of the split its
cross-validation drew folds from; a text model gets the text it was trained on
(`trained_text`), and `settings.missing` can mark one modality missing in every call.
"""

from __future__ import annotations

import os
import re
import tempfile

import numpy as np

from ctc_jax import bundle as ctc_bundle
from experiments import common
from experiments.scoring import calls, text_inputs
from experiments.scoring.corpora import BATCH_LENGTHS, CROSS_VALIDATED_SPLIT, EvaluationError
from multiqt_jax import decode, input_pipeline, labels
from multiqt_jax.datasets.features import FEATURES as CALL_FEATURES
from speechkit.bundle import MANIFEST, BundleError

FOLD_BUNDLE = re.compile(r"bundle-fold(\d+)$")

log = common.logger("evaluate")


def bundle_folders(path: str) -> list[tuple[int | None, str]]:
    """(fold or None, folder) of a bundle folder, or of every `bundle-fold<k>` folder in
    `path` (in fold order)."""
    path = os.path.abspath(path)
    if os.path.isfile(os.path.join(path, MANIFEST)):
        match = FOLD_BUNDLE.search(os.path.basename(path))
        return [(int(match.group(1)) if match else None, path)]
    if not os.path.isdir(path):
        raise BundleError(f"{path}: no such bundle folder")
    found = sorted(
        (int(match.group(1)), os.path.join(path, name))
        for name in os.listdir(path)
        if (match := FOLD_BUNDLE.fullmatch(name)) and os.path.isdir(os.path.join(path, name))
    )
    if not found:
        raise BundleError(f"{path}: neither a bundle ({MANIFEST}) nor a folder of bundle-fold<k>")
    return found


def calls_task(builder) -> str:
    """The labelling task of a call corpus (its config's task, or its name's first part)."""
    config = builder.builder_config
    task = getattr(config, "task", None) or config.name.split("-")[0]
    if task not in labels.TASKS:
        raise EvaluationError(f"{builder.name}/{config.name}: not a call corpus of a known task")
    return task


def score_calls_bundle(
    fold,
    path,
    source,
    index,
    dataset,
    split,
    settings,
    task,
    batch_lengths: str = BATCH_LENGTHS,
    **options,
):
    """({"raw", "smoothed"} scores, (which calls, how many), the smoothing record) of
    one MultiQT bundle (`fold` None: not a fold bundle). Only on the split its
    cross-validation drew folds from (its training corpus's "train") does a fold bundle
    see just its own held-out fold; any other split was never trained on. `options` go
    to `experiments.scoring.calls.score_calls` (e.g. per_call=True); the early question
    frames are counted on the bundle's output clock. `batch_lengths` as
    `experiments.scoring.bundles.evaluate`."""
    predict, net, info = calls.load_predictor(path)
    if tuple(info.labels) != labels.classes(task):
        raise EvaluationError(
            f"{path}: the bundle's classes {list(info.labels)} are not the {task} task's "
            f"{list(labels.classes(task))}"
        )
    if "audio" in net.config.modalities and info.features != CALL_FEATURES:
        raise EvaluationError(f"{path}: the bundle's front end is not the call corpora's")
    predict = with_missing(predict, net, settings.missing, path)
    if settings.missing != "text":  # marked missing, the text is never read
        source = trained_text(path, source, net, info, dataset, split, settings)
    chosen, which = np.arange(len(source)), "all"
    if fold is not None and info.corpus == dataset and split == CROSS_VALIDATED_SPLIT:
        chosen = np.flatnonzero(index.folds % settings.num_folds == fold)
        which = f"fold {fold} of {settings.num_folds} (its training corpus)"
    batching = calls.CallBatching(
        batch_size=settings.batch_size,
        causal_text=info.decoding.causal_text,
        lengths=batch_lengths,
    )
    smoothing = decode.SmoothingConfig(min_frames=settings.min_frames)
    scored = calls.score_calls(
        predict,
        source,
        chosen,
        index,
        batching,
        num_classes=len(info.labels),
        smoothers=calls.smoothers(smoothing),
        hop_s=calls.output_hop_s(net),
        **options,
    )
    record = calls.smoothing_record(smoothing, calls.output_hop_s(net))
    return scored, (which, len(chosen)), record


def check_missing(missing: str) -> tuple[str, str]:
    """The modalities a MultiQT model can miss, after checking `--missing` names one."""
    modalities = ("audio", "text")
    if missing and missing not in modalities:
        raise EvaluationError(f"--missing={missing!r}: expected '', 'audio' or 'text'")
    return modalities


def with_missing(predict, net, missing: str, path: str):
    """`predict` with the modality `missing` ("audio" or "text") marked missing in every
    call (`present`, as modality dropout trains a multimodal model to take it); "" leaves
    it as it is. An EvaluationError when the bundle's model does not read both."""
    if not missing:
        return predict
    modalities = check_missing(missing)
    if tuple(sorted(net.config.modalities)) != modalities:
        raise EvaluationError(
            f"--missing={missing}: {path} reads {list(net.config.modalities)}; only a "
            "multimodal model (audio and text) can miss one"
        )
    present = np.array([m != missing for m in modalities])

    def predict_missing(batch):
        return predict(batch, np.tile(present, (len(batch["audio"]), 1)))

    return predict_missing


def trained_text(path, source, net, info, dataset: str, split: str, settings):
    """`source` with the text a MultiQT bundle was trained on where the corpus can give it:
    for a text model trained on the CTC recogniser's words or posteriors (bundle.json
    `decoding.text_recogniser` "ctc" / "ctc_posteriors"), those of `settings.ctc_bundle`
    (default: the shipped recogniser) on the calls' stored features, cached beside the
    corpus (`experiments.scoring.text_inputs.ctc_text`); otherwise the corpus's own words
    (a log line says so for another recogniser's)."""
    trained = info.decoding.text_recogniser
    if "text" not in net.config.modalities or not trained:
        return source
    if trained not in text_inputs.CTC_TEXT:
        log(f"{path}: trained on recogniser {trained!r}'s words; scored on the corpus's own")
        return source
    recogniser = settings.ctc_bundle or ctc_bundle.SHIPPED
    log(f"{path}: text from the CTC recogniser {recogniser} ({trained})")
    posteriors = trained == text_inputs.CTC_POSTERIORS
    if not settings.manual_dir:
        data_dir = common.data_dir(settings)
        return text_inputs.ctc_text(source, dataset, split, data_dir, recogniser, posteriors)
    with tempfile.TemporaryDirectory() as scratch:  # a rebuilt folder: recognised afresh
        return text_inputs.ctc_text(source, dataset, split, scratch, recogniser, posteriors)


def evaluate_calls(
    path: str,
    builder,
    source,
    settings,
    dataset: str,
    split: str,
    batch_lengths: str = BATCH_LENGTHS,
) -> dict:
    """results.json's payload for MultiQT bundle(s) scored on a call corpus split
    (`batch_lengths` as `experiments.scoring.bundles.evaluate`)."""
    task = calls_task(builder)
    index = input_pipeline.CorpusIndex.read(source)
    per_fold, bundles = {stream: [] for stream in calls.LABEL_STREAMS}, []
    for fold, folder in bundle_folders(path):
        scored, (which, count), smoothing = score_calls_bundle(
            fold, folder, source, index, dataset, split, settings, task, batch_lengths
        )
        for stream in per_fold:
            per_fold[stream].append(scored[stream])
        bundles.append({"bundle": folder, "fold": fold, "calls": which, "scored_calls": count})
        f1 = scored["raw"]["timestep"]["f1"]
        log(f"{folder}: {count} calls ({which}), TIMESTEP F1 {f1:.3f}")
    return {
        "calls_task": task,
        "calls": len(source),
        "bundles": bundles,
        "scores": calls.summarise_label_streams(per_fold, smoothing),
    }
