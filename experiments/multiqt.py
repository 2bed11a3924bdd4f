r"""MultiQT K-fold cross-validation, folds trained in parallel (see experiments/folds.py).

    python -m experiments.multiqt --config=experiments/configs/multiqt.py:quick \
        --workdir=/tmp/multiqt [--config.task=symptoms --config.num_folds=5 ...]

For every model in `config.models` (MultiQT multimodal / audio / text, baselines rf /
fnn), trains one model per fold (`experiments.multiqt_folds`; `config.folds` picks some)
and scores it on its own fold and on every evaluation (`config.evals`), raw and smoothed
(`config.smoothing`): TIMESTEP and INSTANCE precision, recall and F1 at the 40 ms
output clock, and transfer ratios. Writes `WORKDIR/results.json` and prints the table;
keeps each model's curves, checkpoints (rerunning resumes), scores
(`WORKDIR/<model>/scores.json`: not recomputed while they answer the run) and bundles
(`WORKDIR/<model>/bundle-fold<k>`). Settings and corpora: `experiments.multiqt_setup`;
the summaries' fields: docs/experiments.md.
"""

from __future__ import annotations

import os
import time

import jax
import ml_collections

from experiments import common, folds
from experiments.multiqt_folds import (
    TRAINED_FOLDS,
    FoldScorer,
    FoldTrainer,
    chosen_folds_record,
    record_frame_counts,
    run_baseline,
    trained_folds,
    training_noise,
)
from experiments.multiqt_setup import (
    NEURAL,
    causal_text,
    evaluation_sources,
    load_corpus,
    own_corpus,
    row_name,
    smoothing_record,
    text_alterations,
    text_recogniser,
)
from experiments.scoring import calls, evals
from experiments.scoring import corpora as scoring_corpora
from experiments.scoring.evaluators import transcription
from multiqt_jax import labels
from multiqt_jax.datasets.features import recognised_words, spoken_words
from speechkit import files

BASELINES = ("rf", "fnn")

log = common.logger("multiqt")


def text_scores(source) -> dict | None:
    """CER, WER and emission lag (`experiments.scoring.evaluators.transcription`) of the words the
    text models read (the records' asr_* fields, those of `config.text_recogniser` where
    set) against the words said, over every call of `source`; None for calls without the
    words said (annotated corpora)."""
    heard, said = [], []
    for index in range(len(source)):
        record = source[index]
        if "spoken_word" not in record:
            return None
        heard.append(recognised_words(record))
        said.append(spoken_words(record))
    return transcription.evaluate(heard, said)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    os.makedirs(workdir, exist_ok=True)
    models = [name.strip() for name in config.models.split(",") if name.strip()]
    unknown = set(models) - set(NEURAL) - set(BASELINES)
    if unknown:
        raise ValueError(f"config.models: unknown {sorted(unknown)}")
    trained_folds(config)  # checks the fields before anything is built
    causal_text(config)
    text_alterations(config).check(causal_text(config), "config.text_lag_s")
    training_noise(config)
    text_recogniser(config)
    evaluations = evals.evaluations(config)
    smoothing = smoothing_record(config)
    source, index = load_corpus(config)
    others = evaluation_sources(config)
    fold_ids = index.folds % config.num_folds
    processes = jax.process_count()
    devices = jax.devices() if processes > 1 else jax.devices()[: config.num_devices or None]
    mesh = folds.fold_mesh(devices)
    log(
        f"{len(source)} calls"
        + "".join(f" (+{len(s)} {name})" for name, (s, _) in others.items())
        + f", {config.num_folds} folds"
        + (f" (training {config.folds})" if chosen_folds_record(config) else "")
        + f", {config.text_stream} text stream, "
        f"{len(devices)} device(s)" + (f" in {processes} processes" if processes > 1 else "")
    )
    scorer = FoldScorer(config, source, index, fold_ids, others)
    writer = jax.process_index() == 0
    record_counts = None  # read when a neural model first needs class weights
    results, seconds = {}, {}
    for name in models:
        key = row_name(name, config)
        path = os.path.join(workdir, key, "scores.json")
        saved = files.read_json(path)
        if reusable(saved, smoothing, others, chosen_folds_record(config)):
            results[key] = saved
            log(f"{key}: scores found, skipped")
            continue
        if saved is not None:
            log(
                f"{key}: saved scores lack these folds, this smoothing or an evaluation; "
                "recomputing"
            )
        started = time.perf_counter()
        if name in NEURAL:
            if record_counts is None:
                record_counts = record_frame_counts(source, len(labels.classes(config.task)))
            trainer = FoldTrainer(
                name, config, source, index, fold_ids, mesh, workdir, record_counts
            )
            predictors = trainer.finish(trainer.train())
            hop_s = calls.output_hop_s(trainer.net)
            mine = {
                fold: scorer.score(fold, predict, hop_s) for fold, predict in predictors.items()
            }
        else:
            mine = run_baseline(name, config, source, index, fold_ids, mesh, scorer)
        results[key] = scorer.summary(mine, smoothing)
        seconds[key] = time.perf_counter() - started
        if writer:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            files.write_json(path, results[key])
        raw, smoothed = results[key]["mean"], results[key][calls.SMOOTHED]["mean"]
        log(
            f"{key}: TIMESTEP F1 {raw['timestep']['f1']:.3f}, INSTANCE P "
            f"{raw['instance']['precision']:.3f} -> {smoothed['instance']['precision']:.3f} "
            f"smoothed (+{smoothing['latency_ms']:g} ms)"
            + "".join(_evaluation_text(results[key], other) for other in others)
            + f" ({seconds[key]:.0f} s)"
        )
    payload = {
        "task": config.task,
        "num_folds": config.num_folds,
        "text_stream": config.text_stream,
        "text_lag_s": config.text_lag_s,
        "text_words": config.text_words,
        "text_recogniser": config.text_recogniser,
        "text_scores": text_scores(source) if writer else None,  # of the train split's words
        "text_substitution_rate": config.text_substitution_rate,
        "train_fraction": config.train_fraction,
        "smoothing": smoothing,
        "models": results,
    }
    for evaluation in evaluations:
        if evaluation.name in others:
            payload[f"{evaluation.name}_engine"] = scoring_corpora.split_engine(
                evaluation, own_corpus(config), common.data_dir(config)
            )
            payload[f"{evaluation.name}_calls"] = len(others[evaluation.name][0])
    if writer:
        files.write_json(os.path.join(workdir, "results.json"), payload)
        print(calls.table(results, others))
    return payload


def reusable(saved: dict | None, smoothing: dict, evaluations, chosen=None) -> bool:
    """Whether saved scores answer this run: same smoothing, the same folds (`chosen`:
    `chosen_folds_record`), and the scores (with the same smoothing) and transfer ratios
    of every evaluation of `evaluations` (names)."""
    if saved is None or saved.get(calls.SMOOTHED, {}).get("smoothing") != smoothing:
        return False
    if saved.get(TRAINED_FOLDS) != chosen:
        return False
    return all(
        saved.get(name, {}).get(calls.SMOOTHED, {}).get("smoothing") == smoothing
        and evals.transfer_key(name) in saved
        for name in evaluations
    )


def _evaluation_text(summary: dict, name: str) -> str:
    f1 = summary[name]["mean"]["timestep"]["f1"]
    share = summary[evals.transfer_key(name)]["timestep_f1"]
    return f"; {name} TIMESTEP F1 {f1:.3f}, transfer " + (
        "n/a" if share is None else f"{share:.3f}"
    )


if __name__ == "__main__":
    common.main(train_and_evaluate, distributed=True)
