r"""Studies: when each modality, the unknown class and the look-ahead help, and how late.

    python -m experiments.studies --config=experiments/configs/studies.py:quick \
        --workdir=outputs/studies --config.data_dir=outputs/tensorflow_datasets
    python -m experiments.studies --config=experiments/configs/studies.py:smoke \
        --workdir=/tmp/studies --config.studies=noise,lookahead

`train_and_evaluate(config, workdir)` runs each study of `config.studies`: it trains the
variants a study needs through `experiments.multiqt` and `experiments.cskws` (one
sub-workdir each under WORKDIR, so a rerun resumes), scores saved bundles again where a
study changes only the test input (`CallScorer`, `KeywordScorer`), and writes
WORKDIR/studies.json, WORKDIR/figures/<study>.png and WORKDIR/studies.md. What each study
sweeps and scores: docs/experiments.md, "Studies"; how they run: docs/architecture.md,
"The studies".
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from experiments import common, cskws, multiqt, multiqt_setup
from experiments.report import studies_md
from experiments.report.claims import claims
from experiments.report.figures import study_figures
from experiments.report.markdown import mean_std_text
from experiments.report.models import KWS_MODELS, NEURAL, fold_summary
from experiments.scoring import calls, evals, latency
from experiments.scoring import keywords as kws_scoring
from experiments.scoring.evaluators import tracking
from multiqt_jax import decode, input_pipeline, labels
from speechkit import augment, error_rates, files

MULTIQT_STUDIES = ("asr_quality", "text_lag", "noise", "data_size", "missing_modality", "smoothing")
KWS_STUDIES = ("unknown_class", "lookahead", "kws_noise")
STUDIES = MULTIQT_STUDIES + KWS_STUDIES
CLEAN = "clean"  # the snr_db axis label of the unaltered test input
log = common.logger("studies")


# ----------------------------------------------------------------- sub-experiments


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
            config = common.variant(self._base(task), overrides)
            folder = os.path.join(self.workdir, task, name)
            common.check_variant(folder, config)
            experiment = multiqt if task == "multiqt" else cskws
            log(f"{task} variant {name!r}: {overrides}")
            self._done[key] = (experiment.train_and_evaluate(config, folder), folder, config)
        return self._done[key]


# ------------------------------------------------------------------------- scoring


def _mean_std(values) -> dict:
    values = np.asarray(values, np.float64)
    return {"mean": float(np.nanmean(values)), "std": float(np.nanstd(values))}


class CallScorer:
    """Scores a MultiQT variant's fold bundles (`multiqt_jax.bundle`) on their own test
    folds through `experiments.scoring.calls`, with the test input altered (noise, a
    missing modality) and the labels smoothed at several rule lengths, in one pass per
    fold."""

    def __init__(self, config, source, index):
        self.config, self.source, self.index = config, source, index
        self.fold_ids = index.folds % config.num_folds
        self.num_classes = len(labels.classes(config.task))
        self.batching = multiqt_setup.call_batching(config)

    def score(self, folder: str, *, snr_db=None, present=None, smoothing=(1,)) -> dict:
        """{"per_fold": [{min_frames: scores}], "summary": {min_frames: row}} of the fold
        bundles in `folder` (`bundle-fold<k>`); `present` (audio, text) marks a modality
        missing in every call; `smoothing`: minimum-duration rule lengths (1 = raw)."""
        smoothers = {
            k: calls.smoother(decode.SmoothingConfig(min_frames=k)) for k in smoothing if k != 1
        }
        per_fold, lags = [], {k: ([], []) for k in smoothing}
        for fold in range(self.config.num_folds):
            predict, net, _ = calls.load_predictor(os.path.join(folder, f"bundle-fold{fold}"))
            hop_s = calls.output_hop_s(net)
            noise = None if snr_db is None else functools.partial(self._noisy, fold, float(snr_db))
            scored = calls.score_calls(
                _with_present(predict, present),
                self.source,
                np.flatnonzero(self.fold_ids == fold),
                self.index,
                self.batching,
                num_classes=self.num_classes,
                smoothers=smoothers,
                alter=noise,
                latency=True,
            )
            by_length = {k: scored["raw" if k == 1 else k] for k in smoothing}
            for k, found in by_length.items():
                lags[k][0].append(found.pop("latency_frames") * hop_s)
                lags[k][1].append(found.pop("latency_valid"))
            per_fold.append(by_length)
        summary = {
            k: {
                **{
                    f"{name}_{part}": _mean_std([f[k][name][part] for f in per_fold])
                    for name in calls.SCORES
                    for part in tracking.PARTS
                },
                "latency": latency.record(*lags[k]),
                "declared_latency_s": (k - 1) * hop_s,
            }
            for k in smoothing
        }
        return {"per_fold": per_fold, "summary": summary}

    def _noisy(self, fold: int, snr_db: float, position: int, batch: dict) -> dict:
        """Batch `position` of fold `fold`'s test calls with its audio at `snr_db`."""
        key = jax.random.key(self.config.seed * 100_003 + fold * 1009 + position)
        return _noisy(batch, key, snr_db)


def _with_present(predict, present):
    """`predict` with the modalities `present` (audio, text) in every call (None: both)."""
    if present is None:
        return predict
    return lambda batch: predict(
        batch, np.tile(np.asarray(present, bool), (batch["audio"].shape[0], 1))
    )


def _word_list(record, options) -> list[str]:
    return [w.word for w in input_pipeline.text_words(record, options)]


@jax.jit
def _noise_audio(audio, mask, key, snr_db):
    noisy = augment.mix_noise(audio, mask, key, snr_db)
    return jnp.where(mask[..., None], noisy, audio)


def _noisy(batch: dict, key, snr_db: float) -> dict:
    """A pipeline batch with its audio features at `snr_db` (padding unchanged)."""
    audio = _noise_audio(batch["audio"], batch["audio_mask"], key, jnp.float32(snr_db))
    return {**batch, "audio": audio}


class KeywordScorer:
    """Scores a CS-KWS variant's AF-KWS bundle on a split with the streaming detector
    (`experiments.scoring.keywords.score_streaming`), the features optionally at an SNR."""

    def __init__(self, config, sources, num_keywords: int):
        self.config, self.sources, self.num_keywords = config, sources, num_keywords

    def score(self, bundle_dir: str, *, split: str = "test", snr_db=None) -> dict:
        batches = kws_scoring.evaluation_batches(
            self.sources[split],
            num_keywords=self.num_keywords,
            batch_size=self.config.eval.batch_size,
        )
        if snr_db is not None:
            batches = [
                _noisy(batch, jax.random.key(self.config.seed * 100_003 + position), snr_db)
                for position, batch in enumerate(batches)
            ]
        return kws_scoring.score_streaming(bundle_dir, batches)


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
            source, index = multiqt_setup.load_corpus(base)
            self._calls = CallScorer(base, source, index)
        return self._calls

    def keywords(self) -> KeywordScorer:
        if self._keywords is None:
            _, _, base = self.runs.cskws("base")
            sources, keywords = cskws.load_corpus(base)
            sources.update(cskws.evaluation_sources(base, keywords))
            self._keywords = KeywordScorer(base, sources, len(keywords))
        return self._keywords

    # -- MultiQT
    def asr_quality(self) -> dict:
        """Text-reading models on text of known word error rate: the oracle transcript
        (the words said, each emitted at its end) with `config.sweeps.substitution_rate`
        of its words substituted, the corpus's recogniser causal and offline, and worse
        recognisers on the same audio (`config.sweeps.recognisers`, names of
        `multiqt_jax.datasets.render.RECOGNISER_VARIANTS` or "ctc", the CTC recogniser
        `config.multiqt.ctc_bundle`; causal)."""
        source = self.calls().source
        spoken = [
            _word_list(source[i], input_pipeline.TextAlterations("spoken"))
            for i in range(len(source))
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
            (f"recogniser {name}, causal", f"asr-{name}", {"text_recogniser": name})
            for name in self.config.sweeps.recognisers
        ]
        rows = []
        for label, name, overrides in streams:
            models = ",".join(NEURAL) if name == "base" else "multimodal,text"
            results, _, config = self.runs.multiqt(name, overrides, models=models)
            options = multiqt_setup.text_alterations(config)
            heard = multiqt_setup.load_corpus(config)[0] if config.text_recogniser else source
            said = [_word_list(heard[i], options) for i in range(len(heard))]
            row = {
                "stream": label,
                "variant": name,
                "causal": multiqt_setup.causal_text(config),
                "wer": error_rates.error_rate(spoken, said),
            }
            for model_name in ("multimodal", "text"):
                row[model_name] = fold_summary(results, multiqt_setup.row_name(model_name, config))
            rows.append(row)
            log(
                f"asr_quality: {label}: WER {row['wer']:.3f}, text-only TIMESTEP F1 "
                f"{mean_std_text(row['text']['timestep_f1'])}"
            )
        base_results, _, _ = self.runs.multiqt("base")
        return {"rows": rows, "audio": fold_summary(base_results, "audio")}

    def text_lag(self) -> dict:
        sweep = text_lag_variants(self.config)
        models = {name: [] for name in NEURAL}
        heldout = {name: [] for name in NEURAL}
        for _, variant_of_lag in sweep:
            results, _, _ = self.runs.multiqt(*variant_of_lag)
            base, _, _ = self.runs.multiqt("base")
            for model_name in NEURAL:  # the audio-only model reads no text: its base row
                source = results if model_name in results["models"] else base
                models[model_name].append(fold_summary(source, model_name))
                heldout[model_name].append(fold_summary(source, model_name, heldout=True))
        offline, _, _ = self.runs.multiqt(
            "offline", {"text_stream": "offline"}, models="multimodal,text"
        )
        return {
            **_sweep_record("text_lag_s", [lag for lag, _ in sweep], models, heldout),
            "offline": {m: fold_summary(offline, f"{m}@offline") for m in ("multimodal", "text")},
        }

    def noise(self) -> dict:
        points = [CLEAN] + [float(s) for s in self.config.sweeps.snr_db]
        matched = noise_matched_variant(self.config)
        matched_range = matched[1]["train.noise_snr_db"]
        rows = {}
        _, base_dir, _ = self.runs.multiqt("base")
        _, matched_dir, _ = self.runs.multiqt(*matched)
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
        sweep = data_size_variants(self.config)
        models = {name: [] for name in NEURAL}
        heldout = {name: [] for name in NEURAL}
        for _, variant_of_fraction in sweep:
            results, _, _ = self.runs.multiqt(*variant_of_fraction)
            for model_name in NEURAL:
                models[model_name].append(fold_summary(results, model_name))
                heldout[model_name].append(fold_summary(results, model_name, heldout=True))
        return _sweep_record("train_fraction", [f for f, _ in sweep], models, heldout)

    def missing_modality(self) -> dict:
        _, base_dir, base = self.runs.multiqt("base")
        _, plain_dir, _ = self.runs.multiqt(*NO_MODALITY_DROPOUT)
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


# A MultiQT variant: (folder name, config overrides, models).
NO_MODALITY_DROPOUT = ("no-modality-dropout", {"model.modality_dropout": 0.0}, "multimodal")


def data_size_variants(config) -> list[tuple[float, tuple]]:
    """(training share, variant) of the data-size study; the base variant at 1."""
    return [
        (f, ("base" if f == 1 else f"data{f:g}", {"train_fraction": f}, ",".join(NEURAL)))
        for f in sorted(float(f) for f in config.sweeps.train_fraction)
    ]


def text_lag_variants(config) -> list[tuple[float, tuple]]:
    """(lag in seconds, variant) of the text-lag study; the base variant at 0."""
    variants = []
    for lag in (float(s) for s in config.sweeps.text_lag_s):
        name, models = (
            ("base", ",".join(NEURAL)) if lag == 0 else (f"lag{lag:g}s", "multimodal,text")
        )
        variants.append((lag, (name, {"text_lag_s": lag}, models)))
    return variants


def noise_matched_variant(config) -> tuple:
    """The noise study's variant trained with noise in `config.sweeps.matched_snr_db`."""
    matched_range = tuple(float(s) for s in config.sweeps.matched_snr_db)
    return ("noise-matched", {"train.noise_snr_db": matched_range}, "multimodal,audio")


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
        heldout = scores.get(evals.HELDOUT, {})
        cell[m] = {
            "mAP": scores["mAP"],
            "mAP_interval": scores.get("intervals", {}).get("mAP"),
            "heldout_mAP": heldout.get("mAP"),
            "heldout_mAP_interval": heldout.get("intervals", {}).get("mAP"),
            "FRR@5": scores["FRR@5"],
        }
    return cell


# ----------------------------------------------------------------------------- main


def selected(config) -> list[str]:
    names = [name.strip() for name in config.studies.split(",") if name.strip()]
    unknown = [name for name in names if name not in STUDIES]
    if unknown or not names:
        raise ValueError(f"config.studies: expected some of {STUDIES}, got {config.studies!r}")
    return names


# The MultiQT studies whose variants (all but the base) the second process trains; this
# process waits for it before them. None of their variants is one that a study run
# here before the wait trains (asr_quality: the base, offline, oracle and recogniser
# variants), so no variant is trained by both processes.
BESIDE_MULTIQT = ("text_lag", "noise", "data_size", "missing_modality")


def beside_multiqt_variants(config, names: list[str]) -> list[tuple]:
    """The MultiQT variants of the `BESIDE_MULTIQT` studies among `names`, base left out."""
    variants = []
    if "data_size" in names:
        variants += [v for _, v in data_size_variants(config) if v[0] != "base"]
    if "missing_modality" in names:
        variants.append(NO_MODALITY_DROPOUT)
    if "text_lag" in names:
        variants += [v for _, v in text_lag_variants(config) if v[0] != "base"]
    if "noise" in names:
        variants.append(noise_matched_variant(config))
    return variants


def run_beside(config, workdir: str) -> tuple[dict, dict]:
    """The second process's share of `train_and_evaluate`: trains
    `beside_multiqt_variants`, then runs the selected AF-KWS studies; returns their
    (records, seconds)."""
    names = selected(config)
    studies = Studies(config, workdir)
    for variant in beside_multiqt_variants(config, names):
        studies.runs.multiqt(*variant)
    return _run_studies(studies, [name for name in names if name in KWS_STUDIES])


def _run_studies(studies: Studies, names: list[str]) -> tuple[dict, dict]:
    records, seconds = {}, {}
    for name in names:
        started = time.perf_counter()
        log(f"study {name}")
        records[name] = getattr(studies, name)()
        seconds[name] = time.perf_counter() - started
        log(f"study {name} done ({seconds[name]:.0f} s)")
    return records, seconds


def _second_process(config, names: list[str]) -> bool:
    """Whether `run_beside` runs in a second process: asked for, work on both sides (a
    MultiQT study here; an AF-KWS study or a `BESIDE_MULTIQT` variant there) and two or
    more cores."""
    there = any(n in KWS_STUDIES for n in names) or beside_multiqt_variants(config, names)
    here = any(n in MULTIQT_STUDIES for n in names)
    return bool(config.second_process) and here and bool(there) and (os.cpu_count() or 1) > 1


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    names = selected(config)
    os.makedirs(workdir, exist_ok=True)
    studies = Studies(config, workdir)
    records, seconds = {}, {}
    base = None
    with contextlib.ExitStack() as stack:
        beside = None
        if _second_process(config, names):
            log(f"the AF-KWS studies and variants of {', '.join(BESIDE_MULTIQT)}: second process")
            beside = stack.enter_context(
                common.Beside("experiments.studies", config, workdir, "run_beside")
            )
        if any(name in MULTIQT_STUDIES for name in names):
            base, _, _ = studies.runs.multiqt("base")
        for name in names:
            if beside is not None and (name in KWS_STUDIES or name in BESIDE_MULTIQT):
                (done, done_seconds), seconds["second_process"], _ = beside.result()
                records.update(done)
                seconds.update(done_seconds)
                beside = None
            if name not in records:
                done, done_seconds = _run_studies(studies, [name])
                records.update(done)
                seconds.update(done_seconds)
    records = {name: records[name] for name in names}
    paths = study_figures(records, workdir)
    payload = {
        "preset": config.preset,
        "corpora": {
            "multiqt": f"synthetic_calls/{multiqt_setup.corpus_name(config.multiqt)}",
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
    with files.atomic_open(path) as out:
        out.write(studies_md.report(payload, paths))
    for claim in payload["claims"]:
        print(f"{claim['verdict']:>16}  {claim['claim']}")
    log(f"report: {path}")
    return payload


if __name__ == "__main__":
    common.main(train_and_evaluate)
