r"""Rebuilds a model that ships with the toolkit, with its model card.

    python -m experiments.ship --config=experiments/configs/shipped.py:afkws-top20 \
        --workdir=/tmp/ship --config.data_dir=/tmp/ship/data
    python -m experiments.ship --config=experiments/configs/shipped.py:multiqt-questions \
        --workdir=/tmp/ship-mq --config.data_dir=/tmp/ship/data

Trains and scores the model with the experiment `config.runner` names, scores the bundle
on `config.smoke_check`, writes the card (`experiments.report.card`) and copies bundle
and card into `config.ship_to`; `config.leave_one_out` adds the leave-one-engine-out runs.

Specification: docs/experiments.md#shipping-a-model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import ml_collections

from cskws_jax import models as kws_models
from cskws_jax.datasets import synthetic_kws
from experiments import (
    common,
    cskws,
    leave_one_out,
    multiqt,
    multiqt_folds,
    multiqt_setup,
    ship_files,
)
from experiments.report import card as card_lib
from experiments.scoring import bundle_calls, bundle_keywords, bundles, corpora
from experiments.scoring.evaluators import tracking
from multiqt_jax import bundle as calls_bundle
from multiqt_jax import input_pipeline
from multiqt_jax import models as calls_models
from multiqt_jax.datasets import synthetic_calls
from speechkit import errors, files

log = common.logger("ship")
SHIPPED_FILES = ("bundle.json", "params.npz", card_lib.CARD_JSON, card_lib.CARD_MD)
MODELS_FOLDER = {"cskws": kws_models.FOLDER, "multiqt": calls_models.FOLDER}
RESAMPLES = 1000  # bootstrap resamples of a MultiQT card's intervals


def smoke_score(folder: str, corpus: str, data_dir: str) -> dict:
    """{"corpus", "split", "mAP", "AP@0.05"} of the AF-KWS bundle at `folder` on the test
    split of `corpus` (a synthetic_kws config, built in `data_dir` when missing), scored
    as `python -m experiments.evaluate` scores a bundle."""
    builder = synthetic_kws.SyntheticKws(
        config=corpus.split("/", 1)[1], data_dir=data_dir, file_format="array_record"
    )
    corpora.prepare(builder, None)
    with tempfile.TemporaryDirectory() as scratch:
        payload = bundle_keywords.evaluate_kws(
            folder, builder, corpora.split_source(builder, "test"), bundles.Settings(), scratch
        )
    scores = payload["scores"]
    return {"corpus": corpus, "split": "test", "mAP": scores["mAP"], "AP@0.05": scores["AP@0.05"]}


def calls_smoke_score(folder: str, corpus: str, data_dir: str, ctc_bundle: str = "") -> dict:
    """{"corpus", "split", "timestep_f1", "instance_f1"} (raw labels) of the MultiQT bundle
    at `folder` on every call of `corpus` (a synthetic_calls config, built in `data_dir`
    when missing), scored as `python -m experiments.evaluate` scores a bundle (the text
    it was trained on included: `ctc_bundle`'s, default the shipped recogniser's)."""
    builder = synthetic_calls.SyntheticCalls(
        config=corpus.split("/", 1)[1], data_dir=data_dir, file_format="array_record"
    )
    corpora.prepare(builder, None)
    split = corpora.CROSS_VALIDATED_SPLIT
    payload = bundle_calls.evaluate_calls(
        folder,
        builder,
        corpora.split_source(builder, split),
        bundles.Settings(data_dir=data_dir, ctc_bundle=ctc_bundle),
        corpus,
        split,
    )
    mean = payload["scores"]["mean"]
    return {
        "corpus": corpus,
        "split": split,
        "timestep_f1": mean["timestep"]["f1"],
        "instance_f1": mean["instance"]["f1"],
    }


def _prepared(builder, dataset: str, data_dir: str) -> dict:
    """Builds `builder`'s corpus (`dataset`) when missing: {"corpus": the seconds it took}
    or, when it was there, those `python -m experiments.build_data` recorded in a build
    report in `data_dir` ({"corpus", "corpus_from": the report's file name}), or
    {"corpus": None}."""
    started = time.perf_counter()
    if not builder.is_prepared():
        builder.download_and_prepare()
        return {"corpus": time.perf_counter() - started}
    for name in sorted(os.listdir(data_dir)):
        if name.startswith("build_report-") and name.endswith(".json"):
            report = files.read_json(os.path.join(data_dir, name)) or {}
            entry = report.get("configs", {}).get(dataset, {})
            if isinstance(entry, dict) and entry.get("build_seconds") is not None:
                return {"corpus": entry["build_seconds"], "corpus_from": name}
    return {"corpus": None}


def _command(config) -> str:
    """The command that rebuilds the model (the folders are the builder's own choice: the
    card names none of them)."""
    return (
        f"python -m experiments.ship --config=experiments/configs/shipped.py:{config.name} "
        "--workdir=WORKDIR --config.data_dir=DATA_DIR"
    )


def kws_model(config, workdir: str, started: float):
    """(payload, bundle folder, card) of a shipped AF-KWS model (`experiments.cskws`)."""
    data_dir = common.data_dir(config)
    corpus = synthetic_kws.SyntheticKws.builder_configs[config.dataset.split("/", 1)[1]]
    builder = synthetic_kws.SyntheticKws(
        config=corpus, data_dir=data_dir, file_format="array_record"
    )
    corpus_seconds = _prepared(builder, config.dataset, data_dir)
    payload = cskws.train_and_evaluate(config, workdir)
    folder = os.path.join(workdir, "afkws", "bundle")
    seconds = {**corpus_seconds, "run": time.perf_counter() - started}
    facts = card_lib.kws_facts(config, corpus, config.dataset, data_dir, seconds, _command(config))
    left_out = leave_one_out_rows(config, workdir) if config.get("leave_one_out") else None
    card = card_lib.kws_card("afkws", payload["models"]["afkws"], facts, left_out)
    card["smoke_check"] = smoke_score(folder, config.smoke_check, data_dir)
    return payload, folder, card


def leave_one_out_rows(config, workdir: str) -> list[dict]:
    """The card's leave-one-engine-out rows of the recipe `config` (`config.runner`'s),
    whose corpus every engine speaks: per engine, the same recipe trained on the other
    engines' records (in WORKDIR/leave-one-out/<engine>/, resumed by a rerun), its
    `experiments.leave_one_out` row and the seconds training and scoring took."""
    rows = []
    for heldout in leave_one_out.ENGINES:
        trained_on = [engine for engine in leave_one_out.ENGINES if engine != heldout]
        log(f"{config.name}: the recipe without {heldout}, trained on {', '.join(trained_on)}")
        folder = os.path.join(workdir, "leave-one-out", heldout)
        if config.runner == "cskws":
            payload = cskws.train_and_evaluate(leave_one_out.kws_cell(config, heldout), folder)
            row = leave_one_out.kws_row(payload)
            seconds = payload["models"]["afkws"]["seconds"]
        else:
            model = multiqt_setup.row_name(config.models, config)
            payload, seconds = _trained(leave_one_out.cell(config, heldout), folder, model)
            row = leave_one_out.calls_row(payload, model)
        rows.append(
            {"heldout_engine": heldout, "training_engines": trained_on, **row, "seconds": seconds}
        )
    return rows


def calls_model(config, workdir: str, started: float):
    """(payload, bundle folder, card) of a shipped MultiQT model (`experiments.multiqt`,
    one model of one fold)."""
    chosen = multiqt_folds.trained_folds(config)
    if len(chosen) != 1 or config.models not in multiqt_setup.NEURAL:
        raise errors.InvalidInput(
            f"a shipped MultiQT model is one MultiQT model ({', '.join(multiqt_setup.NEURAL)}) of "
            f"one fold: got config.models={config.models!r}, config.folds={config.folds!r}"
        )
    data_dir = common.data_dir(config)
    name = multiqt_setup.corpus_name(config)
    builder = synthetic_calls.SyntheticCalls(
        config=name, data_dir=data_dir, file_format="array_record"
    )
    dataset = f"synthetic_calls/{name}"
    corpus_seconds = _prepared(builder, dataset, data_dir)
    model = multiqt_setup.row_name(config.models, config)
    payload, training_seconds = _trained(config, workdir, model)
    folder = os.path.join(workdir, model, f"bundle-fold{chosen[0]}")
    scores = calls_scores(folder, builder, dataset, config, chosen[0])
    seconds = {**corpus_seconds, "run": time.perf_counter() - started}
    facts = card_lib.calls_facts(config, builder, dataset, seconds, _command(config))
    facts["training"]["seconds"] = training_seconds
    left_out = leave_one_out_rows(config, workdir) if config.get("leave_one_out") else None
    card = card_lib.calls_card(config.models, scores, facts, left_out)
    card["smoke_check"] = calls_smoke_score(folder, config.smoke_check, data_dir, config.ctc_bundle)
    runner = payload["models"][model]["folds"][0]["timestep"]["f1"]
    again = scores["test"]["raw"]["timestep"]["f1"]
    log(f"fold {chosen[0]}: TIMESTEP F1 {runner:.4f} in the run, {again:.4f} on the card")
    return payload, folder, card


def _trained(config, workdir: str, model: str) -> tuple[dict, float]:
    """(`experiments.multiqt`'s payload, the seconds training and scoring took): the
    seconds of the run that trained the model, kept in WORKDIR/<model>/ship_seconds.json
    (a rerun that finds its scores trains nothing; None where another command trained it)."""
    record = os.path.join(workdir, model, "ship_seconds.json")
    trained_before = os.path.exists(os.path.join(workdir, model, "scores.json"))
    started = time.perf_counter()
    payload = multiqt.train_and_evaluate(config, workdir)
    if not trained_before:
        files.write_json(record, {"training": time.perf_counter() - started})
    elif files.read_json(record) is None:
        files.write_json(record, {"training": None})
    return payload, files.read_json(record)["training"]


def calls_scores(folder: str, builder, dataset: str, config, fold: int) -> dict:
    """{"test": fold `fold`'s calls, "heldout": the held-out engine's (where the corpus has
    them)}, each {"calls", "hours", "raw", "smoothed"} ("test" also "training_calls": how
    many the fold's model trained on): the bundle's TIMESTEP and INSTANCE
    precision, recall and F1 with 95 % bootstrap intervals of the F1s over calls, its
    labels raw and smoothed by the bundle's own rule."""
    info = calls_bundle.load(folder)[2]
    settings = bundles.Settings(
        data_dir=common.data_dir(config),
        num_folds=config.num_folds,
        min_frames=info.decoding.smoothing.min_frames,
        ctc_bundle=config.ctc_bundle,
    )
    found = {}
    splits = {"test": corpora.CROSS_VALIDATED_SPLIT, "heldout": "heldout"}
    for name, split in splits.items():
        if split not in builder.info.splits:
            continue
        source = corpora.split_source(builder, split)
        index = input_pipeline.CorpusIndex.read(source)
        scored, (_, count), _ = bundle_calls.score_calls_bundle(
            fold, folder, source, index, dataset, split, settings, config.task, per_call=True
        )
        frames = (
            index.frames[index.folds % config.num_folds == fold] if name == "test" else index.frames
        )
        found[name] = {"calls": count, "hours": float(frames.sum()) / 100 / 3600}
        if name == "test":  # the calls the fold's model trained on
            fold_ids = index.folds % config.num_folds
            found[name]["training_calls"] = len(
                multiqt_folds.training_calls(fold_ids, fold, config)
            )
        for stream, scores in scored.items():
            each = scores.pop("per_call")
            intervals = tracking.bootstrap_intervals(each, resamples=RESAMPLES, seed=config.seed)
            found[name][stream] = {**scores, "intervals": intervals}
    return found


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    started = time.perf_counter()
    try:  # another config's model in this workdir would be read back as this one's
        common.check_variant(workdir, config)
    except ValueError as err:
        raise errors.InvalidInput(str(err)) from None
    if config.runner not in MODELS_FOLDER:
        raise errors.InvalidInput(
            f"config.runner: expected one of {sorted(MODELS_FOLDER)}, got {config.runner!r}"
        )
    build = kws_model if config.runner == "cskws" else calls_model
    payload, folder, card = build(config, workdir, started)
    card["name"] = config.name
    card_lib.write(folder, card_lib.kept_times(card, folder))
    target = config.ship_to or os.path.join(MODELS_FOLDER[config.runner], config.name)
    os.makedirs(target, exist_ok=True)
    for name in SHIPPED_FILES:
        with files.atomic_path(os.path.join(target, name)) as temporary:
            shutil.copyfile(os.path.join(folder, name), temporary)
    for path in ship_files.write_parts(target, config.runner):  # export/ and the sample
        log(f"{config.name}: wrote {path}")
    log(f"{config.name}: shipped in {target}; smoke check {card['smoke_check']}")
    return payload


if __name__ == "__main__":
    common.main(train_and_evaluate)
