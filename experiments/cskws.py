r"""CS-KWS experiment: AF-KWS, AF-KWS without the unknown class, sliding-window baseline.

    python -m experiments.cskws --config=experiments/configs/cskws.py:quick --workdir=/tmp/cskws

Trains each model in `config.models` on the training split (fixed-length crops), then
detects keywords in every whole test utterance and scores them with
`metrics.detection_scores` over the true total hours. Writes `WORKDIR/results.json`
(per model: mAP, AP@0.05, AP@0.75, FRR@5, FRR@25, RTF = detection seconds per second of
audio on this machine after compilation, and AP per keyword), each model's test
detections (`WORKDIR/<model>/detections.npz`, for curves), its training curve
(`curves.jsonl`) and checkpoints, and for the AF-KWS models the trained model as a
bundle (`WORKDIR/<model>/bundle`, see `cskws_jax.bundle`; run it with `python -m
cskws_jax.detect`); rerunning resumes, and finished models are not redone.

When the corpus has a `heldout` split (synthetic_kws: utterances spoken by a synthesiser
never heard in train or test; LibriTop-20 has none), every model is also scored on it,
with the same parameters and evaluator (`WORKDIR/<model>/heldout/detections.npz` and
`detection_curves.json`): results.json gains per model "heldout" (HELDOUT_REPORTED) and
"transfer" = heldout mAP / test mAP (None when the test mAP is 0), and the corpus's
"heldout_engine"; "heldout" also has its own "intervals" and "allowed_false_alarms"
(bootstrap over the held-out utterances, as for the test split below). Saved scores
without "heldout" while the corpus has the split are recomputed (training resumes from
its last checkpoint, so only evaluation runs again).

Operating points: from each model's test detections, `cskws_jax.operating_points.choose`
picks per-keyword score thresholds for every false-alarm budget in `config.eval.fa_budgets`
(FA per hour, all keywords together; each keyword an equal share), and the AF-KWS bundles
store them (`python -m cskws_jax.detect BUNDLE AUDIO --fa-per-hour 5`). Each model's
`WORKDIR/<model>/det.json` holds the test DET curves (FA/h against miss rate, pooled
under one shared threshold and per keyword, thinned to `DET_CURVE_POINTS` cuts), and
results.json per model "operating_points" (`operating_point_summary`): per budget the
false alarms it allows on the test hours, the FA/h and miss rate the thresholds give on
the test split, and, with a heldout split, on that. Thresholds chosen on the test split
and read on it meet the budget by construction, so their test miss rate is optimistic;
the held-out-engine numbers are the out-of-sample check. Saved scores without
"operating_points" are recomputed as above.

Uncertainty: the test split is small (the quick preset's is about 0.2 h, so FRR@5 allows
about one false alarm), so results.json per model also holds "intervals": 95 % percentile
bootstrap intervals over test utterances of mAP, AP@0.05, FRR@5 and FRR@25
(`detection.bootstrap_intervals` on the saved test detections, `config.eval.
bootstrap_resamples` resamples drawn with `config.seed`), and "allowed_false_alarms":
per FRR budget b, b x test hours (the false alarms it allows on the test split). Saved
scores without "intervals" are recomputed as above.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time

import jax
import ml_collections
import numpy as np
import tensorflow_datasets as tfds
from absl import app, flags
from ml_collections import config_flags

from cskws_jax import baselines, bundle, input_pipeline, losses, model, operating_points, train
from cskws_jax.datasets import synthetic_kws
from experiments import common, training
from experiments.evaluators import detection
from speechkit import batching, checks, files
from speechkit.optim import OptimizerConfig, TrainState

MODELS = ("afkws", "afkws_no_unknown", "sliding_window")
REPORTED = ("mAP", "AP@0.05", "AP@0.75", "FRR@5", "FRR@25")
INTERVALS = ("mAP", "AP@0.05", "FRR@5", "FRR@25")  # the scores with bootstrap intervals
FRR_BUDGETS = {"FRR@5": 5.0, "FRR@25": 25.0}  # FA per hour behind each reported FRR
HELDOUT = "heldout"  # the split spoken by the held-out engine, when the corpus has one
HELDOUT_REPORTED = (*REPORTED, "test_hours")
DET_CURVE_POINTS = 400  # cuts per DET curve in det.json, at most


log = common.logger("cskws")


def load_corpus(config):
    """({"train", "test"[, "heldout"]}: data sources, keywords); "heldout" only when
    the corpus has that split."""
    data_dir = common.data_dir(config)
    name = config.dataset
    if config.build_missing and name.startswith("synthetic_kws/"):
        size = name.split("/", 1)[1]
        builder = synthetic_kws.SyntheticKws(
            config=size, data_dir=data_dir, file_format="array_record"
        )
        builder.download_and_prepare()
    keywords = list(tfds.builder(name, data_dir=data_dir).info.metadata["keywords"])
    sources = tfds.data_source(name, data_dir=data_dir)
    for split in ("train", "test"):
        if split not in sources:
            raise ValueError(f"{name}: no {split!r} split (has {sorted(sources)})")
    splits = ("train", "test", HELDOUT)
    return {split: sources[split] for split in splits if split in sources}, keywords


def heldout_engine(config) -> str | None:
    """The synthesiser that speaks the corpus's heldout split, from its builder config
    (None: not a synthetic_kws corpus, or none held out)."""
    if not config.dataset.startswith("synthetic_kws/"):
        return None
    name = config.dataset.split("/", 1)[1]  # a size, or a size-engine set ("quick-festival")
    built = synthetic_kws.SyntheticKws.builder_configs.get(name)
    return None if built is None else built.render_config.heldout_engine


class Candidate:
    """One model of the comparison: how to start, step and detect."""

    def __init__(self, name: str, config, num_keywords: int):
        self.name, self.num_keywords = name, num_keywords
        self.unknown_class = name != "afkws_no_unknown"
        self.net = self.decoding = None  # an AF-KWS model's, for its bundle
        if name == "sliding_window":
            window = common.build(baselines.WindowConfig, config.window, "config.window")
            self.describe = lambda state: (
                f"sliding-window CNN ({window.window_s} s every {window.hop_s} s)"
            )
            self.init = lambda key, batch: baselines.create_train_state(window, num_keywords, key)
            self.step = jax.jit(
                lambda state, batch, rng: baselines.train_step(state, batch, window, num_keywords)
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
        decoding = common.build(train.DecodeConfig, config.decode, "config.decode")
        self.init = lambda key, batch: TrainState.create(
            net.init(key, {"audio": batch["audio"][:1]}), optimizer
        )
        self.step = jax.jit(
            lambda state, batch, rng: train.train_step(net, augment, state, batch, rng, loss)
        )
        self.detect = jax.jit(lambda params, batch: train.detect(net, params, batch, decoding))
        self.describe = lambda state: model.describe(net.config, state.params)
        self.net, self.decoding = net, decoding


def training_utterances(config, size: int) -> np.ndarray:
    """int64 [n]: the training split's utterances the models train on: all `size` of
    them or, with `config.train.fraction` < 1, the first ceil(fraction x size) of an order
    drawn with config.seed, in corpus order (a smaller fraction's are a subset of a
    larger one's)."""
    fraction = checks.require_number(
        "config.train.fraction", config.train.fraction, above=0, at_most=1
    )
    return batching.nested_subset(np.arange(size), fraction, config.seed)


def train_candidate(candidate: Candidate, config, source, workdir: str):
    utterances = training_utterances(config, len(source))
    pipeline = input_pipeline.PipelineConfig(
        batch_size=config.train.batch_size,
        crop_s=config.train.crop_s,
        num_epochs=config.train.steps * config.train.batch_size // len(utterances) + 2,
        unknown_class=candidate.unknown_class,
    )
    dataset = input_pipeline.training_batches(
        source,
        pipeline,
        num_keywords=candidate.num_keywords,
        seed=config.seed,
        indices=None if len(utterances) == len(source) else utterances,
    )
    base_key = jax.random.key(config.seed + 1)

    def step(state, batches, index):
        state, stats = candidate.step(state, batches[0], jax.random.fold_in(base_key, index))
        return state, float(stats["loss"])

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
    )


def evaluate_candidate(candidate: Candidate, params, config, source, workdir: str) -> dict:
    """Detects and scores every utterance of `source`; writes `workdir/detections.npz`
    (padded detections and truth per row, `durations`: seconds per row, 0 on filler
    rows, and `hours`) and `workdir/detection_curves.json`."""
    os.makedirs(workdir, exist_ok=True)
    pipeline = input_pipeline.PipelineConfig(batch_size=config.eval.batch_size, unknown_class=False)
    batches = input_pipeline.evaluation_batches(
        source, pipeline, num_keywords=candidate.num_keywords
    )
    result = detection.evaluate(
        lambda batch: candidate.detect(params, batch),
        batches,
        num_keywords=candidate.num_keywords,
    )
    np.savez(
        os.path.join(workdir, "detections.npz"),
        **{f"detection_{k}": v for k, v in result["detections"].items()},
        **{f"truth_{k}": v for k, v in result["truth"].items()},
        durations=result["durations"],
        hours=result["hours"],
    )
    files.write_json(os.path.join(workdir, "detection_curves.json"), result["curves"])
    scores = result["scores"]
    return {
        **{key: scores[key] for key in REPORTED},
        "RTF": result["seconds"] / (result["hours"] * 3600),
        "AP_per_keyword@0.05": scores["AP"][0],
        "test_hours": result["hours"],
    }


def evaluate_heldout(candidate: Candidate, params, config, source, workdir: str) -> dict:
    """HELDOUT_REPORTED scores on the heldout split (files in `workdir/heldout/`)."""
    scores = evaluate_candidate(candidate, params, config, source, os.path.join(workdir, HELDOUT))
    return {key: scores[key] for key in HELDOUT_REPORTED}


def reusable(saved: dict, heldout: bool) -> bool:
    """Whether a model's saved scores.json answers this run: it must hold the operating
    points, the bootstrap intervals, and the heldout scores whenever the corpus has that
    split (older runs' scores do not)."""
    has_points = "operating_points" in saved and "intervals" in saved
    return has_points and (not heldout or (HELDOUT in saved and "transfer" in saved))


def saved_arrays(folder: str) -> tuple[dict, dict, dict]:
    """(detections, truth, the rest: hours and, when saved, durations) of the arrays
    `evaluate_candidate` saved in `folder/detections.npz`."""
    with np.load(os.path.join(folder, "detections.npz")) as saved:
        parts = {prefix: {} for prefix in ("detection", "truth")}
        rest = {}
        for key in saved.files:
            prefix, _, field = key.partition("_")
            if prefix in parts:
                parts[prefix][field] = saved[key]
            else:
                rest[key] = saved[key]
    return parts["detection"], parts["truth"], rest


def bootstrap_resamples(config) -> int:
    """`config.eval.bootstrap_resamples`, checked (an int >= 1)."""
    return checks.require_int(
        "config.eval.bootstrap_resamples", config.eval.get("bootstrap_resamples"), at_least=1
    )


def score_intervals(config, folder: str, num_keywords: int) -> dict:
    """results.json's "intervals" (`detection.bootstrap_intervals` over the test
    utterances saved in `folder`, `config.eval.bootstrap_resamples` resamples, seed
    `config.seed`) and "allowed_false_alarms" (per FRR budget b: b x test hours)."""
    detections, truth, rest = saved_arrays(folder)
    if "durations" not in rest:
        raise ValueError(f"{folder}/detections.npz: no per-utterance durations (an older run)")
    intervals = detection.bootstrap_intervals(
        detections,
        truth,
        rest["durations"],
        num_keywords,
        resamples=bootstrap_resamples(config),
        seed=config.seed,
        fa_per_hour=tuple(FRR_BUDGETS.values()),
    )
    hours = float(rest["hours"])
    return {
        "intervals": {key: intervals[key] for key in INTERVALS},
        "allowed_false_alarms": {key: budget * hours for key, budget in FRR_BUDGETS.items()},
    }


def saved_outcomes(folder: str, num_keywords: int) -> operating_points.Outcomes:
    """The `cskws_jax.operating_points.Outcomes` of the detections that
    `evaluate_candidate` saved in `folder`."""
    detections, truth, rest = saved_arrays(folder)
    return operating_points.outcomes(
        detections, truth, num_keywords=num_keywords, hours=float(rest["hours"])
    )


def choose_operating_points(config, folder: str, keywords, heldout: bool) -> tuple:
    """(operating points, their summary for results.json) of the model whose test (and
    heldout) detections are saved in `folder`; writes `folder/det.json`."""
    test, curves = write_det(folder, keywords, "test")
    budgets = tuple(float(b) for b in config.eval.fa_budgets)
    points = operating_points.choose(test, budgets, split=f"{config.dataset}:test")
    other = saved_outcomes(os.path.join(folder, HELDOUT), len(keywords)) if heldout else None
    return points, operating_point_summary(points, test, curves["pooled"], other)


def write_det(folder: str, keywords, split: str) -> tuple[operating_points.Outcomes, dict]:
    """(outcomes, DET curves) of the detections saved in `folder` (labels: the classes
    `keywords` name, in order); writes them as `folder/det.json` (`det_record`)."""
    found = saved_outcomes(folder, len(keywords))
    curves = operating_points.det_curves(found)
    files.write_json(os.path.join(folder, "det.json"), det_record(found, curves, keywords, split))
    return found, curves


def det_record(found, curves: dict, keywords, split: str) -> dict:
    """det.json's content: the DET curves `curves` (`operating_points.det_curves` of
    `found`; per keyword named by `keywords`, in class order), each thinned to
    `DET_CURVE_POINTS` cuts, with the split's name, IoU and hours."""
    return {
        "split": split,
        "iou": found.iou,
        "hours": found.hours,
        "pooled": curves["pooled"].thinned(DET_CURVE_POINTS).to_json(),
        "per_keyword": {
            keyword: curve.thinned(DET_CURVE_POINTS).to_json()
            for keyword, curve in zip(keywords, curves["per_keyword"], strict=True)
        },
    }


def operating_point_summary(points, test, pooled, heldout=None) -> dict:
    """results.json's "operating_points": the rule, and per budget (FA/h, all keywords)
    the false alarms it allows on the test hours (in all, and per keyword under the
    equal share), what the thresholds give on the test split (`measure`: false alarms,
    hits, FA/h, miss rate) and on the heldout split when given, and the test miss rate
    of one shared threshold at the budget (FRR@budget, for comparison)."""
    num_keywords = test.num_keywords
    entries = []
    for point in points:
        budget = point.fa_per_hour
        within = pooled.fa_per_hour <= budget
        shared = float(np.min(pooled.miss_rate[within]))
        entry = {
            "fa_per_hour": budget,
            "allowed_false_alarms": operating_points.allowed_false_alarms(budget, test.hours),
            "allowed_per_keyword": operating_points.allowed_false_alarms(
                budget / num_keywords, test.hours
            ),
            "test": operating_points.measure(test, point.thresholds),
            "shared_threshold_miss_rate": shared if np.isfinite(shared) else None,
        }
        if heldout is not None:
            entry[HELDOUT] = operating_points.measure(heldout, point.thresholds)
        entries.append(entry)
    return {
        "rule": "equal share: each keyword's threshold is its lowest score cut with FA/h <= "
        "budget / keywords on the test split",
        "iou": test.iou,
        "test_hours": test.hours,
        "budgets": entries,
    }


def _number(value, width: int = 10) -> str:
    return f"{value:>{width}.3f}" if value is not None else f"{'-':>{width}}"


def table(results: dict) -> str:
    columns = (*REPORTED, "RTF")
    heldout = any(HELDOUT in scores for scores in results.values())
    extra = ("heldout mAP", "transfer") if heldout else ()
    lines = [
        f"{'model':<18}" + "".join(f"{c:>10}" for c in columns) + "".join(f"{c:>13}" for c in extra)
    ]
    for name, scores in results.items():
        row = f"{name:<18}" + "".join(f"{scores[c]:>10.3f}" for c in columns)
        if heldout:
            row += _number(scores.get(HELDOUT, {}).get("mAP"), 13)
            row += _number(scores.get("transfer"), 13)
        lines.append(row)
    return "\n".join(lines)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    os.makedirs(workdir, exist_ok=True)
    names = [name.strip() for name in config.models.split(",") if name.strip()]
    unknown = set(names) - set(MODELS)
    if unknown:
        raise ValueError(f"config.models: unknown {sorted(unknown)}; expected some of {MODELS}")
    bootstrap_resamples(config)  # checked before any training
    training_utterances(config, 1)
    sources, keywords = load_corpus(config)
    has_heldout = HELDOUT in sources
    engine = heldout_engine(config) if has_heldout else None
    log(
        f"{config.dataset}: {len(sources['train'])} training and {len(sources['test'])} test "
        f"utterances"
        + (
            f", {len(sources[HELDOUT])} held-out-engine ({engine or '?'}) utterances"
            if has_heldout
            else ""
        )
        + f", {len(keywords)} keywords"
    )
    results = {}
    for name in names:
        folder = os.path.join(workdir, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "scores.json")
        if (saved := files.read_json(path)) is not None:
            if reusable(saved, has_heldout):
                results[name] = saved
                log(f"{name}: scores found, skipped")
                continue
            log(
                f"{name}: saved scores lack the heldout split, operating points or "
                "intervals, recomputing"
            )
        started = time.perf_counter()
        candidate = Candidate(name, config, len(keywords))
        state = train_candidate(candidate, config, sources["train"], folder)
        results[name] = evaluate_candidate(candidate, state.params, config, sources["test"], folder)
        results[name].update(score_intervals(config, folder, len(keywords)))
        if has_heldout:
            heldout = evaluate_heldout(candidate, state.params, config, sources[HELDOUT], folder)
            heldout.update(score_intervals(config, os.path.join(folder, HELDOUT), len(keywords)))
            results[name][HELDOUT] = heldout
            results[name]["transfer"] = common.transfer_ratio(heldout["mAP"], results[name]["mAP"])
        points, results[name]["operating_points"] = choose_operating_points(
            config, folder, keywords, has_heldout
        )
        results[name]["seconds"] = time.perf_counter() - started  # training + evaluation
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
            + (
                f"; held-out engine mAP {results[name][HELDOUT]['mAP']:.3f}, transfer "
                + _ratio_text(results[name]["transfer"])
                if has_heldout
                else ""
            )
        )
    payload = {
        "dataset": config.dataset,
        "keywords": keywords,
        "train_fraction": config.train.fraction,
        "training_utterances": len(training_utterances(config, len(sources["train"]))),
        "models": results,
    }
    if has_heldout:
        payload["heldout_engine"] = engine
    files.write_json(os.path.join(workdir, "results.json"), payload)
    print(table(results))
    return payload


def _ratio_text(ratio) -> str:
    return "n/a (test mAP 0)" if ratio is None else f"{ratio:.3f}"


def main(argv) -> None:
    del argv
    common.cli_main(train_and_evaluate, _CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":  # flags only here: the runners import each other
    _CONFIG = config_flags.DEFINE_config_file("config", None, "experiments/configs/cskws.py:PRESET")
    _WORKDIR = flags.DEFINE_string("workdir", None, "output and checkpoint folder")
    app.run(main)
