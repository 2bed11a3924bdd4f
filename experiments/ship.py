r"""Rebuilds a model that ships with the toolkit, with its model card.

    python -m experiments.ship --config=experiments/configs/shipped.py:afkws-top20 \
        --workdir=/tmp/ship --config.data_dir=/tmp/ship/data

Trains and scores the model with `experiments.cskws` (its corpus is built when missing;
a rerun resumes), scores the bundle on the test split of `config.smoke_check` (built when
missing: the tests rebuild that corpus and score the shipped model on it again), writes
the card (`experiments.report.card`) beside the bundle, and copies bundle.json,
params.npz, card.json and card.md into `config.ship_to` (default
`cskws_jax/models/<config.name>`, where `cskws_jax.models.path` finds it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import ml_collections

from cskws_jax import models
from cskws_jax.datasets import synthetic_kws
from experiments import common, cskws, evaluate
from experiments.report import card as card_lib
from speechkit import errors, files

log = common.logger("ship")
SHIPPED_FILES = ("bundle.json", "params.npz", card_lib.CARD_JSON, card_lib.CARD_MD)


def smoke_score(folder: str, corpus: str, data_dir: str) -> dict:
    """{"corpus", "split", "mAP", "AP@0.05"} of the AF-KWS bundle at `folder` on the test
    split of `corpus` (a synthetic_kws config, built in `data_dir` when missing), scored
    as `python -m experiments.evaluate` scores a bundle."""
    builder = synthetic_kws.SyntheticKws(
        config=corpus.split("/", 1)[1], data_dir=data_dir, file_format="array_record"
    )
    evaluate.prepare(builder, None)
    with tempfile.TemporaryDirectory() as scratch:
        payload = evaluate.evaluate_kws(
            folder, builder, evaluate.split_source(builder, "test"), evaluate.Settings(), scratch
        )
    scores = payload["scores"]
    return {"corpus": corpus, "split": "test", "mAP": scores["mAP"], "AP@0.05": scores["AP@0.05"]}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    started = time.perf_counter()
    try:  # another config's model in this workdir would be read back as this one's
        common.check_variant(workdir, config)
    except ValueError as err:
        raise errors.InvalidInput(str(err)) from None
    data_dir = common.data_dir(config)
    corpus = synthetic_kws.SyntheticKws.builder_configs[config.dataset.split("/", 1)[1]]
    builder = synthetic_kws.SyntheticKws(
        config=corpus, data_dir=data_dir, file_format="array_record"
    )
    built_here = not builder.is_prepared()  # else its time is not this run's to report
    builder.download_and_prepare()
    corpus_seconds = time.perf_counter() - started if built_here else None
    payload = cskws.train_and_evaluate(config, workdir)
    folder = os.path.join(workdir, "afkws", "bundle")
    seconds = {"corpus": corpus_seconds, "run": time.perf_counter() - started}
    command = (  # the folders are the builder's own choice: the card names none of them
        f"python -m experiments.ship --config=experiments/configs/shipped.py:{config.name} "
        "--workdir=WORKDIR --config.data_dir=DATA_DIR"
    )
    facts = card_lib.kws_facts(config, corpus, config.dataset, data_dir, seconds, command)
    card = card_lib.kws_card("afkws", payload["models"]["afkws"], facts)
    card["name"] = config.name
    card["smoke_check"] = smoke_score(folder, config.smoke_check, data_dir)
    card_lib.write(folder, card_lib.kept_times(card, folder))
    target = config.ship_to or os.path.join(models.FOLDER, config.name)
    os.makedirs(target, exist_ok=True)
    for name in SHIPPED_FILES:
        with files.atomic_path(os.path.join(target, name)) as temporary:
            shutil.copyfile(os.path.join(folder, name), temporary)
    log(f"{config.name}: shipped in {target}; smoke check {card['smoke_check']}")
    return payload


if __name__ == "__main__":
    common.main(train_and_evaluate)
