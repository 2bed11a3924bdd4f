r"""CS-KWS experiment: AF-KWS, AF-KWS without the unknown class, sliding-window baseline.

    python -m experiments.cskws --config=experiments/configs/cskws.py:quick --workdir=/tmp/cskws

`train_and_evaluate(config, workdir)` trains each model in `config.models`, scores it on
the test split and on every evaluation of `config.evals` (`experiments.scoring.keywords`),
chooses its operating points and writes `WORKDIR/results.json`, detections, curves,
checkpoints and, for the AF-KWS models, a bundle (`cskws_jax.bundle`); a rerun resumes.
`warm_start` starts the AF-KWS models from a trained bundle (`config.init`).

Specification (what it writes, evaluations, operating points, intervals):
docs/experiments.md#cs-kws-runner.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time

import jax
import ml_collections
import numpy as np

from cskws_jax import baselines, bundle, input_pipeline, losses, model, train
from cskws_jax.config import Measured
from cskws_jax.datasets import synthetic_kws
from cskws_jax.datasets.features import FEATURES
from experiments import common, corpora, training
from experiments.scoring import corpora as scoring_corpora
from experiments.scoring import evals
from experiments.scoring import keywords as scoring
from speechkit import batching, checks, errors, files, prepared
from speechkit.optim import OptimizerConfig, TrainState

MODELS = ("afkws", "afkws_no_unknown", "sliding_window")

log = common.logger("cskws")


def load_corpus(config):
    """({"train", "test"}: data sources, keywords) of `config.dataset` (built first when
    it is a synthetic_kws config with code and `config.build_missing`; a corpus of your
    own keywords, `synthetic_kws.own_keywords_config`, is read from its files); with
    `config.engines`, only the records those engines spoke."""
    data_dir = common.data_dir(config)
    name = config.dataset
    if config.build_missing:
        corpora.build_missing(name, synthetic_kws.SyntheticKws, data_dir)
    keywords = corpus_keywords(name, data_dir)
    sources = corpora.splits(name, data_dir, ("train", "test"))
    engines = config.get("engines") or ""
    return {
        split: evals.of_engines(source, engines, "config.engines")
        for split, source in sources.items()
    }, keywords


def corpus_keywords(name: str, data_dir: str) -> list[str]:
    return list(prepared.builder(name, data_dir=data_dir).info.metadata["keywords"])


def evaluation_sources(config, keywords) -> dict:
    """{evaluation name: data source} of `config.evals`
    (`experiments.scoring.corpora.evaluation_sources`). Another corpus must have the
    run's keywords, in order (`experiments.evaluate` maps differing ones)."""
    data_dir = common.data_dir(config)
    for evaluation in evals.evaluations(config):
        corpus = evaluation.corpus(config.dataset)
        if corpus != config.dataset and corpus_keywords(corpus, data_dir) != keywords:
            raise ValueError(
                f"config.evals.{evaluation.name}: {corpus}'s keywords are not the run's "
                f"(score a bundle on it with python -m experiments.evaluate instead)"
            )
    return scoring_corpora.evaluation_sources(config, config.dataset, log)


class Candidate:
    """One model of the comparison: how to start, step and detect."""

    def __init__(self, name: str, config, keywords):
        num_keywords = len(keywords)
        self.name, self.keywords, self.num_keywords = name, list(keywords), num_keywords
        self.unknown_class = name != "afkws_no_unknown"
        self.net = self.decoding = None  # an AF-KWS model's, for its bundle
        if name == "sliding_window":
            window = common.build(baselines.WindowConfig, config.window, "config.window")
            self.describe = lambda state: (
                f"sliding-window CNN ({window.window_s} s every {window.hop_s} s)"
            )
            self.init = lambda key, batch: baselines.create_train_state(window, num_keywords, key)
            self.step = jax.jit(
                lambda state, batch, rng: baselines.train_step(state, batch, window, num_keywords),
                donate_argnums=0,
            )
            self.detect = jax.jit(
                functools.partial(
                    baselines.detections,
                    config=window,
                    num_keywords=num_keywords,
                    max_detections=config.decode.max_detections,
                )
            )
            return
        net = model.AfKws(
            common.build(
                model.AfKwsConfig,
                config.model,
                "config.model",
                num_keywords=num_keywords,
                unknown_class=self.unknown_class,
            )
        )
        optimizer = common.build(
            OptimizerConfig, config.optimizer, "config.optimizer", total_steps=config.train.steps
        )
        augment = common.build(train.AugmentConfig, config.augment, "config.augment")
        loss = common.build(losses.LossConfig, config.loss, "config.loss")
        decoding = common.build(train.PeakDecodingConfig, config.decode, "config.decode")
        # jitted: one program instead of hundreds of op-by-op ones (the same parameters)
        if config.get("init"):
            warm = warm_start(config.init, net, keywords)
            fresh = jax.jit(lambda key, audio: net.init(key, {"audio": audio}))
            create = jax.jit(lambda params: TrainState.create(params, optimizer))
            self.init = lambda key, batch: create(warm(fresh(key, batch["audio"][:1])))
        else:
            init = jax.jit(
                lambda key, audio: TrainState.create(net.init(key, {"audio": audio}), optimizer)
            )
            self.init = lambda key, batch: init(key, batch["audio"][:1])
        self.step = jax.jit(
            lambda state, batch, rng: train.train_step(net, augment, state, batch, rng, loss),
            donate_argnums=0,
        )
        self.detect = jax.jit(lambda params, batch: train.detect(net, params, batch, decoding))
        self.describe = lambda state: model.describe(net.config, state.params)
        self.net, self.decoding = net, decoding


def load_init(path: str):
    """`cskws_jax.bundle.load` of `config.init`; its errors name the field."""
    try:
        return bundle.load(path)
    except errors.InvalidInput as err:
        raise errors.InvalidInput(f"config.init ({path}): {err}") from None


def warm_start(path: str, net: model.AfKws, keywords):
    """fresh parameters -> the parameters an AF-KWS model `net` of `keywords` starts from
    when `config.init` names a trained AF-KWS bundle (`cskws_jax.model.warm_start`: the
    bundle's layers, its class columns of the keywords both have). The bundle must have
    the corpus's front end and `net`'s architecture (every `config.model` field but
    num_keywords and unknown_class); a `speechkit.errors.InvalidInput` says what differs."""
    trained_net, trained, info = load_init(path)
    where = f"config.init ({path})"
    if info.features != FEATURES:
        raise errors.InvalidInput(
            f"{where}: the bundle's front end {info.features} is not the corpus's {FEATURES}"
        )
    bundled = dataclasses.replace(
        trained_net.config,
        num_keywords=net.config.num_keywords,
        unknown_class=net.config.unknown_class,
    )
    differ = [
        f"{field.name} (bundle {getattr(bundled, field.name)!r}, config "
        f"{getattr(net.config, field.name)!r})"
        for field in dataclasses.fields(bundled)
        if getattr(bundled, field.name) != getattr(net.config, field.name)
    ]
    if differ:
        raise errors.InvalidInput(
            f"{where}: the bundle's model differs from config.model in {'; '.join(differ)}; "
            "set those fields as the bundle has them (python -m experiments.own_keywords "
            "does)"
        )
    known = [keyword for keyword in keywords if keyword in info.labels]
    log(
        f"starting from {path}: its layers, and its class columns of {len(known)} of the "
        f"{len(keywords)} keywords" + (f" ({', '.join(known)})" if known else "")
    )
    return functools.partial(
        model.warm_start,
        trained,
        list(info.labels),
        labels=list(keywords),
        trained_unknown=trained_net.config.unknown_class,
        unknown=net.config.unknown_class,
    )


def training_utterances(config, size: int) -> np.ndarray:
    """int64 [n]: the training split's utterances the models train on: all `size` of
    them or, with `config.train.fraction` < 1, the first ceil(fraction x size) of an order
    drawn with config.seed, in corpus order (a smaller fraction's are a subset of a
    larger one's)."""
    fraction = checks.require_number(
        "config.train.fraction", config.train.fraction, above=0, at_most=1
    )
    return batching.nested_subset(np.arange(size), fraction, config.seed)


def training_batches(config, source, num_keywords: int, unknown_class: bool):
    """The Grain dataset of training crops a model learns from: `config.train.batch_size`
    crops of `config.train.crop_s` seconds of the training utterances
    (`training_utterances`), enough epochs for `config.train.steps`, seeded with
    `config.seed`; occurrences of other words as the unknown class when `unknown_class`."""
    utterances = training_utterances(config, len(source))
    pipeline = input_pipeline.PipelineConfig(
        batch_size=config.train.batch_size,
        crop_s=config.train.crop_s,
        num_epochs=config.train.steps * config.train.batch_size // len(utterances) + 2,
        unknown_class=unknown_class,
    )
    return input_pipeline.training_batches(
        source,
        pipeline,
        num_keywords=num_keywords,
        seed=config.seed,
        indices=None if len(utterances) == len(source) else utterances,
    )


def train_candidate(candidate: Candidate, config, source, workdir: str):
    """Trains `candidate` to `config.train.steps` (resuming from `workdir`'s checkpoints)
    and returns its train state."""
    dataset = training_batches(config, source, candidate.num_keywords, candidate.unknown_class)
    base_key = jax.random.key(config.seed + 1)

    def step(state, batches, index):
        state, stats = candidate.step(state, batches[0], jax.random.fold_in(base_key, index))
        return state, stats["loss"]  # left on the device until the loop logs

    return training.run_loop(
        name=candidate.name,
        workdir=workdir,
        loop=config.train,
        config=config,
        state=candidate.init(jax.random.key(config.seed), dataset[0]),
        iterators=[iter(dataset)],
        step=step,
        log=log,
        describe=candidate.describe,
        # float64 means of the float32 losses, as float(loss) every step gave
        fetch=functools.partial(training.fetch_losses, dtype=np.float64),
    )


def bootstrap_resamples(config) -> int:
    """`config.eval.bootstrap_resamples`, checked (an int >= 1)."""
    return checks.require_int(
        "config.eval.bootstrap_resamples", config.eval.get("bootstrap_resamples"), at_least=1
    )


def reusable(saved: dict, evaluations) -> bool:
    """Whether a model's saved scores.json answers this run: it must hold the operating
    points, the bootstrap intervals, and the scores of every evaluation of
    `evaluations` (names) with its transfer ratio (older runs' scores do not)."""
    has_points = "operating_points" in saved and "intervals" in saved
    return has_points and all(
        name in saved and evals.transfer_key(name) in saved for name in evaluations
    )


def score_model(candidate: Candidate, params, config, sources: dict, folder: str) -> tuple:
    """(results.json entry, operating points) of one trained model: its test scores with
    intervals, each evaluation of `sources` (all but "train" and "test") scored the same
    way in `folder/<name>/` with its transfer ratio, and the operating points."""
    num_keywords = candidate.num_keywords
    resamples = bootstrap_resamples(config)

    def scored(source, where: str) -> dict:
        scores = scoring.score_detector(
            lambda batch: candidate.detect(params, batch),
            source,
            num_keywords=num_keywords,
            batch_size=config.eval.batch_size,
            folder=where,
        )
        intervals = scoring.score_intervals(
            where, num_keywords, resamples=resamples, seed=config.seed
        )
        return {**scores, **intervals}

    entry = scored(sources["test"], folder)
    others = {name: s for name, s in sources.items() if name not in ("train", "test")}
    for name, source in others.items():
        full = scored(source, os.path.join(folder, name))
        entry[name] = {
            key: full[key]
            for key in (*scoring.OTHER_SPLIT_REPORTED, "intervals", "allowed_false_alarms")
        }
        entry[evals.transfer_key(name)] = common.transfer_ratio(full["mAP"], entry["mAP"])
    chosen = chosen_split(config, others)
    measured = {name: os.path.join(folder, name) for name in others if name != chosen}
    points, entry["operating_points"] = scoring.choose_operating_points(
        os.path.join(folder, chosen) if chosen else folder,
        candidate.keywords,
        config.eval.fa_budgets,
        _split_of(config, chosen),
        measured,
    )
    if chosen:  # its measures are under "test" in each budget's entry
        entry["operating_points"]["chosen_on"] = chosen
    measure_on = config.eval.get("measure_on") or ""
    if measure_on:
        split = _split_of(config, measure_on)
        points = with_measures(points, entry["operating_points"], measure_on, split)
    return entry, points


def with_measures(points, summary: dict, name: str, split: str) -> tuple:
    """`points` with what each measured on the evaluation `name` (of `summary`, the
    operating-point summary of `scoring.choose_operating_points`), labelled `split`."""
    measures = {entry["fa_per_hour"]: entry.get(name) for entry in summary["budgets"]}
    if any(measured is None for measured in measures.values()):
        raise errors.InvalidInput(
            f"config.eval.measure_on: {name!r} is not measured (the evaluations the points "
            "are measured on are those of config.evals other than choose_on)"
        )
    return tuple(
        dataclasses.replace(
            point,
            measured=Measured(
                fa_per_hour=measures[point.fa_per_hour]["fa_per_hour"],
                miss_rate=measures[point.fa_per_hour]["miss_rate"],
                split=split,
                hours=measures[point.fa_per_hour]["hours"],
            ),
        )
        for point in points
    )


def chosen_split(config, evaluations=None) -> str:
    """The evaluation the operating points are chosen on: `config.eval.choose_on`, an
    evaluation of `config.evals` (e.g. a development slice of the test split), or "" for
    the test split (the default). Its thresholds are measured on every other evaluation.
    `evaluations`: the names of those the run has (an optional one may be skipped), or
    None to check the config alone; a `speechkit.errors.InvalidInput` says what is wrong."""
    chosen = config.eval.get("choose_on") or ""
    if not chosen:
        return ""
    declared = {evaluation.name: evaluation for evaluation in evals.evaluations(config)}
    if chosen not in declared:
        raise errors.InvalidInput(
            f"config.eval.choose_on: {chosen!r} is none of config.evals ({sorted(declared)})"
        )
    if evaluations is not None and chosen not in evaluations:
        raise errors.InvalidInput(
            f"config.eval.choose_on: {chosen!r} was skipped: its corpus has no "
            f"{evals.base_split(declared[chosen].split)!r} split"
        )
    return chosen


def _split_of(config, evaluation: str) -> str:
    """ "corpus:split" of an evaluation of `config.evals` (the split or slice it names);
    the run's test split for ""."""
    if not evaluation:
        return f"{config.dataset}:test"
    declared = {e.name: e for e in evals.evaluations(config)}[evaluation]
    return f"{declared.corpus(config.dataset)}:{declared.split}"


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    os.makedirs(workdir, exist_ok=True)
    names = [name.strip() for name in config.models.split(",") if name.strip()]
    unknown = set(names) - set(MODELS)
    if unknown:
        raise ValueError(f"config.models: unknown {sorted(unknown)}; expected some of {MODELS}")
    bootstrap_resamples(config)  # checked before any training
    chosen_split(config)
    if config.get("init"):
        load_init(config.init)
    training_utterances(config, 1)
    evals.evaluations(config)
    sources, keywords = load_corpus(config)
    sources.update(evaluation_sources(config, keywords))
    others = [name for name in sources if name not in ("train", "test")]
    chosen_split(config, others)  # checked before any training
    log(
        f"{config.dataset}: {len(sources['train'])} training and {len(sources['test'])} test "
        "utterances"
        + "".join(f", {len(sources[name])} {name} utterances" for name in others)
        + f", {len(keywords)} keywords"
    )
    results = {}
    for name in names:
        folder = os.path.join(workdir, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "scores.json")
        if (saved := files.read_json(path)) is not None:
            if reusable(saved, others):
                results[name] = saved
                log(f"{name}: scores found, skipped")
                continue
            log(
                f"{name}: saved scores lack an evaluation, operating points or intervals, rescoring"
            )
        started = time.perf_counter()
        candidate = Candidate(name, config, keywords)
        state = train_candidate(candidate, config, sources["train"], folder)
        results[name], points = score_model(candidate, state.params, config, sources, folder)
        results[name]["seconds"] = time.perf_counter() - started  # training + scoring
        if candidate.net is not None:  # the sliding-window baseline is no AF-KWS model
            bundle.save(
                os.path.join(folder, "bundle"),
                candidate.net,
                state.params,
                keywords,
                dataclasses.replace(candidate.decoding, operating_points=points),
                corpus=config.dataset,
            )
        files.write_json(path, results[name])
        log(
            f"{name}: mAP {results[name]['mAP']:.3f}, RTF {results[name]['RTF']:.4f}"
            + "".join(
                f"; {other} mAP {results[name][other]['mAP']:.3f}, transfer "
                + _ratio_text(results[name][evals.transfer_key(other)])
                for other in others
            )
        )
    payload = {
        "dataset": config.dataset,
        "keywords": keywords,
        "train_fraction": config.train.fraction,
        "training_utterances": len(training_utterances(config, len(sources["train"]))),
        "models": results,
    }
    for evaluation in evals.evaluations(config):
        if evaluation.name in sources:
            payload[f"{evaluation.name}_engine"] = scoring_corpora.split_engine(
                evaluation, config.dataset, common.data_dir(config)
            )
    files.write_json(os.path.join(workdir, "results.json"), payload)
    print(scoring.table(results, others))
    return payload


def _ratio_text(ratio) -> str:
    return "n/a (test mAP 0)" if ratio is None else f"{ratio:.3f}"


if __name__ == "__main__":
    common.main(train_and_evaluate)
