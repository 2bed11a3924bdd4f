r"""MultiQT K-fold cross-validation, folds trained in parallel (see experiments/folds.py).

    python -m experiments.multiqt --config=experiments/configs/multiqt.py:quick \
        --workdir=/tmp/multiqt [--config.task=symptoms --config.num_folds=5 ...]

For every model in `config.models` (MultiQT multimodal / audio / text, baselines rf /
fnn), trains one model per fold on the other folds' calls and scores it on its own
fold with TIMESTEP and INSTANCE precision, recall and F1 at the model's 40 ms output
clock. Writes `WORKDIR/results.json` (per model: per-fold scores, mean and std over
folds), prints the table, and keeps `WORKDIR/<model>/curves.jsonl` and checkpoints
(`WORKDIR/<model>/checkpoints`; rerunning the same command resumes; a finished model's
scores are kept in `WORKDIR/<model>/scores.json` and not recomputed), and each neural
model's fold k as a bundle, `WORKDIR/<model>/bundle-fold<k>` (`multiqt_jax.bundle`).

Every model is scored twice from one pass over its test fold: on its raw labels (the
argmax per 40 ms frame) and after `multiqt_jax.decode.smooth` with `config.smoothing`
(a causal minimum-duration rule that delays every switch by `latency_frames`). A model's
summary holds the raw scores and, under "smoothed", the smoothed ones with the rule and
its latency ("smoothing": fields, latency_frames, latency_ms); the table prints both.

When the corpus has a `heldout` split (calls from scripts of their own, spoken only by a
synthesiser never heard in training; their fold field means nothing), every fold's model
is also scored on all of those calls, raw and smoothed: a model's summary gains
"heldout" (the same summary over folds, with "smoothed") and "transfer" (held-out mean /
in-engine mean of TIMESTEP and INSTANCE F1; None where the in-engine mean is 0), and
results.json the corpus's "heldout_engine". The table prints a "heldout engine" row
under each model. Saved scores without "heldout" while the corpus has it are recomputed.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import tensorflow_datasets as tfds
from absl import app, flags
from jax.experimental import multihost_utils
from ml_collections import config_flags

from experiments import common, folds, training
from experiments.evaluators import tracking
from multiqt_jax import baselines, bundle, decode, input_pipeline, labels, model, train
from multiqt_jax.datasets import render, synthetic_calls
from multiqt_jax.datasets.features import RecognisedBy, recognised_words
from speechkit import augment, batching, checks, files, tts
from speechkit.optim import OptimizerConfig, TrainState

NEURAL = {"multimodal": ("audio", "text"), "audio": ("audio",), "text": ("text",)}
BASELINES = ("rf", "fnn")
SCORES = tracking.SCORES
SMOOTHED = "smoothed"  # the decoding scored next to the raw labels
DECODINGS = ("raw", SMOOTHED)
HELDOUT = "heldout"  # the corpus split spoken by the held-out engine
TRANSFER = {"timestep_f1": ("timestep", "f1"), "instance_f1": ("instance", "f1")}


def decoding_names(heldout: bool) -> tuple[str, ...]:
    """The decodings every fold is scored under: DECODINGS on its test fold, and with a
    heldout split the same again on the held-out engine's calls ("heldout-raw", ...)."""
    return DECODINGS + (tuple(f"{HELDOUT}-{d}" for d in DECODINGS) if heldout else ())


log = common.logger("multiqt")


def load_corpus(config):
    """(source, index, heldout_source, heldout_index): the calls of the train split and
    their `input_pipeline.CorpusIndex`, then the same of the heldout split (None, None
    when the corpus has none)."""
    data_dir = common.data_dir(config)
    name = corpus_name(config)
    if config.build_missing and jax.process_index() == 0:
        builder = synthetic_calls.SyntheticCalls(
            config=name, data_dir=data_dir, file_format="array_record"
        )
        builder.download_and_prepare()
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices("corpus ready")
    sources = dict(tfds.data_source(f"synthetic_calls/{name}", data_dir=data_dir))
    if text_recognizer(config):
        # The other recogniser's words, for the train split only: its heldout calls would
        # need the held-out synthesiser again (slow); no held-out scores then.
        builder = synthetic_calls.SyntheticCalls(config=name, data_dir=data_dir)
        words = None  # process 0 recognises; the others read its cache
        if jax.process_index() == 0:
            words = builder.variant_words(config.text_recognizer, "train")
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices("recogniser variant")
        if words is None:
            words = builder.variant_words(config.text_recognizer, "train")
        sources = {"train": RecognisedBy(sources["train"], words)}
    source = sources["train"]
    heldout = sources.get(HELDOUT)
    return (
        source,
        input_pipeline.CorpusIndex.read(source),
        heldout,
        None if heldout is None else input_pipeline.CorpusIndex.read(heldout),
    )


def corpus_name(config) -> str:
    """The synthetic_calls config: `<task>-<size>`, `-<engine set>` unless "pip"."""
    return tts.corpus_config_name(f"{config.task}-{config.size}", config.engine_set)


def heldout_engine(config) -> str | None:
    """The synthesiser of the corpus's heldout calls, from its builder config."""
    built = synthetic_calls.SyntheticCalls.builder_configs[corpus_name(config)]
    return built.render_config.heldout_engine


def model_config(config, name: str, num_classes: int) -> model.MultiQTConfig:
    """config.model, field for field, for model `name` (its modalities; modality dropout
    only for the multimodal model)."""
    return common.build(
        model.MultiQTConfig,
        config.model,
        "config.model",
        num_classes=num_classes,
        modalities=NEURAL[name],
        modality_dropout=config.model.modality_dropout if name == "multimodal" else 0.0,
    )


def _pad_time(batch: dict, frames: int) -> dict:
    """Pads a pipeline batch's time axes to `frames` 10 ms steps (frames // 2 for text)."""
    out = {}
    for key, value in batch.items():
        if key in ("audio", "labels", "audio_mask"):
            width = frames
        elif key in ("text", "text_mask"):
            width = frames // 2
        else:
            out[key] = value
            continue
        pad = [(0, 0), (0, width - value.shape[1])] + [(0, 0)] * (value.ndim - 2)
        out[key] = np.pad(value, pad)
    return out


def record_frame_counts(source, num_classes: int) -> np.ndarray:
    """int64 [records, num_classes]: 10 ms frames of each class in every record (read
    once per run; a fold's class weights sum its training records' rows)."""
    return np.stack(
        [
            np.bincount(np.asarray(source[i]["labels"]), minlength=num_classes)
            for i in range(len(source))
        ]
    ).astype(np.int64)


def training_calls(fold_ids: np.ndarray, fold: int, config) -> np.ndarray:
    """int64 [n]: the calls fold `fold`'s model trains on, the other folds' calls or, with
    `config.train_fraction` < 1, the first ceil(fraction x n) of them in an order drawn
    with (config.seed, fold), in corpus order (so a smaller fraction's calls are a subset
    of a larger one's)."""
    fraction = checks.require_number(
        "config.train_fraction", config.train_fraction, above=0, at_most=1
    )
    return batching.nested_subset(np.flatnonzero(fold_ids != fold), fraction, [config.seed, fold])


def epochs_for(steps: int, batch_size: int, train_sets) -> int:
    """The epochs that give every fold `steps` full batches (the rest of each epoch's
    calls is dropped) of its calls, `train_sets` [fold] -> int64 [n]."""
    fewest = min(range(len(train_sets)), key=lambda f: len(train_sets[f]))
    per_epoch = len(train_sets[fewest]) // batch_size
    if per_epoch == 0:
        raise ValueError(
            f"config.train.batch_size={batch_size}: fold {fewest} trains on only "
            f"{len(train_sets[fewest])} call(s) (config.train_fraction may have cut them)"
        )
    return -(-steps // per_epoch)


def training_noise(config) -> tuple[float, float] | None:
    """`config.train.noise_snr_db`: (low, high) dB of feature-domain noise mixed into every
    training call's audio (`speechkit.augment.mix_noise`, SNR uniform per call), or
    None for () (off)."""
    value = tuple(config.train.noise_snr_db)
    if not value:
        return None
    return checks.require_interval("config.train.noise_snr_db", value)


def noisy_audio(batch: dict, rng, snr_db) -> dict:
    """`batch` with feature-domain noise in its audio: snr_db a number (dB) or a (low,
    high) interval drawn uniformly per call; padding frames stay 0."""
    audio, mask = batch["audio"], batch["audio_mask"]
    if isinstance(snr_db, tuple):
        snr_key, rng = jax.random.split(rng)
        snr_db = jax.random.uniform(
            snr_key, (audio.shape[0], 1, 1), minval=snr_db[0], maxval=snr_db[1]
        )
    noisy = augment.mix_noise(jnp.asarray(audio), mask, rng, snr_db)
    return {**batch, "audio": jnp.where(mask[..., None], noisy, 0.0)}


TEXT_STREAMS = ("causal", "offline")


def causal_text(config) -> bool:
    """config.text_stream: "causal" (each recognised word from its emission time on, as
    a live recogniser shows it) or "offline" (at its recognised times: a non-causal
    reference that a streaming system cannot have)."""
    if config.text_stream not in TEXT_STREAMS:
        raise ValueError(
            f"config.text_stream: expected one of {TEXT_STREAMS}, got {config.text_stream!r}"
        )
    return config.text_stream == "causal"


def text_options(config) -> input_pipeline.TextOptions:
    """The studies' alterations of the text input, from config.text_words ("recognised"
    or "spoken": the oracle transcript), config.text_lag_s and
    config.text_substitution_rate (`input_pipeline.TextOptions`)."""
    try:
        return input_pipeline.TextOptions(
            words=config.text_words,
            lag_s=config.text_lag_s,
            substitution_rate=config.text_substitution_rate,
        )
    except ValueError as error:
        raise ValueError(f"config: {error}") from None


def text_recognizer(config) -> str:
    """config.text_recognizer: "" (the corpus's recogniser) or a name of
    `render.RECOGNIZER_VARIANTS`, whose words then replace the recognised ones."""
    name = config.text_recognizer
    if name and name not in render.RECOGNIZER_VARIANTS:
        raise ValueError(
            f"config.text_recognizer: expected '' or one of "
            f"{tuple(render.RECOGNIZER_VARIANTS)}, got {name!r}"
        )
    if name and config.text_words != "recognised":
        raise ValueError(
            f"config.text_recognizer: {name!r} needs text_words='recognised', "
            f"got {config.text_words!r}"
        )
    return name


def row_name(name: str, config) -> str:
    """A model's key in results.json and its folder: `name`, or `name@offline` when it
    reads the offline text stream (so the two never share checkpoints or scores)."""
    return name if causal_text(config) else f"{name}@offline"


def smoothing_config(config) -> decode.SmoothingConfig:
    """config.smoothing, field for field; the runner scores argmax labels, so without the
    probability thresholds (they need logits)."""
    settings = common.build(decode.SmoothingConfig, config.smoothing, "config.smoothing")
    if settings.hysteresis:
        raise ValueError("config.smoothing.enter: the runner smooths labels, not logits")
    return settings


def smoothing_record(config) -> dict:
    """The smoothing rule and its declared latency, as results.json reports them."""
    settings = smoothing_config(config)
    num_classes = len(labels.classes(config.task))
    hop_s = model.streaming_spec(model_config(config, "multimodal", num_classes)).output_hop_s
    return {
        **dataclasses.asdict(settings),
        "latency_frames": settings.latency_frames,
        "latency_ms": round(settings.latency_frames * hop_s * 1000, 3),
    }


def decoders(config) -> dict:
    """{SMOOTHED: smooth(pred int32 [B, T], mask bool [B, T]) -> int32 [B, T]}, jitted."""
    return {SMOOTHED: jax.jit(functools.partial(decode.smooth, config=smoothing_config(config)))}


def score_fold(predict, test_batches, heldout, config, smoothing, num_classes: int) -> dict:
    """One fold's model scored on its test batches ("raw", "smoothed") and, with
    `heldout` = (source, index), on every heldout call ("heldout-raw", ...)."""
    scored = tracking.evaluate_decoded(
        predict, test_batches, num_classes=num_classes, decoders=smoothing
    )
    if heldout is not None:
        source, index = heldout
        batches = eval_batches(source, np.arange(len(source)), config, index)
        on_heldout = tracking.evaluate_decoded(
            predict, batches, num_classes=num_classes, decoders=smoothing
        )
        scored.update({f"{HELDOUT}-{name}": scores for name, scores in on_heldout.items()})
    return scored


def eval_batches(source, indices, config, index):
    """Evaluation batches of the calls `indices` of `source` (`index`: its
    `multiqt_jax.input_pipeline.CorpusIndex`), in that order and unshuffled:
    `config.train.batch_size` calls per batch, padded to `config.train.pad_multiple`
    frames, text streamed as `causal_text(config)` says."""
    pipeline = input_pipeline.PipelineConfig(
        batch_size=config.train.batch_size,
        shuffle=False,
        bucket_window=1,
        pad_multiple=config.train.pad_multiple,
        causal_text=causal_text(config),
        text=text_options(config),
    )
    return input_pipeline.batches(source, pipeline, indices=indices, index=index)


class FoldTrainer:
    """Trains one MultiQT variant on every fold at once, with checkpoints. Each process
    builds the data of its own fold slots only (see experiments/folds.py). `heldout`:
    (source, index) of the held-out engine's calls, every fold's model is scored on all
    of them too (None: no such split)."""

    def __init__(
        self, name, config, source, index, fold_ids, mesh, workdir, record_counts, heldout=None
    ):
        self.name, self.config, self.source, self.index = name, config, source, index
        self.heldout = heldout
        self.fold_ids, self.mesh = fold_ids, mesh
        self.num_folds = config.num_folds
        self.slots = folds.fold_slots(self.num_folds, mesh)
        self.mine = folds.local_slots(mesh, self.slots)  # slot s trains fold s % num_folds
        self.classes = labels.classes(config.task)
        self.net = model.MultiQT(model_config(config, name, len(self.classes)))
        self.workdir = os.path.join(workdir, row_name(name, config))
        os.makedirs(self.workdir, exist_ok=True)
        steps, batch_size = config.train.steps, config.train.batch_size
        self.train_sets = [training_calls(fold_ids, f, config) for f in range(self.num_folds)]
        pipeline = input_pipeline.PipelineConfig(
            batch_size=batch_size,
            num_epochs=epochs_for(steps, batch_size, self.train_sets),
            pad_multiple=config.train.pad_multiple,
            drop_remainder=True,
            causal_text=causal_text(config),
            text=text_options(config),
        )
        self.datasets = [
            input_pipeline.batches(
                source,
                pipeline,
                seed=config.seed * 1000 + self._fold(slot),
                indices=self.train_sets[self._fold(slot)],
                index=index,
            )
            for slot in self.mine
        ]
        self.optimizer = common.build(
            OptimizerConfig, config.optimizer, "config.optimizer", total_steps=steps
        )
        power = config.train.class_weight_power
        self.weights = folds.stack(
            [
                np.asarray(
                    train.class_weights_from_counts(
                        record_counts[self.train_sets[self._fold(slot)]].sum(axis=0),
                        power,
                    )
                    if power
                    else np.ones(len(self.classes)),
                    np.float32,
                )
                for slot in self.mine
            ]
        )

    def _fold(self, slot: int) -> int:
        return slot % self.num_folds

    def _init(self):
        """Global stacked train states; fold f's parameters come from key f."""
        inputs = train.model_inputs(self.datasets[0][0], rows=1)

        def one(key):
            return TrainState.create(self.net.init(key, inputs), self.optimizer)

        keys = jax.random.split(jax.random.key(self.config.seed), self.num_folds)
        local = jax.jit(jax.vmap(one))(keys[np.array([self._fold(s) for s in self.mine])])
        return folds.to_global(jax.tree_util.tree_map(np.asarray, local), self.mesh)

    def _step_fn(self):
        masks = common.build(augment.MaskConfig, self.config.augment, "config.augment")
        noise = training_noise(self.config)

        def one_fold(state, batch, rng, weights):
            key = jax.random.wrap_key_data(rng)
            if noise is not None:
                batch = noisy_audio(batch, jax.random.fold_in(key, 2), noise)
            return train.train_step(self.net, state, batch, key, weights, masks)

        loop = folds.default_loop() if self.config.fold_loop == "auto" else self.config.fold_loop
        return folds.fold_parallel(one_fold, self.mesh, loop=loop)

    def _rngs(self, step: int):
        base = jax.random.fold_in(jax.random.key(self.config.seed + 1), step)
        keys = [jax.random.key_data(jax.random.fold_in(base, self._fold(s))) for s in self.mine]
        return folds.to_global(np.stack([np.asarray(k) for k in keys]), self.mesh)

    def _batch(self, local: list[dict]):
        """This process's slots' batches, padded to one length across processes."""
        frames = max(b["audio"].shape[1] for b in local)
        if jax.process_count() > 1:
            frames = int(np.max(multihost_utils.process_allgather(np.array([frames]))))
        return folds.to_global(folds.stack([_pad_time(b, frames) for b in local]), self.mesh)

    def train(self):
        weights = folds.to_global(self.weights, self.mesh)
        step_fn = self._step_fn()

        def step(states, batches, index):
            states, stats = step_fn(states, self._batch(batches), self._rngs(index), weights)
            return states, folds.gather(stats["loss"])[: self.num_folds]

        def describe(states):
            first = jax.tree_util.tree_map(lambda x: x[0], folds.to_local(states.params, self.mesh))
            return model.describe(self.net.config, first)

        return training.run_loop(
            name=self.name,
            workdir=self.workdir,
            loop=self.config.train,
            config=self.config,
            state=self._init(),
            iterators=[iter(d) for d in self.datasets],
            step=step,
            log=log,
            describe=describe,
            writer=jax.process_index() == 0,
        )

    def evaluate(self, states) -> dict[str, list[dict]]:
        """Every fold's scores per decoding, {"raw": [...], "smoothed": [...]} and with a
        heldout split "heldout-raw", "heldout-smoothed" (each process scores its own
        folds; then all gathered)."""
        predict = jax.jit(functools.partial(train.predict, self.net))
        smoothing = decoders(self.config)
        local_params = folds.to_local(states.params, self.mesh)
        mine = {}
        for position, slot in enumerate(self.mine):
            if slot >= self.num_folds:
                continue  # a padding slot
            params = jax.tree_util.tree_map(lambda x, p=position: x[p], local_params)
            test_set = np.flatnonzero(self.fold_ids == slot)
            mine[slot] = score_fold(
                lambda batch, params=params: predict(params, batch),
                eval_batches(self.source, test_set, self.config, self.index),
                self.heldout,
                self.config,
                smoothing,
                len(self.classes),
            )
            if slot == 0:
                self._save_timeline(params, test_set[0])
            self._save_bundle(params, slot)
        names = decoding_names(self.heldout is not None)
        return gather_decodings(mine, names, self.num_folds, len(self.classes))

    def _save_bundle(self, params, fold: int) -> None:
        """Fold `fold`'s trained model as a bundle (`multiqt_jax.bundle`)."""
        bundle.save(
            os.path.join(self.workdir, f"bundle-fold{fold}"),
            self.net,
            params,
            self.classes,
            bundle.DecodeConfig(causal_text=causal_text(self.config)),
            corpus=f"synthetic_calls/{corpus_name(self.config)}",
        )

    def _save_timeline(self, params, record_index: int) -> None:
        """Gold and predicted labels of one held-out call, with its recognised words."""
        record = self.source[int(record_index)]
        pipeline = input_pipeline.PipelineConfig(
            batch_size=1,
            pad_multiple=2,
            causal_text=causal_text(self.config),
            text=text_options(self.config),
        )
        example = input_pipeline.to_example(record, pipeline.causal_text, pipeline.text)
        batch = input_pipeline.collate([example], pipeline)
        pred, gold, mask = train.predict(self.net, params, batch)
        length = int(np.asarray(mask[0]).sum())
        files.write_json(
            os.path.join(self.workdir, "timeline.json"),
            {
                "hop_s": model.streaming_spec(self.net.config).output_hop_s,
                "classes": list(self.classes),
                "gold": np.asarray(gold[0, :length]).tolist(),
                "predicted": np.asarray(pred[0, :length]).tolist(),
                "words": [[w.word, w.start, w.end] for w in recognised_words(record)],
            },
        )


def _encode(scores: dict) -> list[float]:
    values = [scores[s][p] for s in SCORES for p in tracking.PARTS]
    return values + [np.nan if v is None else v for v in scores["timestep_f1_per_class"]]


def _decode(values: np.ndarray) -> dict:
    parts = tracking.PARTS
    scores = {
        s: {p: float(values[3 * i + j]) for j, p in enumerate(parts)} for i, s in enumerate(SCORES)
    }
    scores["timestep_f1_per_class"] = [None if np.isnan(v) else float(v) for v in values[6:]]
    return scores


def gather_fold_scores(mine: dict[int, dict], num_folds: int, num_classes: int) -> list[dict]:
    """This process's {fold: scores} -> every fold's scores, in fold order, on every
    process (one all-gather of a [folds, values] array, NaN where not owned)."""
    table = np.full((num_folds, 6 + num_classes), np.nan)
    owned = np.zeros(num_folds, bool)
    for fold, scores in mine.items():
        table[fold], owned[fold] = _encode(scores), True
    if jax.process_count() > 1:
        tables = multihost_utils.process_allgather(table)
        owners = multihost_utils.process_allgather(owned)
        table = np.stack([tables[np.argmax(owners[:, f]), f] for f in range(num_folds)])
    return [_decode(row) for row in table]


def gather_decodings(
    mine: dict[int, dict], names, num_folds: int, num_classes: int
) -> dict[str, list[dict]]:
    """This process's {fold: {decoding: scores}} -> {decoding: every fold's scores} for
    each decoding of `names` (given, not read from `mine`: a process that owns no fold
    still joins every all-gather, in the same order)."""
    return {
        decoding: gather_fold_scores(
            {fold: scored[decoding] for fold, scored in mine.items()}, num_folds, num_classes
        )
        for decoding in names
    }


def owned_folds(mesh, num_folds: int) -> list[int]:
    """The real folds whose slots live on this process."""
    slots = folds.fold_slots(num_folds, mesh)
    return [s for s in folds.local_slots(mesh, slots) if s < num_folds]


def run_baseline(
    name, config, source, index, fold_ids, mesh, heldout=None
) -> dict[str, list[dict]]:
    """Baseline `name` trained and scored per fold (each process its own folds), and
    with `heldout` = (source, index) scored on every heldout call too; as
    `FoldTrainer.evaluate`."""
    classes = labels.classes(config.task)
    stride = model.MultiQTConfig(num_classes=len(classes)).audio_stride
    settings = common.build(
        baselines.BaselineConfig, config.baselines, "config.baselines", seed=config.seed
    )

    def predict(classifier, batch):
        """Sliding-window labels on the model's 40 ms clock, as `train.predict`."""
        predicted = baselines.sliding_labels_batch(classifier, batch, settings)
        frames = -(-batch["audio"].shape[1] // stride)
        mask = batch["audio_mask"] & batch["example_mask"][:, None]
        pred, _ = train.output_labels(jnp.asarray(predicted), mask, stride, frames)
        gold, gold_mask = train.output_labels(batch["labels"], mask, stride, frames)
        return pred, gold, gold_mask

    smoothing, mine = decoders(config), {}
    for fold in owned_folds(mesh, config.num_folds):
        train_set = training_calls(fold_ids, fold, config)
        test_set = np.flatnonzero(fold_ids == fold)
        segments = list(eval_batches(source, train_set, config, index))
        features, targets = baselines.segment_dataset(segments, settings)
        if name == "rf":
            classifier = baselines.fit_random_forest(features, targets, settings)
        else:
            classifier = baselines.fit_fnn(features, targets, settings, num_classes=len(classes))
        mine[fold] = score_fold(
            functools.partial(predict, classifier),
            eval_batches(source, test_set, config, index),
            heldout,
            config,
            smoothing,
            len(classes),
        )
        log(
            f"{name}: fold {fold} TIMESTEP F1 {mine[fold]['raw']['timestep']['f1']:.3f}"
            + (
                f", held-out engine {mine[fold][HELDOUT + '-raw']['timestep']['f1']:.3f}"
                if heldout is not None
                else ""
            )
        )
    names = decoding_names(heldout is not None)
    return gather_decodings(mine, names, config.num_folds, len(classes))


def summarise(per_fold: list[dict]) -> dict:
    per_class = np.array(
        [[np.nan if v is None else v for v in fold["timestep_f1_per_class"]] for fold in per_fold]
    )
    present = (~np.isnan(per_class)).sum(axis=0)
    class_means = np.where(
        present > 0, np.nansum(per_class, axis=0) / np.maximum(present, 1), np.nan
    )
    summary = {
        "folds": per_fold,
        "mean": {},
        "std": {},
        "timestep_f1_per_class": [None if np.isnan(v) else float(v) for v in class_means],
    }
    for score in SCORES:
        for part in tracking.PARTS:
            values = np.array([fold[score][part] for fold in per_fold], np.float64)
            summary["mean"].setdefault(score, {})[part] = float(np.nanmean(values))
            summary["std"].setdefault(score, {})[part] = float(np.nanstd(values))
    return summary


def transfer(summary: dict, heldout: dict) -> dict:
    """{"timestep_f1", "instance_f1"}: held-out mean / in-engine mean (fold means)."""
    return {
        key: common.transfer_ratio(heldout["mean"][score][part], summary["mean"][score][part])
        for key, (score, part) in TRANSFER.items()
    }


def summarise_decodings(per_fold: dict[str, list[dict]], smoothing: dict) -> dict:
    """A model's results.json entry from its gathered per-fold scores: the raw summary,
    "smoothed", and with heldout decodings "heldout" (raw, with "smoothed") and
    "transfer"."""
    summary = summarise(per_fold["raw"])
    summary[SMOOTHED] = {**summarise(per_fold[SMOOTHED]), "smoothing": smoothing}
    if f"{HELDOUT}-raw" in per_fold:
        summary[HELDOUT] = summarise(per_fold[f"{HELDOUT}-raw"])
        summary[HELDOUT][SMOOTHED] = {
            **summarise(per_fold[f"{HELDOUT}-{SMOOTHED}"]),
            "smoothing": smoothing,
        }
        summary["transfer"] = transfer(summary, summary[HELDOUT])
    return summary


def _table_row(label: str, summary: dict) -> str:
    cells = "".join(
        f"{summary['mean'][score][part]:>14.3f} ± {summary['std'][score][part]:.3f}"
        for score in SCORES
        for part in tracking.PARTS
    )
    return f"{label:<18}{cells}"


def table(results: dict) -> str:
    """Mean ± std over folds per model, and the smoothed scores under each model's row
    ("+smooth 80 ms": the rule's declared latency), then its raw scores on the held-out
    engine's calls ("heldout engine") when there are any."""
    header = f"{'model':<18}" + "".join(
        f"{score.upper() + ' ' + part:>22}" for score in SCORES for part in ("P", "R", "F1")
    )
    rows = [header]
    for name, summary in results.items():
        rows.append(_table_row(name, summary))
        if SMOOTHED in summary:
            latency_ms = summary[SMOOTHED]["smoothing"]["latency_ms"]
            rows.append(_table_row(f"  +smooth {latency_ms:g} ms", summary[SMOOTHED]))
        if HELDOUT in summary:
            rows.append(_table_row("  heldout engine", summary[HELDOUT]))
    return "\n".join(rows)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    os.makedirs(workdir, exist_ok=True)
    models = [name.strip() for name in config.models.split(",") if name.strip()]
    unknown = set(models) - set(NEURAL) - set(BASELINES)
    if unknown:
        raise ValueError(f"config.models: unknown {sorted(unknown)}")
    causal_text(config)  # checks the fields before anything is built
    text_options(config).check(causal_text(config), "config.text_lag_s")
    training_noise(config)
    text_recognizer(config)
    smoothing = smoothing_record(config)
    source, index, heldout_source, heldout_index = load_corpus(config)
    heldout = None if heldout_source is None else (heldout_source, heldout_index)
    engine = None if heldout is None else heldout_engine(config)
    fold_ids = index.folds % config.num_folds
    processes = jax.process_count()
    devices = jax.devices() if processes > 1 else jax.devices()[: config.num_devices or None]
    mesh = folds.fold_mesh(devices)
    log(
        f"{len(source)} calls"
        + ("" if heldout is None else f" (+{len(heldout_source)} held-out-engine {engine})")
        + f", {config.num_folds} folds, {config.text_stream} text stream, "
        f"{len(devices)} device(s)" + (f" in {processes} processes" if processes > 1 else "")
    )
    writer = jax.process_index() == 0
    record_counts = None  # read when a neural model first needs class weights
    results, seconds = {}, {}
    for name in models:
        key = row_name(name, config)
        path = os.path.join(workdir, key, "scores.json")
        saved = files.read_json(path)
        if _reusable(saved, smoothing, heldout is not None):
            results[key] = saved
            log(f"{key}: scores found, skipped")
            continue
        if saved is not None:
            log(f"{key}: saved scores lack this smoothing or the held-out engine, recomputing")
        started = time.perf_counter()
        if name in NEURAL:
            if record_counts is None:
                record_counts = record_frame_counts(source, len(labels.classes(config.task)))
            trainer = FoldTrainer(
                name, config, source, index, fold_ids, mesh, workdir, record_counts, heldout
            )
            per_fold = trainer.evaluate(trainer.train())
        else:
            per_fold = run_baseline(name, config, source, index, fold_ids, mesh, heldout)
        results[key] = summarise_decodings(per_fold, smoothing)
        seconds[key] = time.perf_counter() - started
        if writer:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            files.write_json(path, results[key])
        raw, smoothed = results[key]["mean"], results[key][SMOOTHED]["mean"]
        log(
            f"{key}: TIMESTEP F1 {raw['timestep']['f1']:.3f}, INSTANCE P "
            f"{raw['instance']['precision']:.3f} -> {smoothed['instance']['precision']:.3f} "
            f"smoothed (+{smoothing['latency_ms']:g} ms)"
            + (_heldout_text(results[key]) if HELDOUT in results[key] else "")
            + f" ({seconds[key]:.0f} s)"
        )
    payload = {
        "task": config.task,
        "num_folds": config.num_folds,
        "text_stream": config.text_stream,
        "text_lag_s": config.text_lag_s,
        "text_words": config.text_words,
        "text_recognizer": config.text_recognizer,
        "text_substitution_rate": config.text_substitution_rate,
        "train_fraction": config.train_fraction,
        "smoothing": smoothing,
        "models": results,
    }
    if heldout is not None:
        payload["heldout_engine"] = engine
        payload["heldout_calls"] = len(heldout_source)
    if writer:
        files.write_json(os.path.join(workdir, "results.json"), payload)
        print(table(results))
    return payload


def _reusable(saved: dict | None, smoothing: dict, heldout: bool) -> bool:
    """Whether saved scores answer this run: same smoothing, and held-out-engine scores
    (with the same smoothing) whenever the corpus has a heldout split."""
    if saved is None or saved.get(SMOOTHED, {}).get("smoothing") != smoothing:
        return False
    if not heldout:
        return True
    held = saved.get(HELDOUT, {})
    return held.get(SMOOTHED, {}).get("smoothing") == smoothing and "transfer" in saved


def _heldout_text(summary: dict) -> str:
    f1 = summary[HELDOUT]["mean"]["timestep"]["f1"]
    share = summary["transfer"]["timestep_f1"]
    return f"; held-out engine TIMESTEP F1 {f1:.3f}, transfer " + (
        "n/a" if share is None else f"{share:.3f}"
    )


def main(argv) -> None:
    del argv
    distributed = (_COORDINATOR, _NUM_PROCESSES, _PROCESS_ID)
    common.cli_main(train_and_evaluate, _CONFIG.value, _WORKDIR.value, distributed)


if __name__ == "__main__":  # flags only here: the runners import each other
    _CONFIG = config_flags.DEFINE_config_file(
        "config", None, "experiments/configs/multiqt.py:PRESET"
    )
    _WORKDIR = flags.DEFINE_string("workdir", None, "output and checkpoint folder")
    _COORDINATOR, _NUM_PROCESSES, _PROCESS_ID = common.define_distributed_flags()
    app.run(main)
