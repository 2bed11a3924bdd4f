r"""Studies: when each modality, the unknown class and the look-ahead help, and how late.

    python -m experiments.studies --config=experiments/configs/studies.py:quick \
        --workdir=outputs/studies --config.data_dir=outputs/tensorflow_datasets
    python -m experiments.studies --config=experiments/configs/studies.py:smoke \
        --workdir=/tmp/studies --config.studies=noise,lookahead

Every study trains what it needs through the experiments themselves
(`experiments.multiqt` and `experiments.cskws`, one sub-workdir per variant under
WORKDIR/multiqt/ and WORKDIR/cskws/, so a rerun resumes and finished variants are not
redone) and scores trained models again where a study changes only the test input. The
base variants are the experiments as configured in `config.multiqt` (models multimodal,
audio and text) and `config.cskws` (afkws and afkws_no_unknown).

MultiQT (TIMESTEP / INSTANCE F1 mean ± std over the folds; every fold's model on its
own test fold):
- `asr_quality`: text of known word error rate: the oracle transcript (the words said,
  each emitted at its end) with `config.sweeps.substitution_rate` of its words replaced,
  the corpus's recogniser (causal and offline), and worse recognisers on the same audio
  (`config.sweeps.recognizers`: a narrow-band line, smaller beams, a unigram language
  model; `config.multiqt.text_recognizer`; scored in-engine only).
- `text_lag`: every recognised word emitted `config.sweeps.text_lag_s` seconds later
  than the recogniser did (trained and tested so; `config.multiqt.text_lag_s`), and the
  offline text stream (words at their recognised times) as a non-causal reference.
- `noise`: the base models tested with feature-domain noise at `config.sweeps.snr_db`
  (`speechkit.augment.mix_noise`; the text stays as recognised), and models trained with
  noise in that range (`config.sweeps.matched_snr_db`) tested the same way.
- `data_size`: trained on `config.sweeps.train_fraction` of each fold's training calls.
- `missing_modality`: the multimodal model with its text or its audio marked missing at
  test time, trained with modality dropout (the base) and without.
- `smoothing`: the base models' labels after the causal minimum-duration rule
  (`multiqt_jax.decode.smooth`) for `config.sweeps.smoothing_frames`: INSTANCE
  precision, recall and F1, the declared latency, and the measured tracking latency.
Every MultiQT row also has its tracking latency (`metrics.tracking_latency`: gold onset
to the first correctly labelled frame of each found instance; median and 90th
percentile in seconds, pooled over the folds).

AF-KWS (mAP, AP@0.05, FRR@5 on the test split, and the held-out engine's mAP where the
sub-experiment measured it):
- `unknown_class`: afkws and afkws_no_unknown trained on `config.sweeps.kws_fraction`
  of the training utterances for `config.sweeps.kws_steps` steps (every pair), on the
  base corpus and on each larger one of `config.sweeps.kws_datasets`
  (synthetic_kws/medium: 4x quick's training utterances, quick's test and heldout
  utterances); mAP with its 95 % bootstrap interval on the test split and on the
  held-out engine's.
- `lookahead`: afkws with `config.sweeps.delay` output frames of look-ahead (and the
  base variant's): scores against the algorithmic latency
  (`cskws_jax.streaming.StreamDetector.latency_s`).
- `kws_noise`: the base models tested with noise at `config.sweeps.snr_db`, and an
  afkws trained with noise in `config.sweeps.matched_snr_db` on every crop.
Every AF-KWS row is detected by the streaming detector (`StreamDetector.detect`, blocks
of one output frame), so it also has its detection latency (`metrics.detection_latency`:
emission minus the keyword's true end, median and 90th percentile).

Writes WORKDIR/studies.json (every study's rows, the claims' verdicts and the seconds
each study took), WORKDIR/figures/<study>.png (the score against the swept quantity, one
line per model, error bars = std over folds) and WORKDIR/studies.md (tables, figures and
the verdict on each of the papers' claims, worked out from the numbers).
"""

from __future__ import annotations

import copy
import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import matplotlib
import ml_collections
import numpy as np
from absl import app, flags
from ml_collections import config_flags

import metrics
from cskws_jax import bundle as kws_bundle
from cskws_jax import input_pipeline as kws_pipeline
from cskws_jax import streaming as kws_streaming
from experiments import common, cskws, multiqt
from experiments.evaluators import detection, tracking
from multiqt_jax import bundle as calls_bundle
from multiqt_jax import decode, input_pipeline, labels, model
from multiqt_jax import train as calls_train
from speechkit import augment, files, lm

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MULTIQT_STUDIES = ("asr_quality", "text_lag", "noise", "data_size", "missing_modality", "smoothing")
KWS_STUDIES = ("unknown_class", "lookahead", "kws_noise")
STUDIES = MULTIQT_STUDIES + KWS_STUDIES
NEURAL = ("multimodal", "audio", "text")
KWS_MODELS = ("afkws", "afkws_no_unknown")
CLEAN = "clean"  # the snr_db axis label of the unaltered test input
log = common.logger("studies")


# ----------------------------------------------------------------- sub-experiments


def variant(base: ml_collections.ConfigDict, overrides: dict) -> ml_collections.ConfigDict:
    """A copy of an experiment config with dotted fields set ("train.steps": 100)."""
    config = copy.deepcopy(base)
    for path, value in overrides.items():
        *parents, leaf = path.split(".")
        section = config
        for name in parents:
            section = section[name]
        if leaf not in section:
            raise ValueError(f"studies: {path!r} is no field of the experiment config")
        section[leaf] = value
    return config


def _flat(tree, prefix: str = "") -> dict:
    """{dotted path: leaf} of nested dicts; tuples as lists (as JSON has them)."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix[:-1]: list(tree) if isinstance(tree, tuple) else tree}


def check_variant(folder: str, config: ml_collections.ConfigDict) -> None:
    """Records a variant's config in folder/variant.json, or checks it against the one
    recorded: a variant folder trained with another config is an error naming the fields
    (its checkpoints and scores would be read back as if they were this config's)."""
    path = os.path.join(folder, "variant.json")
    wanted = json.loads(json.dumps(_flat(config.to_dict())))
    recorded = files.read_json(path)
    if recorded is None:
        os.makedirs(folder, exist_ok=True)
        files.write_json(path, wanted)
        return
    changed = sorted(k for k in wanted.keys() | recorded.keys() if wanted.get(k) != recorded.get(k))
    if changed:
        raise ValueError(
            f"{folder}: trained with another config (fields {', '.join(changed)}); "
            "use another --workdir or delete that folder"
        )


class Runs:
    """The sub-experiments of a studies run: each variant trained (or resumed) once, in
    WORKDIR/<task>/<variant>."""

    def __init__(self, config, workdir: str):
        self.config, self.workdir = config, workdir
        self._done: dict[tuple[str, str], tuple[dict, str, ml_collections.ConfigDict]] = {}

    def _base(self, task: str) -> ml_collections.ConfigDict:
        base = copy.deepcopy(self.config[task])
        base.data_dir = self.config.data_dir
        return base

    def multiqt(self, name: str, overrides: dict | None = None, models: str = ",".join(NEURAL)):
        """(results.json payload, workdir, config) of MultiQT variant `name`."""
        return self._run("multiqt", name, {"models": models, **(overrides or {})})

    def cskws(self, name: str, overrides: dict | None = None, models: str = ",".join(KWS_MODELS)):
        """(results.json payload, workdir, config) of CS-KWS variant `name`."""
        return self._run("cskws", name, {"models": models, **(overrides or {})})

    def _run(self, task: str, name: str, overrides: dict):
        key = (task, name)
        if key not in self._done:
            config = variant(self._base(task), overrides)
            folder = os.path.join(self.workdir, task, name)
            check_variant(folder, config)
            experiment = multiqt if task == "multiqt" else cskws
            log(f"{task} variant {name!r}: {overrides}")
            self._done[key] = (experiment.train_and_evaluate(config, folder), folder, config)
        return self._done[key]


# ------------------------------------------------------------------ MultiQT scoring


def _mean_std(values) -> dict:
    values = np.asarray(values, np.float64)
    return {"mean": float(np.nanmean(values)), "std": float(np.nanstd(values))}


def _latency(latencies: list[np.ndarray], valid: list[np.ndarray]) -> dict:
    """{count, median_s, p90_s} of the pooled valid latencies (`metrics.latency_summary`)."""
    summary = metrics.latency_summary(np.concatenate(latencies), np.concatenate(valid))
    median, p90 = float(summary.median), float(summary.p90)
    return {
        "count": int(summary.count),
        "median_s": None if np.isnan(median) else median,
        "p90_s": None if np.isnan(p90) else p90,
    }


class CallScorer:
    """Scores a MultiQT variant's fold bundles (`multiqt_jax.bundle`) on their own test
    folds, with the test input altered (noise, a missing modality) and the labels
    smoothed at several rule lengths, in one pass per fold."""

    def __init__(self, config, source, index):
        self.config, self.source, self.index = config, source, index
        self.fold_ids = index.folds % config.num_folds
        self.num_classes = len(labels.classes(config.task))

    def score(self, folder: str, *, snr_db=None, present=None, smoothing=(1,)) -> dict:
        """{"per_fold": [{min_frames: scores}], "summary": {min_frames: row}} of the fold
        bundles in `folder` (`bundle-fold<k>`); `present` (audio, text) marks a modality
        missing in every call; `smoothing`: minimum-duration rule lengths (1 = raw)."""
        net = None
        per_fold, lags = [], {k: ([], []) for k in smoothing}
        for fold in range(self.config.num_folds):
            fold_net, params, _ = calls_bundle.load(os.path.join(folder, f"bundle-fold{fold}"))
            if net is None:
                net = fold_net
                predict = jax.jit(functools.partial(calls_train.predict, net))
                hop_s = model.streaming_spec(net.config).output_hop_s
            totals = {}
            calls = np.flatnonzero(self.fold_ids == fold)
            batches = multiqt.eval_batches(self.source, calls, self.config, self.index)
            for position, batch in enumerate(batches):
                if snr_db is not None:
                    key = jax.random.key(self.config.seed * 100_003 + fold * 1009 + position)
                    batch = _noisy(batch, key, float(snr_db))
                rows = None
                if present is not None:
                    rows = np.tile(np.asarray(present, bool), (batch["audio"].shape[0], 1))
                pred, gold, mask = predict(params, batch, rows)
                for k in smoothing:
                    labelled = pred if k == 1 else _smoother(k)(pred, mask)
                    found = tracking.counts(labelled, gold, mask, num_classes=self.num_classes)
                    totals[k] = found if k not in totals else _add(totals[k], found)
                    late = metrics.tracking_latency(
                        labelled, gold, mask, num_classes=self.num_classes
                    )
                    lags[k][0].append(np.asarray(late.latency, np.float32).ravel() * hop_s)
                    lags[k][1].append(np.asarray(late.valid).ravel())
            per_fold.append({k: tracking.scores_from_counts(t) for k, t in totals.items()})
        summary = {
            k: {
                **{
                    f"{score}_{part}": _mean_std([f[k][score][part] for f in per_fold])
                    for score in tracking.SCORES
                    for part in tracking.PARTS
                },
                "latency": _latency(*lags[k]),
                "declared_latency_s": (k - 1) * hop_s,
            }
            for k in smoothing
        }
        return {"per_fold": per_fold, "summary": summary}


def _word_list(record, options) -> list[str]:
    return [w.word for w in input_pipeline.text_words(record, options)]


def _add(total: dict, found: dict) -> dict:
    return {name: total[name] + found[name] for name in total}


@functools.cache
def _smoother(min_frames: int):
    settings = decode.SmoothingConfig(min_frames=min_frames)
    return jax.jit(functools.partial(decode.smooth, config=settings))


@jax.jit
def _noise_audio(audio, mask, key, snr_db):
    noisy = augment.mix_noise(audio, mask, key, snr_db)
    return jnp.where(mask[..., None], noisy, audio)


def _noisy(batch: dict, key, snr_db: float) -> dict:
    """A pipeline batch with its audio features at `snr_db` (padding unchanged)."""
    audio = _noise_audio(batch["audio"], batch["audio_mask"], key, jnp.float32(snr_db))
    return {**batch, "audio": audio}


# ------------------------------------------------------------------- AF-KWS scoring


class KeywordScorer:
    """Scores a CS-KWS variant's AF-KWS bundle on a split with the streaming detector
    (blocks of one output frame), the test features optionally at an SNR."""

    def __init__(self, config, sources):
        self.config, self.sources = config, sources

    def score(self, bundle_dir: str, *, split: str = "test", snr_db=None) -> dict:
        net, params, info = kws_bundle.load(bundle_dir)
        decoding = info.decoding
        detector = kws_streaming.StreamDetector(
            net, params, block_outputs=1, radius=decoding.radius, min_score=decoding.min_score
        )
        num_keywords = net.config.num_keywords
        pipeline = kws_pipeline.PipelineConfig(
            batch_size=self.config.eval.batch_size, unknown_class=False
        )
        batches = kws_pipeline.evaluation_batches(
            self.sources[split], pipeline, num_keywords=num_keywords
        )
        emitted = []

        def detect(batch, position=[0]):  # noqa: B006 - counts the batches of this call
            features = batch["audio"]
            if snr_db is not None:
                key = jax.random.key(self.config.seed * 100_003 + position[0])
                features = _noise_audio(features, batch["audio_mask"], key, jnp.float32(snr_db))
            position[0] += 1
            found, times = detector.detect(
                features, batch["audio_mask"], max_detections=decoding.max_detections
            )
            emitted.append(np.asarray(times))
            return found

        result = detection.evaluate(detect, batches, num_keywords=num_keywords, timed=False)
        late = metrics.detection_latency(
            result["detections"],
            np.concatenate(emitted),
            result["truth"],
            num_classes=num_keywords,
        )
        scores = result["scores"]
        return {
            **{key: scores[key] for key in ("mAP", "AP@0.05", "FRR@5")},
            "latency": _latency(
                [np.asarray(late.latency).ravel()], [np.asarray(late.valid).ravel()]
            ),
            "algorithmic_latency_s": detector.latency_s,
            "hours": result["hours"],
        }


# -------------------------------------------------------------------------- studies


def _curve(rows: list[dict], metric: str) -> dict:
    """{"mean": [...], "std": [...]} of one metric over a study's points."""
    return {
        "mean": [row[metric]["mean"] for row in rows],
        "std": [row[metric]["std"] for row in rows],
    }


def _sweep_record(axis: str, points: list, models: dict, heldout: dict) -> dict:
    """A trained sweep's record: per model {metric: {mean, std}} rows (one per point) as
    curves, and the held-out engine's TIMESTEP F1 curves where every point has one."""
    return {
        "axis": axis,
        "points": points,
        "curves": {
            metric: {m: _curve(rows, metric) for m, rows in models.items()}
            for metric in ("timestep_f1", "instance_f1")
        },
        "heldout_curves": {
            "timestep_f1": {
                m: _curve(rows, "timestep_f1") for m, rows in heldout.items() if all(rows)
            }
        },
    }


def _fold_summary(results: dict, name: str, heldout: bool = False) -> dict:
    """A sub-experiment model's TIMESTEP / INSTANCE F1 as {metric: {mean, std}}."""
    summary = results["models"][name]
    if heldout:
        summary = summary.get(multiqt.HELDOUT)
        if summary is None:
            return {}
    return {
        f"{score}_f1": {"mean": summary["mean"][score]["f1"], "std": summary["std"][score]["f1"]}
        for score in tracking.SCORES
    }


class Studies:
    """Runs the studies of `config.studies` and collects their records."""

    def __init__(self, config, workdir: str):
        self.config, self.workdir = config, workdir
        self.runs = Runs(config, workdir)
        self._calls = self._keywords = None

    # -- shared inputs
    def calls(self) -> CallScorer:
        if self._calls is None:
            _, _, base = self.runs.multiqt("base")
            source, index, _, _ = multiqt.load_corpus(base)
            self._calls = CallScorer(base, source, index)
        return self._calls

    def keywords(self) -> KeywordScorer:
        if self._keywords is None:
            _, _, base = self.runs.cskws("base")
            sources, _ = cskws.load_corpus(base)
            self._keywords = KeywordScorer(base, sources)
        return self._keywords

    # -- MultiQT
    def asr_quality(self) -> dict:
        """Text-reading models on text of known word error rate: the oracle transcript
        (the words said, each emitted at its end) with `config.sweeps.substitution_rate`
        of its words substituted, the corpus's recogniser causal and offline, and worse
        recognisers on the same audio (`config.sweeps.recognizers`, names of
        `multiqt_jax.datasets.render.RECOGNIZER_VARIANTS`; causal)."""
        source = self.calls().source
        spoken = [
            _word_list(source[i], input_pipeline.TextOptions("spoken")) for i in range(len(source))
        ]
        streams = [
            (
                f"oracle, {rate:.0%} substituted",
                "oracle" if rate == 0 else f"oracle-sub{rate:g}",
                {"text_words": "spoken", "text_substitution_rate": float(rate)},
            )
            for rate in sorted(float(r) for r in self.config.sweeps.substitution_rate)
        ]
        streams += [
            ("recogniser, causal", "base", {}),
            ("recogniser, offline", "offline", {"text_stream": "offline"}),
        ]
        streams += [
            (f"recogniser {name}, causal", f"asr-{name}", {"text_recognizer": name})
            for name in self.config.sweeps.recognizers
        ]
        rows = []
        for label, name, overrides in streams:
            models = ",".join(NEURAL) if name == "base" else "multimodal,text"
            results, _, config = self.runs.multiqt(name, overrides, models=models)
            options = multiqt.text_options(config)
            heard = multiqt.load_corpus(config)[0] if config.text_recognizer else source
            said = [_word_list(heard[i], options) for i in range(len(heard))]
            row = {
                "stream": label,
                "variant": name,
                "causal": multiqt.causal_text(config),
                "wer": lm.error_rate(spoken, said),
            }
            for model_name in ("multimodal", "text"):
                row[model_name] = _fold_summary(results, multiqt.row_name(model_name, config))
            rows.append(row)
            log(
                f"asr_quality: {label}: WER {row['wer']:.3f}, text-only TIMESTEP F1 "
                f"{_ms(row['text']['timestep_f1'])}"
            )
        base_results, _, _ = self.runs.multiqt("base")
        return {"rows": rows, "audio": _fold_summary(base_results, "audio")}

    def text_lag(self) -> dict:
        sweep = [float(s) for s in self.config.sweeps.text_lag_s]
        models = {name: [] for name in NEURAL}
        heldout = {name: [] for name in NEURAL}
        for lag in sweep:
            name = "base" if lag == 0 else f"lag{lag:g}s"
            run = ",".join(NEURAL) if lag == 0 else "multimodal,text"
            results, _, _ = self.runs.multiqt(name, {"text_lag_s": lag}, models=run)
            base, _, _ = self.runs.multiqt("base")
            for model_name in NEURAL:  # the audio-only model reads no text: its base row
                source = results if model_name in results["models"] else base
                models[model_name].append(_fold_summary(source, model_name))
                heldout[model_name].append(_fold_summary(source, model_name, heldout=True))
        offline, _, _ = self.runs.multiqt(
            "offline", {"text_stream": "offline"}, models="multimodal,text"
        )
        return {
            **_sweep_record("text_lag_s", sweep, models, heldout),
            "offline": {m: _fold_summary(offline, f"{m}@offline") for m in ("multimodal", "text")},
        }

    def noise(self) -> dict:
        points = [CLEAN] + [float(s) for s in self.config.sweeps.snr_db]
        matched_range = tuple(float(s) for s in self.config.sweeps.matched_snr_db)
        rows = {}
        _, base_dir, _ = self.runs.multiqt("base")
        _, matched_dir, _ = self.runs.multiqt(
            "noise-matched", {"train.noise_snr_db": matched_range}, models="multimodal,audio"
        )
        variants = [(m, os.path.join(base_dir, m)) for m in NEURAL] + [
            (f"{m} (noise-trained)", os.path.join(matched_dir, m)) for m in ("multimodal", "audio")
        ]
        for label, folder in variants:
            rows[label] = [
                self.calls().score(folder, snr_db=None if p == CLEAN else p)["summary"][1]
                for p in points
            ]
            log(
                f"noise: {label}: "
                + ", ".join(f"{r['timestep_f1']['mean']:.3f}" for r in rows[label])
            )
        return {
            "axis": "snr_db",
            "points": points,
            "matched_snr_db": matched_range,
            "curves": {
                metric: {m: _curve(r, metric) for m, r in rows.items()}
                for metric in ("timestep_f1", "instance_f1")
            },
            "latency": {m: [row["latency"] for row in r] for m, r in rows.items()},
        }

    def data_size(self) -> dict:
        sweep = sorted(float(f) for f in self.config.sweeps.train_fraction)
        models = {name: [] for name in NEURAL}
        heldout = {name: [] for name in NEURAL}
        for fraction in sweep:
            name = "base" if fraction == 1 else f"data{fraction:g}"
            results, _, _ = self.runs.multiqt(name, {"train_fraction": fraction})
            for model_name in NEURAL:
                models[model_name].append(_fold_summary(results, model_name))
                heldout[model_name].append(_fold_summary(results, model_name, heldout=True))
        return _sweep_record("train_fraction", sweep, models, heldout)

    def missing_modality(self) -> dict:
        _, base_dir, base = self.runs.multiqt("base")
        _, plain_dir, _ = self.runs.multiqt(
            "no-modality-dropout", {"model.modality_dropout": 0.0}, models="multimodal"
        )
        conditions = {
            "both": (True, True),
            "text missing": (True, False),
            "audio missing": (False, True),
        }
        rows = {}
        for label, folder in (
            (f"multimodal (modality dropout {base.model.modality_dropout:g})", base_dir),
            ("multimodal (no modality dropout)", plain_dir),
        ):
            rows[label] = {
                condition: self.calls().score(os.path.join(folder, "multimodal"), present=present)[
                    "summary"
                ][1]
                for condition, present in conditions.items()
            }
        for single in ("audio", "text"):
            rows[f"{single}-only model"] = {
                "both": self.calls().score(os.path.join(base_dir, single))["summary"][1]
            }
        return {"conditions": list(conditions), "rows": rows}

    def smoothing(self) -> dict:
        sweep = sorted(int(k) for k in self.config.sweeps.smoothing_frames)
        _, base_dir, _ = self.runs.multiqt("base")
        rows = {
            m: self.calls().score(os.path.join(base_dir, m), smoothing=tuple(sweep))["summary"]
            for m in NEURAL
        }
        return {
            "axis": "min_frames",
            "points": sweep,
            "curves": {
                metric: {m: _curve([rows[m][k] for k in sweep], metric) for m in NEURAL}
                for metric in (
                    "instance_precision",
                    "instance_recall",
                    "instance_f1",
                    "timestep_f1",
                )
            },
            "declared_latency_s": [rows[NEURAL[0]][k]["declared_latency_s"] for k in sweep],
            "latency": {m: [rows[m][k]["latency"] for k in sweep] for m in NEURAL},
        }

    # -- AF-KWS
    def unknown_class(self) -> dict:
        """afkws and afkws_no_unknown for every (corpus, training share, steps): the base
        corpus and each of `config.sweeps.kws_datasets` (larger ones, e.g.
        synthetic_kws/medium, which shares quick's test and heldout utterances)."""
        base = self.config.cskws
        cells = []
        for dataset in unknown_class_corpora(self.config):
            for fraction in sorted(float(f) for f in self.config.sweeps.kws_fraction):
                for steps in sorted(int(s) for s in self.config.sweeps.kws_steps):
                    name = unknown_class_variant(base, dataset, fraction, steps)
                    overrides = {"train.fraction": fraction, "train.steps": steps}
                    if dataset != base.dataset:
                        overrides["dataset"] = dataset
                    results, _, _ = self.runs.cskws(name, overrides)
                    cells.append(unknown_class_cell(results, dataset, fraction, steps))
        return {"cells": cells}

    def lookahead(self) -> dict:
        rows = []
        base_delay = self.config.cskws.model.delay
        for delay in sorted({int(d) for d in self.config.sweeps.delay} | {base_delay}):
            if delay == base_delay:  # the base variant, trained anyway: a free point
                _, folder, _ = self.runs.cskws("base")
            else:
                _, folder, _ = self.runs.cskws(
                    f"delay{delay}", {"model.delay": delay}, models="afkws"
                )
            scored = self.keywords().score(os.path.join(folder, "afkws", "bundle"))
            rows.append({"delay": delay, **scored})
            log(
                f"lookahead: delay {delay}: mAP {scored['mAP']:.3f}, "
                f"latency {scored['algorithmic_latency_s']:.2f} s"
            )
        return {"rows": rows}

    def kws_noise(self) -> dict:
        points = [CLEAN] + [float(s) for s in self.config.sweeps.snr_db]
        matched = tuple(float(s) for s in self.config.sweeps.matched_snr_db)
        _, base_dir, _ = self.runs.cskws("base")
        _, matched_dir, _ = self.runs.cskws(
            "noise-matched",
            {"augment.noise_probability": 1.0, "augment.snr_db": matched},
            models="afkws",
        )
        variants = [(m, os.path.join(base_dir, m)) for m in KWS_MODELS] + [
            ("afkws (noise-trained)", os.path.join(matched_dir, "afkws"))
        ]
        rows = {}
        for label, folder in variants:
            rows[label] = [
                self.keywords().score(
                    os.path.join(folder, "bundle"), snr_db=None if p == CLEAN else p
                )
                for p in points
            ]
            log(f"kws_noise: {label}: " + ", ".join(f"{r['mAP']:.3f}" for r in rows[label]))
        return {"axis": "snr_db", "points": points, "matched_snr_db": matched, "rows": rows}


def unknown_class_corpora(config) -> list[str]:
    """The unknown-class study's corpora: the base one, then `config.sweeps.kws_datasets`."""
    extra = [name for name in config.sweeps.kws_datasets if name != config.cskws.dataset]
    return [config.cskws.dataset, *dict.fromkeys(extra)]


def unknown_class_variant(base, dataset: str, fraction: float, steps: int) -> str:
    """The variant folder's name: "base" where the cell is the base variant; cells on
    another corpus carry its name ("synthetic_kws-medium-data1-steps6000")."""
    if dataset == base.dataset and fraction == base.train.fraction and steps == base.train.steps:
        return "base"
    name = f"data{fraction:g}-steps{steps}"
    return name if dataset == base.dataset else f"{dataset.replace('/', '-')}-{name}"


def unknown_class_cell(results: dict, dataset: str, fraction: float, steps: int) -> dict:
    """One cell of the unknown-class study from a CS-KWS results.json payload: per model
    mAP with its 95 % interval, held-out-engine mAP with its interval, FRR@5."""
    cell = {
        "dataset": dataset,
        "train_fraction": fraction,
        "steps": steps,
        "training_utterances": results.get("training_utterances"),
    }
    for m in KWS_MODELS:
        scores = results["models"][m]
        heldout = scores.get(cskws.HELDOUT, {})
        cell[m] = {
            "mAP": scores["mAP"],
            "mAP_interval": scores.get("intervals", {}).get("mAP"),
            "heldout_mAP": heldout.get("mAP"),
            "heldout_mAP_interval": heldout.get("intervals", {}).get("mAP"),
            "FRR@5": scores["FRR@5"],
        }
    return cell


# ----------------------------------------------------------------- figures, claims


def _x_positions(points) -> tuple[list[float], list[str]]:
    return list(range(len(points))), [str(p) if isinstance(p, str) else f"{p:g}" for p in points]


def curve_figure(path: str, title: str, axis: str, points, curves: dict, ylabel: str) -> None:
    """One line per model: mean with std error bars against the swept points."""
    xs, ticks = _x_positions(points)
    figure, ax = plt.subplots(figsize=(6, 3.6))
    for name, curve in curves.items():
        ax.errorbar(xs, curve["mean"], yerr=curve["std"], marker="o", capsize=3, label=name)
    ax.set_xticks(xs, ticks)
    _save(figure, ax, path, title=title, xlabel=axis, ylabel=ylabel)


def _save(figure, ax, path: str, *, title: str, xlabel: str, ylabel: str, legend_size=8) -> None:
    """Labels, grid and legend on `ax`, then `figure` written to `path` (PNG) and closed."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size)
    _write(figure, path)


def _write(figure, path: str) -> None:
    """`figure` laid out, written to `path` (PNG, its folder made) and closed."""
    figure.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def asr_quality_figure(record: dict, path: str) -> None:
    """TIMESTEP F1 against the text's word error rate: per text-reading model a line over
    the oracle transcript's substitution sweep, a dashed line over the causal recognisers
    (the corpus's and the worse ones; squares), an open square for the offline stream,
    audio-only as a band (mean ± std)."""
    figure, ax = plt.subplots(figsize=(6, 3.6))
    by_wer = lambda rows: sorted(rows, key=lambda row: row["wer"])  # noqa: E731
    oracle = by_wer(row for row in record["rows"] if row["variant"].startswith("oracle"))
    recognisers = [row for row in record["rows"] if not row["variant"].startswith("oracle")]
    causal = by_wer(row for row in recognisers if row["causal"])
    offline = [row for row in recognisers if not row["causal"]]
    for name, color in (("multimodal", "C0"), ("text", "C2")):
        f1 = lambda rows, name=name: (  # noqa: E731
            [row["wer"] for row in rows],
            [row[name]["timestep_f1"]["mean"] for row in rows],
            [row[name]["timestep_f1"]["std"] for row in rows],
        )
        for rows, fmt, mfc, label in (
            (oracle, "o-", color, "oracle transcript"),
            (causal, "s--", color, "recognisers, causal"),
            (offline, "s", "none", "recogniser, offline"),
        ):
            if rows:
                xs, means, stds = f1(rows)
                ax.errorbar(
                    xs,
                    means,
                    yerr=stds,
                    fmt=fmt,
                    color=color,
                    mfc=mfc,
                    capsize=3,
                    label=f"{name}, {label}",
                )
    audio = record["audio"]["timestep_f1"]
    ax.axhspan(audio["mean"] - audio["std"], audio["mean"] + audio["std"], color="C1", alpha=0.2)
    ax.axhline(audio["mean"], color="C1", label="audio-only")
    _save(
        figure,
        ax,
        path,
        title="MultiQT: transcript quality",
        xlabel="word error rate of the text stream",
        ylabel="TIMESTEP F1 (mean ± std over folds)",
        legend_size=6,
    )


def figures(records: dict, folder: str) -> dict[str, str]:
    """WORKDIR/figures/<study>.png for every study run; {study: path relative to WORKDIR}."""
    paths = {}

    def draw(study, title, axis, points, curves, ylabel):
        paths[study] = f"figures/{study}.png"
        curve_figure(os.path.join(folder, paths[study]), title, axis, points, curves, ylabel)

    for study in ("text_lag", "noise", "data_size"):
        if study in records:
            r = records[study]
            draw(
                study,
                f"MultiQT: {study.replace('_', ' ')}",
                r["axis"],
                r["points"],
                r["curves"]["timestep_f1"],
                "TIMESTEP F1 (mean ± std over folds)",
            )
    if "smoothing" in records:
        r = records["smoothing"]
        draw(
            "smoothing",
            "MultiQT: minimum-duration smoothing",
            "min_frames (40 ms)",
            r["points"],
            r["curves"]["instance_f1"],
            "INSTANCE F1 (mean ± std over folds)",
        )
    if "asr_quality" in records:
        paths["asr_quality"] = "figures/asr_quality.png"
        asr_quality_figure(records["asr_quality"], os.path.join(folder, paths["asr_quality"]))
    if "kws_noise" in records:
        r = records["kws_noise"]
        curves = {
            m: {"mean": [p["mAP"] for p in rows], "std": [0.0] * len(rows)}
            for m, rows in r["rows"].items()
        }
        draw("kws_noise", "AF-KWS: test-time noise", "snr_db", r["points"], curves, "mAP")
    if "lookahead" in records:
        rows = records["lookahead"]["rows"]
        paths["lookahead"] = "figures/lookahead.png"
        figure, ax = plt.subplots(figsize=(6, 3.6))
        latency = [row["algorithmic_latency_s"] for row in rows]
        ax.plot(latency, [row["mAP"] for row in rows], marker="o", label="mAP")
        ax.plot(latency, [1 - row["FRR@5"] for row in rows], marker="s", label="1 - FRR@5")
        for row, x in zip(rows, latency, strict=True):
            ax.annotate(f"delay {row['delay']}", (x, row["mAP"]), fontsize=7)
        _save(
            figure,
            ax,
            os.path.join(folder, paths["lookahead"]),
            title="AF-KWS: look-ahead",
            xlabel="algorithmic latency (s)",
            ylabel="test split score",
        )
    if "unknown_class" in records:
        cells = records["unknown_class"]["cells"]
        paths["unknown_class"] = "figures/unknown_class.png"
        figure, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
        panels = (("mAP", "test split"), ("heldout_mAP", "held-out engine"))
        for ax, (key, split) in zip(axes, panels, strict=True):
            for colour, (utterances, chosen) in enumerate(_by_training_set(cells)):
                for m, style in zip(KWS_MODELS, ("-", "--"), strict=True):
                    ax.plot(
                        [c["steps"] for c in chosen],
                        [c[m][key] for c in chosen],
                        style,
                        color=f"C{colour}",
                        marker="o",
                        label=f"{m}, {utterances} utterances",
                    )
            ax.set_xscale("log")
            ticks = sorted({c["steps"] for c in cells})
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.minorticks_off()
            ax.set_xlabel("training steps")
            ax.set_ylabel(f"mAP ({split})")
            ax.grid(alpha=0.3)
        axes[1].legend(fontsize=7)
        figure.suptitle("AF-KWS: unknown class (solid) and without it (dashed) against scale")
        _write(figure, os.path.join(folder, paths["unknown_class"]))
    return paths


def _by_training_set(cells: list[dict]) -> list[tuple[str, list[dict]]]:
    """The unknown-class cells grouped by training set (corpus and share), in cell order,
    each labelled with its utterance count."""
    groups: dict[tuple, list[dict]] = {}
    for cell in cells:
        groups.setdefault((cell.get("dataset"), cell["train_fraction"]), []).append(cell)
    return [(str(chosen[0]["training_utterances"]), chosen) for chosen in groups.values()]


def compare(a: dict, b: dict) -> str:
    """ "holds" when a's mean exceeds b's by more than both stds together, "reversed" in
    the other direction, else "not shown" (within the spread over folds)."""
    spread = a["std"] + b["std"]
    if a["mean"] - b["mean"] > spread:
        return "holds"
    if b["mean"] - a["mean"] > spread:
        return "reversed"
    return "not shown"


def claims(records: dict, base: dict | None) -> list[dict]:
    """The papers' claims that the studies run here speak to, each with its verdict and
    the numbers behind it."""
    found = []

    def add(claim, verdict, evidence, figure=None):
        found.append({"claim": claim, "verdict": verdict, "evidence": evidence, "figure": figure})

    if base is not None:
        mm, audio, text = (_fold_summary(base, m)["timestep_f1"] for m in NEURAL)
        verdict = compare(mm, audio)
        add(
            "MultiQT: text and audio together beat audio alone (in-engine)",
            verdict,
            f"TIMESTEP F1 multimodal {_ms(mm)}, audio-only {_ms(audio)}, text-only {_ms(text)}",
        )
        held = [_fold_summary(base, m, heldout=True).get("timestep_f1") for m in NEURAL]
        if all(held):
            add(
                "MultiQT: text and audio together beat audio alone on an unheard synthesiser",
                compare(held[0], held[1]),
                f"held-out engine TIMESTEP F1 multimodal {_ms(held[0])}, audio-only "
                f"{_ms(held[1])}, text-only {_ms(held[2])}",
            )
    if "asr_quality" in records:
        r = records["asr_quality"]
        oracle, recognised = (
            r["rows"][0],
            next(row for row in r["rows"] if row["variant"] == "base"),
        )
        add(
            "MultiQT: better transcripts make the text modality useful",
            compare(oracle["text"]["timestep_f1"], recognised["text"]["timestep_f1"]),
            f"text-only TIMESTEP F1 {_ms(oracle['text']['timestep_f1'])} on the oracle "
            f"transcript (WER {oracle['wer']:.2f}) against "
            f"{_ms(recognised['text']['timestep_f1'])} on the recogniser's causal stream "
            f"(WER {recognised['wer']:.2f}); multimodal {_ms(oracle['multimodal']['timestep_f1'])}"
            f" against {_ms(recognised['multimodal']['timestep_f1'])}; audio-only "
            f"{_ms(r['audio']['timestep_f1'])}"
            + "".join(
                f"; {row['stream']} (WER {row['wer']:.2f}): text-only "
                f"{_ms(row['text']['timestep_f1'])}"
                for row in r["rows"]
                if row["variant"].startswith("asr-")
            ),
            "figures/asr_quality.png",
        )
    if "noise" in records:
        r = records["noise"]
        curves = r["curves"]["timestep_f1"]
        last = len(r["points"]) - 1
        at = lambda m, i: {"mean": curves[m]["mean"][i], "std": curves[m]["std"][i]}  # noqa: E731
        add(
            f"MultiQT: text keeps the multimodal model up when the audio is noisy "
            f"({r['points'][last]} dB)",
            compare(at("multimodal", last), at("audio", last)),
            f"TIMESTEP F1 at {r['points'][last]} dB: multimodal {_ms(at('multimodal', last))}, "
            f"audio-only {_ms(at('audio', last))} (clean: {_ms(at('multimodal', 0))} and "
            f"{_ms(at('audio', 0))})",
            "figures/noise.png",
        )
    if "text_lag" in records:
        r = records["text_lag"]
        text = r["curves"]["timestep_f1"]["text"]
        first = {"mean": text["mean"][0], "std": text["std"][0]}
        last = {"mean": text["mean"][-1], "std": text["std"][-1]}
        add(
            f"MultiQT: the text modality's value depends on when words arrive "
            f"({r['points'][0]:g} s against {r['points'][-1]:g} s of lag)",
            compare(first, last),
            f"text-only TIMESTEP F1 {_ms(first)} -> {_ms(last)}; offline text "
            f"{_ms(r['offline']['text']['timestep_f1'])}",
            "figures/text_lag.png",
        )
    if "missing_modality" in records:
        rows = records["missing_modality"]["rows"]
        dropout, plain = (rows[k] for k in list(rows)[:2])
        add(
            "MultiQT: modality dropout keeps the multimodal model working when its text is missing",
            compare(dropout["text missing"]["timestep_f1"], plain["text missing"]["timestep_f1"]),
            f"text missing: {_ms(dropout['text missing']['timestep_f1'])} with dropout, "
            f"{_ms(plain['text missing']['timestep_f1'])} without; audio missing: "
            f"{_ms(dropout['audio missing']['timestep_f1'])} and "
            f"{_ms(plain['audio missing']['timestep_f1'])}",
        )
    if "smoothing" in records:
        r = records["smoothing"]
        f1 = r["curves"]["instance_f1"]["multimodal"]
        best = int(np.argmax(f1["mean"]))
        add(
            "MultiQT: a causal minimum-duration rule repairs INSTANCE precision at a small "
            "latency cost",
            compare(
                {"mean": f1["mean"][best], "std": f1["std"][best]},
                {"mean": f1["mean"][0], "std": f1["std"][0]},
            ),
            f"multimodal INSTANCE F1 raw {f1['mean'][0]:.3f} -> {f1['mean'][best]:.3f} at "
            f"{r['points'][best]} frames (declared latency "
            f"{r['declared_latency_s'][best] * 1000:.0f} ms)",
            "figures/smoothing.png",
        )
    if "unknown_class" in records:
        cells = records["unknown_class"]["cells"]
        for claim, key, split in (
            ("AF-KWS: the unknown class improves mAP", "mAP", "test"),
            (
                "AF-KWS: the unknown class improves mAP on an unheard synthesiser",
                "heldout_mAP",
                "held-out engine",
            ),
        ):
            pairs = [
                (c, _scores_of(c["afkws"], key), _scores_of(c["afkws_no_unknown"], key))
                for c in cells
            ]
            pairs = [(c, a, b) for c, a, b in pairs if None not in (a["mAP"], b["mAP"])]
            if not pairs:
                continue
            signs = [
                f"{c['training_utterances']} utterances, {c['steps']} steps: "
                f"{a['mAP']:.3f} vs {b['mAP']:.3f}"
                for c, a, b in pairs
            ]
            wins = sum(_beats(a, b) for _, a, b in pairs)
            losses = sum(_beats(b, a) for _, a, b in pairs)
            verdict = (
                "holds"
                if wins == len(pairs)
                else "reversed"
                if losses == len(pairs)
                else ("depends on scale" if wins and losses else "not shown")
            )
            add(
                claim,
                verdict,
                f"{split} mAP with vs without: " + "; ".join(signs) + f" (of {len(pairs)} "
                f"cells, with it above the other's 95 % interval in {wins}, without it in "
                f"{losses})",
                "figures/unknown_class.png",
            )
    if "lookahead" in records:
        rows = records["lookahead"]["rows"]
        gain = rows[-1]["mAP"] - rows[0]["mAP"]
        add(
            "AF-KWS: more look-ahead buys accuracy at the cost of latency",
            "holds" if gain > 0.02 else "reversed" if gain < -0.02 else "not shown",
            ", ".join(
                f"delay {r['delay']}: mAP {r['mAP']:.3f} at "
                f"{r['algorithmic_latency_s'] * 1000:.0f} ms"
                for r in rows
            ),
            "figures/lookahead.png",
        )
    return found


def _scores_of(model: dict, key: str) -> dict:
    """An unknown-class cell's model entry as {"mAP", "mAP_interval"} of the test split
    (key "mAP") or the held-out engine (key "heldout_mAP")."""
    if key == "mAP":
        return model
    return {"mAP": model.get(key), "mAP_interval": model.get(f"{key}_interval")}


def _beats(a: dict, b: dict) -> bool:
    """a's mAP above b's 95 % interval (or above b's mAP where there is none)."""
    interval = b.get("mAP_interval")
    return a["mAP"] > (interval[1] if interval else b["mAP"])


def _ms(value: dict) -> str:
    return f"{value['mean']:.3f} ± {value['std']:.3f}"


# --------------------------------------------------------------------------- report


def _latency_text(latency: dict) -> str:
    if latency["median_s"] is None:
        return "n/a"
    return f"{latency['median_s']:.2f} / {latency['p90_s']:.2f} s"


def _curve_table(record: dict, metric: str, header: str) -> list[str]:
    points = [p if isinstance(p, str) else f"{p:g}" for p in record["points"]]
    lines = [
        "| model | " + " | ".join(f"{header} {p}" for p in points) + " |",
        "|---" * (len(points) + 1) + "|",
    ]
    for name, curve in record["curves"][metric].items():
        cells = [f"{m:.3f} ± {s:.3f}" for m, s in zip(curve["mean"], curve["std"], strict=True)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def report(payload: dict, paths: dict) -> str:
    """studies.md: the verdicts first, then one section per study."""
    records = payload["studies"]
    lines = [
        "# Studies",
        "",
        f"Preset `{payload['preset']}`; corpora `{payload['corpora']['multiqt']}` and "
        f"`{payload['corpora']['cskws']}`"
        + "".join(f", `{name}`" for name in payload["corpora"].get("cskws_larger", ()))
        + f". MultiQT scores are mean ± std over "
        f"{payload['num_folds']} folds (each fold's model on its own test fold); AF-KWS "
        "scores are on the test split, with the 95 % bootstrap interval over test "
        "utterances where the experiment measured one. Seconds per study: "
        + ", ".join(f"{k} {v:.0f}" for k, v in payload["seconds"].items())
        + ".",
        "",
        "## The papers' claims on this data",
        "",
        "| claim | verdict | evidence |",
        "|---|---|---|",
    ]
    for claim in payload["claims"]:
        figure = f" ([figure]({claim['figure']}))" if claim["figure"] else ""
        lines.append(f"| {claim['claim']} | **{claim['verdict']}** | {claim['evidence']}{figure} |")
    lines += [
        "",
        'Verdicts: MultiQT, "holds" when the difference of means exceeds the two '
        'stds over folds together, "reversed" the other way, "not shown" within '
        "that spread; AF-KWS unknown class, a win is a mAP above the other model's "
        "95 % interval.",
        "",
    ]
    if "asr_quality" in records:
        r = records["asr_quality"]
        lines += [
            "## ASR quality: word error rate of the text stream",
            "",
            "The oracle stream is the transcript the synthesiser spoke, each word emitted "
            "at its true end (a perfect streaming recogniser); substituted streams replace "
            "that share of its words by other words of the same call. The worse "
            "recognisers hear the same call audio through a narrow-band telephone line, "
            "decode it with smaller beams, or with a unigram language model of the "
            "same text (`multiqt_jax.datasets.render.RECOGNIZER_VARIANTS`). "
            "WER is measured against the oracle words over every call of the corpus. "
            "Each stream's models are trained and tested on it.",
            "",
            "| text stream | causal | WER | multimodal TIMESTEP F1 | text-only TIMESTEP F1 "
            "| multimodal INSTANCE F1 | text-only INSTANCE F1 |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in r["rows"]:
            lines.append(
                f"| {row['stream']} | {'yes' if row['causal'] else 'no'} | {row['wer']:.3f} | "
                f"{_ms(row['multimodal']['timestep_f1'])} | {_ms(row['text']['timestep_f1'])} | "
                f"{_ms(row['multimodal']['instance_f1'])} | {_ms(row['text']['instance_f1'])} |"
            )
        lines += [
            "",
            f"Audio-only (reads no text): TIMESTEP F1 {_ms(r['audio']['timestep_f1'])}.",
            "",
            f"![ASR quality]({paths['asr_quality']})",
            "",
        ]
    if "text_lag" in records:
        r = records["text_lag"]
        lines += [
            "## ASR timing: word emission lag",
            "",
            "Every recognised word reaches the models this many seconds after the "
            "recogniser emitted it (trained and tested so). The audio-only model "
            "reads no text (its row repeats the base model).",
            "",
        ]
        lines += _curve_table(r, "timestep_f1", "TIMESTEP F1, lag")
        lines += [
            "",
            "Offline text (words at their recognised times, not causal): "
            + ", ".join(f"{m} {_ms(v['timestep_f1'])}" for m, v in r["offline"].items()),
            "",
            f"![text lag]({paths['text_lag']})",
            "",
        ]
    if "noise" in records:
        r = records["noise"]
        lines += [
            "## Noise at test time",
            "",
            "Feature-domain noise (`speechkit.augment.mix_noise`) at each SNR "
            "relative to the call's mean band energy; only the audio is degraded, "
            "the text stream stays as the corpus's recogniser produced it. "
            f"Noise-trained: {r['matched_snr_db'][0]:g}-{r['matched_snr_db'][1]:g} dB "
            "in every training call.",
            "",
        ]
        lines += _curve_table(r, "timestep_f1", "TIMESTEP F1,")
        lines += ["", f"![noise]({paths['noise']})", ""]
    if "data_size" in records:
        r = records["data_size"]
        lines += ["## Training-data size", "", "Share of each fold's training calls.", ""]
        lines += _curve_table(r, "timestep_f1", "TIMESTEP F1,")
        if r["heldout_curves"]["timestep_f1"]:
            lines += ["", "On the held-out engine's calls:", ""]
            lines += _curve_table(
                {**r, "curves": r["heldout_curves"]}, "timestep_f1", "TIMESTEP F1,"
            )
        lines += ["", f"![data size]({paths['data_size']})", ""]
    if "missing_modality" in records:
        r = records["missing_modality"]
        lines += [
            "## Missing modality at test time",
            "",
            "| model | " + " | ".join(r["conditions"]) + " |",
            "|---" * (len(r["conditions"]) + 1) + "|",
        ]
        for name, row in r["rows"].items():
            cells = [_ms(row[c]["timestep_f1"]) if c in row else "" for c in r["conditions"]]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", "(TIMESTEP F1; the single-modality models as trained, for comparison.)", ""]
    if "smoothing" in records:
        r = records["smoothing"]
        lines += [
            "## INSTANCE fragmentation: minimum-duration smoothing",
            "",
            "| model | min_frames | declared latency | INSTANCE P | INSTANCE R | "
            "INSTANCE F1 | TIMESTEP F1 | tracking latency median / p90 |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name in r["curves"]["instance_f1"]:
            for i, k in enumerate(r["points"]):
                cell = lambda metric, i=i, name=name: (  # noqa: E731
                    f"{r['curves'][metric][name]['mean'][i]:.3f}"
                )
                lines.append(
                    f"| {name} | {k} | {r['declared_latency_s'][i] * 1000:.0f} ms | "
                    f"{cell('instance_precision')} | {cell('instance_recall')} | "
                    f"{cell('instance_f1')} | {cell('timestep_f1')} | "
                    f"{_latency_text(r['latency'][name][i])} |"
                )
        lines += [
            "",
            "Tracking latency: gold onset to the first frame labelled with the "
            "instance's class, over the found instances of every fold "
            "(`metrics.tracking_latency`).",
            "",
            f"![smoothing]({paths['smoothing']})",
            "",
        ]
    if "unknown_class" in records:
        lines += [
            "## AF-KWS: unknown class against scale",
            "",
            "| corpus | data share (utterances) | steps | afkws mAP | no-unknown mAP | afkws "
            "held-out mAP | no-unknown held-out mAP |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in records["unknown_class"]["cells"]:
            a, b = c["afkws"], c["afkws_no_unknown"]
            lines.append(
                f"| {c.get('dataset', payload['corpora']['cskws'])} | "
                f"{c['train_fraction']:g} ({c['training_utterances']}) | {c['steps']} | "
                f"{_map_text(a)} | {_map_text(b)} | "
                f"{_map_text(_scores_of(a, 'heldout_mAP'))} | "
                f"{_map_text(_scores_of(b, 'heldout_mAP'))} |"
            )
        lines += ["", f"![unknown class]({paths['unknown_class']})", ""]
    if "lookahead" in records:
        lines += [
            "## AF-KWS: look-ahead",
            "",
            "| delay (frames) | algorithmic latency | mAP | AP@0.05 | FRR@5 | "
            "detection latency median / p90 |",
            "|---|---|---|---|---|---|",
        ]
        for row in records["lookahead"]["rows"]:
            lines.append(
                f"| {row['delay']} | {row['algorithmic_latency_s'] * 1000:.0f} ms | "
                f"{row['mAP']:.3f} | {row['AP@0.05']:.3f} | {row['FRR@5']:.3f} | "
                f"{_latency_text(row['latency'])} |"
            )
        lines += [
            "",
            "Detection latency: emission by the streaming detector minus the "
            "keyword's true end (`metrics.detection_latency`, IoU 0.05 matches).",
            "",
            f"![look-ahead]({paths['lookahead']})",
            "",
        ]
    if "kws_noise" in records:
        r = records["kws_noise"]
        points = [p if isinstance(p, str) else f"{p:g} dB" for p in r["points"]]
        lines += [
            "## AF-KWS: noise at test time",
            "",
            "| model | " + " | ".join(points) + " |",
            "|---" * (len(points) + 1) + "|",
        ]
        for name, rows in r["rows"].items():
            lines.append(f"| {name} | " + " | ".join(f"{row['mAP']:.3f}" for row in rows) + " |")
        lines += [
            "",
            f"(mAP. Noise-trained: every crop at {r['matched_snr_db'][0]:g}-"
            f"{r['matched_snr_db'][1]:g} dB; the base models draw 5-30 dB on half "
            "their crops.)",
            "",
            f"![kws noise]({paths['kws_noise']})",
            "",
        ]
    return "\n".join(lines) + "\n"


def _map_text(scores: dict) -> str:
    if scores["mAP"] is None:
        return "n/a"
    interval = scores.get("mAP_interval")
    extra = f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
    return f"{scores['mAP']:.3f}{extra}"


def _number(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# ----------------------------------------------------------------------------- main


def selected(config) -> list[str]:
    names = [name.strip() for name in config.studies.split(",") if name.strip()]
    unknown = [name for name in names if name not in STUDIES]
    if unknown or not names:
        raise ValueError(f"config.studies: expected some of {STUDIES}, got {config.studies!r}")
    return names


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    names = selected(config)
    os.makedirs(workdir, exist_ok=True)
    studies = Studies(config, workdir)
    records, seconds = {}, {}
    base = None
    if any(name in MULTIQT_STUDIES for name in names):
        base, _, _ = studies.runs.multiqt("base")
    for name in names:
        started = time.perf_counter()
        log(f"study {name}")
        records[name] = getattr(studies, name)()
        seconds[name] = time.perf_counter() - started
        log(f"study {name} done ({seconds[name]:.0f} s)")
    paths = figures(records, workdir)
    payload = {
        "preset": config.preset,
        "corpora": {
            "multiqt": f"synthetic_calls/{multiqt.corpus_name(config.multiqt)}",
            "cskws": config.cskws.dataset,
            # the unknown_class study's larger corpora
            "cskws_larger": unknown_class_corpora(config)[1:] if "unknown_class" in names else [],
        },
        "num_folds": config.multiqt.num_folds,
        "seconds": seconds,
        "studies": records,
        "figures": paths,
        "claims": claims(records, base),
    }
    files.write_json(os.path.join(workdir, "studies.json"), payload)
    path = os.path.join(workdir, "studies.md")
    with open(path + ".tmp", "w") as handle:
        handle.write(report(payload, paths))
    os.replace(path + ".tmp", path)
    for claim in payload["claims"]:
        print(f"{claim['verdict']:>16}  {claim['claim']}")
    log(f"report: {path}")
    return payload


def _run_with_cache(config, workdir: str) -> dict:
    cache = common.compilation_cache(os.path.join(workdir, "jax_cache"))
    log(f"compiled programs cached in {cache}")
    return train_and_evaluate(config, workdir)


def main(argv) -> None:
    del argv
    common.cli_main(_run_with_cache, _CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
    _CONFIG = config_flags.DEFINE_config_file(
        "config", None, "experiments/configs/studies.py:PRESET"
    )
    _WORKDIR = flags.DEFINE_string("workdir", None, "output folder")
    app.run(main)
