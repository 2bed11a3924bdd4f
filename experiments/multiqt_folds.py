"""The MultiQT runner's (`experiments.multiqt`) fold machinery: training and scoring per fold.

`FoldTrainer` trains one MultiQT variant on every fold at once (`experiments.folds`),
each fold's model on the other folds' calls (`training_calls`), with its training noise
and class weights; `run_baseline` fits a baseline per fold; `FoldScorer` scores each
fold's model on its own fold and on every evaluation and gathers the folds' summary.

`config.folds` ("0", "1,3"; `trained_folds`) trains and scores only those folds, each on
the calls, epochs and random keys the full cross-validation gives it; the summary's
"folds" hold them in that order and "trained_folds" names them (`experiments.ship`
ships fold 0's model this way). The numbers are not the full run's: a step pads its
folds' batches to the longest of them, and dropout and SpecAugment draw their masks at
that padded length.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

from experiments import common, folds, training
from experiments.multiqt_setup import (
    call_batching,
    causal_text,
    model_config,
    own_corpus,
    row_name,
    smoothing_config,
    text_alterations,
)
from experiments.scoring import calls, evals
from multiqt_jax import baselines, bundle, input_pipeline, labels, model, train
from multiqt_jax.datasets.features import recognised_words
from speechkit import augment, batching, checks, errors, files
from speechkit.optim import OptimizerConfig, TrainState

TRAINED_FOLDS = "trained_folds"  # a summary's fold ids, where config.folds chose some

log = common.logger("multiqt")


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


def trained_folds(config) -> list[int]:
    """The folds whose models are trained and scored: `config.folds` ("0,2": those, in
    that order; "": every one of `config.num_folds`). A ValueError names a bad entry."""
    num_folds = checks.require_number("config.num_folds", config.num_folds, above=0)
    if not str(config.folds).strip():
        return list(range(num_folds))
    entries = [entry.strip() for entry in str(config.folds).split(",")]
    chosen = []
    for entry in entries:
        if not entry.isdecimal() or int(entry) >= num_folds or int(entry) in chosen:
            raise ValueError(
                f"config.folds={config.folds!r}: expected distinct fold ids below "
                f"config.num_folds={num_folds}, comma-separated, got {entry!r}"
            )
        chosen.append(int(entry))
    return chosen


def chosen_folds_record(config) -> list[int] | None:
    """What a model's saved scores record of `config.folds`: the fold ids, None for all."""
    return trained_folds(config) if str(config.folds).strip() else None


def check_folds(folder: str, config) -> None:
    """Records in folder/folds.json which folds a model folder's run trains
    (`chosen_folds_record`), or checks it against the one recorded: its checkpoints would
    otherwise be restored as another fold choice's models. An InvalidInput names both."""
    path = os.path.join(folder, "folds.json")
    wanted = {"folds": chosen_folds_record(config)}
    recorded = files.read_json(path)
    if recorded is None:
        files.write_json(path, wanted)
    elif recorded != wanted:
        raise errors.InvalidInput(
            f"{folder}: trained for folds {recorded['folds'] or 'all'}, not "
            f"{wanted['folds'] or 'all'} (config.folds); use another --workdir or delete "
            "that folder"
        )


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


# The runner's jitted functions, one per distinct setting: variants and tasks with the same
# model, optimiser and augmentation (the tasks' models, the studies' variants) reuse the
# programs traced, lowered and compiled for the first.


@functools.cache
def _init_fn(net_config: model.MultiQTConfig, optimizer: OptimizerConfig):
    """jit((key, inputs) -> a fold's step-0 TrainState), compiled once and called per
    fold."""
    net = model.MultiQT(net_config)
    return jax.jit(lambda key, inputs: TrainState.create(net.init(key, inputs), optimizer))


@functools.cache
def _fold_step(net_config: model.MultiQTConfig, masks, noise, mesh, form: str):
    """The fold-parallel train step (`experiments.folds.fold_parallel`) of a model:
    (states, batches, fold keys, class weights) -> (states, stats)."""
    net = model.MultiQT(net_config)

    def one_fold(state, batch, rng, weights):
        key = jax.random.wrap_key_data(rng)
        if noise is not None:
            batch = noisy_audio(batch, jax.random.fold_in(key, 2), noise)
        return train.train_step(net, state, batch, key, weights, masks)

    return folds.fold_parallel(one_fold, mesh, form=form)


class FoldTrainer:
    """Trains one MultiQT variant on every fold at once, with checkpoints. Each process
    builds the data of its own fold slots only (see experiments/folds.py); `finish`
    saves each fold's model and hands back its predict function for scoring."""

    def __init__(self, name, config, source, index, fold_ids, mesh, workdir, record_counts):
        self.name, self.config, self.source, self.index = name, config, source, index
        self.fold_ids, self.mesh = fold_ids, mesh
        self.num_folds = config.num_folds
        self.folds = trained_folds(config)  # slot s trains fold folds[s % len(folds)]
        self.slots = folds.fold_slots(len(self.folds), mesh)
        self.mine = folds.local_slots(mesh, self.slots)
        self.classes = labels.classes(config.task)
        self.net = model.MultiQT(model_config(config, name, len(self.classes)))
        self.workdir = os.path.join(workdir, row_name(name, config))
        os.makedirs(self.workdir, exist_ok=True)
        if jax.process_index() == 0:
            check_folds(self.workdir, config)
        steps, batch_size = config.train.steps, config.train.batch_size
        every_set = [training_calls(fold_ids, f, config) for f in range(self.num_folds)]
        self.train_sets = {f: every_set[f] for f in self.folds}
        pipeline = input_pipeline.PipelineConfig(
            batch_size=batch_size,
            num_epochs=epochs_for(steps, batch_size, every_set),  # as when all are trained
            pad_multiple=config.train.pad_multiple,
            drop_remainder=True,
            causal_text=causal_text(config),
            text=text_alterations(config),
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
        return self.folds[slot % len(self.folds)]

    def _init(self):
        """Global stacked train states; fold f's parameters come from key f."""
        inputs = train.model_inputs(self.datasets[0][0], rows=1)
        init = _init_fn(self.net.config, self.optimizer)
        keys = jax.random.split(jax.random.key(self.config.seed), self.num_folds)
        local = folds.stack([jax.device_get(init(keys[self._fold(s)], inputs)) for s in self.mine])
        return folds.to_global(local, self.mesh)

    def _step_fn(self):
        masks = common.build(augment.MaskConfig, self.config.augment, "config.augment")
        form = folds.default_form() if self.config.fold_form == "auto" else self.config.fold_form
        return _fold_step(self.net.config, masks, training_noise(self.config), self.mesh, form)

    def _rng_table(self) -> np.ndarray:
        """uint32 [steps, this process's slots, key data]: every step's fold keys, drawn at
        once (reading a step's keys back from the device would wait for the step before)."""
        slot_folds = jnp.asarray([self._fold(s) for s in self.mine])

        def keys(step):
            base = jax.random.fold_in(jax.random.key(self.config.seed + 1), step)
            return jax.vmap(lambda f: jax.random.key_data(jax.random.fold_in(base, f)))(slot_folds)

        return np.asarray(jax.jit(jax.vmap(keys))(jnp.arange(self.config.train.steps)))

    def _batch(self, local: list[dict]):
        """This process's slots' batches, padded to one length across processes."""
        frames = max(b["audio"].shape[1] for b in local)
        if jax.process_count() > 1:
            frames = int(np.max(multihost_utils.process_allgather(np.array([frames]))))
        return folds.to_global(folds.stack([_pad_time(b, frames) for b in local]), self.mesh)

    def train(self):
        weights = folds.to_global(self.weights, self.mesh)
        step_fn = self._step_fn()

        keys = self._rng_table()

        def step(states, batches, index):
            rngs = folds.to_global(keys[index], self.mesh)
            states, stats = step_fn(states, self._batch(batches), rngs, weights)
            return states, stats["loss"]  # left on the devices until the loop logs

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
            fetch=lambda losses: folds.gather_rows(losses)[:, : len(self.folds)],
        )

    def finish(self, states) -> dict[int, object]:
        """{fold: predict(batch)} of this process's trained folds; saves each as a bundle
        (`WORKDIR/<model>/bundle-fold<k>`) and the first trained fold's first test call as
        timeline.json."""
        local_params = folds.to_local(states.params, self.mesh)
        predictors = {}
        for position, slot in enumerate(self.mine):
            if slot >= len(self.folds):
                continue  # a padding slot
            fold = self._fold(slot)
            params = jax.tree_util.tree_map(lambda x, p=position: x[p], local_params)
            if fold == self.folds[0]:
                self._save_timeline(params, np.flatnonzero(self.fold_ids == fold)[0])
            self._save_bundle(params, fold)
            predictors[fold] = calls.predictor(self.net, params)
        return predictors

    def _save_bundle(self, params, fold: int) -> None:
        """Fold `fold`'s trained model as a bundle (`multiqt_jax.bundle`)."""
        bundle.save(
            os.path.join(self.workdir, f"bundle-fold{fold}"),
            self.net,
            params,
            self.classes,
            bundle.TrackingConfig(
                causal_text=causal_text(self.config),
                smoothing=smoothing_config(self.config),
                text_recogniser=self.config.text_recogniser,
            ),
            corpus=own_corpus(self.config),
        )

    def _save_timeline(self, params, record_index: int) -> None:
        """Gold and predicted labels of one held-out call, with its recognised words."""
        record = self.source[int(record_index)]
        pipeline = input_pipeline.PipelineConfig(
            batch_size=1,
            pad_multiple=2,
            causal_text=causal_text(self.config),
            text=text_alterations(self.config),
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


def owned_folds(mesh, chosen: list[int]) -> list[int]:
    """The folds of `chosen` (`trained_folds`) whose slots live on this process."""
    slots = folds.fold_slots(len(chosen), mesh)
    return [chosen[s] for s in folds.local_slots(mesh, slots) if s < len(chosen)]


class FoldScorer:
    """Scores fold models: fold f's on its own test fold ("test") and on every call of
    each evaluation, raw and smoothed, then gathers every process's folds."""

    def __init__(self, config, source, index, fold_ids, others: dict):
        self.config, self.source, self.index, self.fold_ids = config, source, index, fold_ids
        self.others = others  # {evaluation name: (source, index)}
        self.num_classes = len(labels.classes(config.task))
        self.batching = call_batching(config)
        self.smoothers = calls.smoothers(smoothing_config(config))

    @property
    def parts(self) -> list[str]:
        """The gathered parts: "<split>/<label stream>" for "test" and every evaluation."""
        splits = ["test", *self.others]
        return [f"{split}/{stream}" for split in splits for stream in calls.LABEL_STREAMS]

    def score(self, fold: int, predict, hop_s: float) -> dict:
        """{part: scores} of fold `fold`'s model (`parts`); `hop_s`: seconds per frame
        of its predicted labels (for the early question frames)."""
        test = np.flatnonzero(self.fold_ids == fold)
        splits = {"test": (self.source, test, self.index)}
        for name, (source, index) in self.others.items():
            splits[name] = (source, np.arange(len(source)), index)
        scored = {}
        for split, (source, indices, index) in splits.items():
            found = calls.score_calls(
                predict,
                source,
                indices,
                index,
                self.batching,
                num_classes=self.num_classes,
                smoothers=self.smoothers,
                hop_s=hop_s,
            )
            scored.update({f"{split}/{stream}": found[stream] for stream in found})
        return scored

    def summary(self, mine: dict[int, dict], smoothing: dict) -> dict:
        """A model's results.json entry from this process's {fold: `score`}: every fold
        gathered, summarised over folds, with each evaluation and its transfer ratios."""
        chosen = trained_folds(self.config)
        position = {fold: row for row, fold in enumerate(chosen)}  # gathered in this order
        per_fold = calls.gather_folds(
            {position[fold]: scored for fold, scored in mine.items()},
            self.parts,
            len(chosen),
            self.num_classes,
        )

        def label_streams(split: str) -> dict:
            return {d: per_fold[f"{split}/{d}"] for d in calls.LABEL_STREAMS}

        summary = calls.summarise_label_streams(label_streams("test"), smoothing)
        for name in self.others:
            summary[name] = calls.summarise_label_streams(label_streams(name), smoothing)
            summary[evals.transfer_key(name)] = calls.transfer(summary, summary[name])
        if chosen_folds_record(self.config) is not None:
            summary[TRAINED_FOLDS] = chosen  # "folds" holds these, in this order
        return summary


def run_baseline(name, config, source, index, fold_ids, mesh, scorer: FoldScorer) -> dict:
    """Baseline `name` trained and scored per fold (each process its own folds), as
    this process's {fold: `FoldScorer.score`}."""
    classes = labels.classes(config.task)
    stride = model.MultiQTConfig(num_classes=len(classes)).audio_stride
    hop_s = stride * model.AUDIO_HOP_S  # seconds per frame of the 40 ms clock
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

    mine = {}
    for fold in owned_folds(mesh, trained_folds(config)):
        train_set = training_calls(fold_ids, fold, config)
        segments = list(calls.eval_batches(source, train_set, index, scorer.batching))
        features, targets = baselines.segment_dataset(segments, settings)
        if name == "rf":
            classifier = baselines.fit_random_forest(features, targets, settings)
        else:
            classifier = baselines.fit_fnn(features, targets, settings, num_classes=len(classes))
        mine[fold] = scorer.score(fold, functools.partial(predict, classifier), hop_s)
        log(
            f"{name}: fold {fold} TIMESTEP F1 {mine[fold]['test/raw']['timestep']['f1']:.3f}"
            + "".join(
                f", {other} {mine[fold][f'{other}/raw']['timestep']['f1']:.3f}"
                for other in scorer.others
            )
        )
    return mine
