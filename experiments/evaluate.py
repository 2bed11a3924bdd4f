r"""Scores a trained bundle on a corpus: the experiments' evaluators, without training.

    python -m experiments.evaluate --bundle=/tmp/cskws/afkws/bundle \
        --dataset=folder_kws/shipped --manual_dir=/data/my_keywords --workdir=/tmp/eval
    python -m experiments.evaluate --bundle=/tmp/multiqt/multimodal \
        --dataset=annotated_calls/questions --manual_dir=/data/my_calls --workdir=/tmp/eval

`stj-evaluate` is the same command. The task comes from the bundle's bundle.json: an
AF-KWS bundle is scored by `experiments.scoring.keywords.score_detector` (keywords
matched by name, operating points measured), a MultiQT bundle or folder of fold bundles
by `experiments.scoring.calls`, raw and smoothed. Writes WORKDIR/results.json (as the
training runner writes it) and prints a table; exit status 0 scored, 2 a bundle, corpus
or flags that cannot be used. The flags, splits and what each file holds:
docs/usage.md, "Scoring a model on your recordings".
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow_datasets as tfds
from absl import app, flags

from cskws_jax import bundle as kws_bundle
from cskws_jax import operating_points
from cskws_jax import train as kws_train
from cskws_jax.datasets import folder_kws, keyword_free, libritop20, synthetic_kws  # noqa: F401
from cskws_jax.datasets.features import FEATURES as KWS_FEATURES
from ctc_jax import bundle as ctc_bundle
from experiments import common, evals, multiqt
from experiments.scoring import calls
from experiments.scoring import keywords as kws_scoring
from multiqt_jax import bundle as calls_bundle
from multiqt_jax import decode, input_pipeline, labels
from multiqt_jax.datasets import annotated_calls, synthetic_calls  # noqa: F401 (registers)
from multiqt_jax.datasets.features import FEATURES as CALL_FEATURES
from multiqt_jax.datasets.features import NUM_FOLDS
from speechkit import batching, errors, files, prepared
from speechkit.bundle import MANIFEST, BundleError

KEYWORD_POLICIES = ("shared", "strict")
CROSS_VALIDATED_SPLIT = "train"  # the call corpora's split that experiments.multiqt folds
FOLD_BUNDLE = re.compile(r"bundle-fold(\d+)$")
BATCH_LENGTHS = "buckets"  # evaluation batches padded to a few lengths (speechkit.batching)

log = common.logger("evaluate")


class EvaluationError(errors.InvalidInput):
    """A bundle and a corpus that cannot be scored together; the message says why."""


# ----------------------------------------------------------------------------- inputs


def bundle_task(path: str) -> str:
    """The task of a bundle folder, or of the first fold bundle in a folder of them."""
    folders = bundle_folders(path)
    manifest = os.path.join(folders[0][1], MANIFEST)
    try:
        payload = files.load_json(manifest)
    except files.JsonFileError as err:
        raise BundleError(str(err)) from None
    task = payload.get("task") if isinstance(payload, dict) else None
    if task not in (kws_bundle.TASK, calls_bundle.TASK):
        raise BundleError(f"{manifest}: task: {task!r} is not one this runner scores")
    return task


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


def corpus_builder(name: str, data_dir: str):
    """The TFDS builder of corpus `name` (e.g. "folder_kws/shipped") in `data_dir`."""
    try:
        return prepared.builder(name, data_dir=data_dir)
    except (tfds.core.registered.DatasetNotFoundError, ValueError) as err:
        raise EvaluationError(f"--dataset={name}: {err}") from None


def prepare(builder, manual_dir: str | None) -> None:
    """Builds the corpus: from `manual_dir` when one is given (always anew, the folder may
    have changed), else only when it is not prepared yet (synthetic corpora)."""
    if manual_dir:
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(
                manual_dir=manual_dir,
                download_mode=tfds.download.GenerateMode.REUSE_CACHE_IF_EXISTS,
            )
        )
    elif not builder.is_prepared():
        log(f"{builder.info.full_name}: not prepared in {builder.data_dir}, building it")
        builder.download_and_prepare()


def split_source(builder, split: str, *, slices: bool = False):
    """The data source of one split of a prepared corpus, whole or, with `slices` (a
    keyword corpus), a TFDS slice of it ("heldout[50%:]", as `experiments.evals` reads
    them)."""
    sources = builder.as_data_source()
    base = evals.base_split(split)
    if base not in sources:
        raise EvaluationError(f"{builder.name}: no {base!r} split (has {sorted(sources)})")
    if base == split:
        return sources[split]
    if not slices:  # a call corpus: a slice would cut across its cross-validation folds
        raise EvaluationError(f"--split: a call corpus is scored whole, got {split!r}")
    try:
        return builder.as_data_source(split=split)
    except ValueError as err:
        raise EvaluationError(f"--split: {split!r} of {builder.name}: {err}") from None


# ------------------------------------------------------------------------- keywords


@dataclasses.dataclass(frozen=True)
class KeywordMatch:
    """The keywords scored: those of both the bundle and the corpus, in the bundle's
    order, and each side's class id -> shared id (-1: dropped)."""

    scored: tuple[str, ...]
    bundle_only: tuple[str, ...]
    corpus_only: tuple[str, ...]
    bundle_to_scored: np.ndarray  # int32 [bundle keywords]
    corpus_to_scored: np.ndarray  # int32 [corpus keywords]

    @classmethod
    def of(cls, bundle_keywords, corpus_keywords, policy: str) -> KeywordMatch:
        if policy not in KEYWORD_POLICIES:
            raise EvaluationError(f"--keywords: expected one of {KEYWORD_POLICIES}, got {policy!r}")
        scored = tuple(k for k in bundle_keywords if k in corpus_keywords)
        match = cls(
            scored=scored,
            bundle_only=tuple(k for k in bundle_keywords if k not in scored),
            corpus_only=tuple(k for k in corpus_keywords if k not in scored),
            bundle_to_scored=_positions(bundle_keywords, scored),
            corpus_to_scored=_positions(corpus_keywords, scored),
        )
        if not scored:
            raise EvaluationError(
                f"no keyword in common: the bundle has {list(bundle_keywords)}, the corpus "
                f"{list(corpus_keywords)}"
            )
        if policy == "strict" and (match.bundle_only or match.corpus_only):
            raise EvaluationError(
                f"--keywords=strict: the bundle's keywords differ from the corpus's (only in "
                f"the bundle: {list(match.bundle_only)}; only in the corpus: "
                f"{list(match.corpus_only)})"
            )
        return match

    def report(self) -> dict:
        return {
            "scored": list(self.scored),
            "dropped_bundle_only": list(self.bundle_only),
            "dropped_corpus_only": list(self.corpus_only),
        }


def _positions(names, scored) -> np.ndarray:
    return np.array([scored.index(n) if n in scored else -1 for n in names], np.int32)


class ScoredKeywordSource:
    """A KWS data source whose keyword labels are the shared ids (`KeywordMatch`);
    occurrences of keywords the bundle lacks become invalid."""

    def __init__(self, source, corpus_to_scored: np.ndarray):
        self.source, self.table = source, corpus_to_scored

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> dict:
        record = dict(self.source[index])
        valid = np.asarray(record["keyword_valid"], bool)
        shared = self.table[np.asarray(record["keyword_label"], np.int64)]
        record["keyword_valid"] = valid & (shared >= 0)
        record["keyword_label"] = np.maximum(shared, 0).astype(np.int32)
        return record


def scored_detections(detections: dict, bundle_to_scored) -> dict:
    """Detections (label = bundle class id) with labels as shared ids; detections of
    keywords the corpus lacks become invalid."""
    shared = jnp.asarray(bundle_to_scored)[detections["label"]]
    return {
        **detections,
        "label": jnp.maximum(shared, 0),
        "valid": detections["valid"] & (shared >= 0),
    }


# ------------------------------------------------------------------------------ cskws


def bundle_detector(net, params, decoding, match: KeywordMatch):
    """detect(batch) of a loaded bundle, its detections labelled with the scored ids of
    `match` (jitted)."""

    @jax.jit
    def detect(params, batch):
        found = kws_train.detect(net, params, batch, decoding)
        return scored_detections(found, match.bundle_to_scored)

    return lambda batch: detect(params, batch)


def scored_thresholds(thresholds, match: KeywordMatch) -> tuple[float, ...]:
    """Per-keyword `thresholds` in the bundle's class order -> those of the scored
    keywords, in `match.scored` order (the dropped keywords' are left out)."""
    if len(thresholds) != len(match.bundle_to_scored):
        raise EvaluationError(
            f"thresholds: {len(thresholds)} values, expected one per bundle keyword "
            f"({len(match.bundle_to_scored)})"
        )
    scored = [0.0] * len(match.scored)
    for bundle_id, scored_id in enumerate(match.bundle_to_scored):
        if scored_id >= 0:
            scored[scored_id] = float(thresholds[bundle_id])
    return tuple(scored)


def kws_operating_points(folder: str, points, match: KeywordMatch, split: str) -> dict:
    """results.json's "operating_points": what each of the bundle's `points`
    (`cskws_jax.config.OperatingPoint`) gives on the detections that
    `experiments.scoring.keywords.score_detector` saved in `folder` (labels: scored ids);
    writes `folder/det.json` (the split's DET curves, named `split`)."""
    found, _ = kws_scoring.write_det(folder, match.scored, split)
    budgets = []
    for point in points:
        thresholds = scored_thresholds(point.thresholds, match)
        budgets.append(
            {
                "fa_per_hour": point.fa_per_hour,
                "chosen_on": point.split,
                "chosen_hours": point.hours,
                "allowed_false_alarms": operating_points.allowed_false_alarms(
                    point.fa_per_hour, found.hours
                ),
                "thresholds": dict(zip(match.scored, thresholds, strict=True)),
                "measured": operating_points.measure(found, thresholds),
            }
        )
    return {"split": split, "iou": found.iou, "hours": found.hours, "budgets": budgets}


def evaluate_kws(
    path: str,
    builder,
    source,
    settings,
    workdir: str,
    split: str = "test",
    batch_lengths: str = BATCH_LENGTHS,
) -> dict:
    """results.json's payload for a cskws bundle scored on a keyword corpus split
    (`split` names it in det.json and "operating_points"; `batch_lengths` as `evaluate`)."""
    net, params, info = kws_bundle.load(path)
    if info.features != KWS_FEATURES:
        raise EvaluationError(
            f"{path}: the bundle's front end {info.features} is not the keyword corpora's "
            f"{KWS_FEATURES}"
        )
    corpus_keywords = list(builder.info.metadata["keywords"])
    match = KeywordMatch.of(info.labels, corpus_keywords, settings.keywords)
    if match.bundle_only or match.corpus_only:
        log(
            f"scoring {len(match.scored)} shared keywords; dropped, only in the bundle: "
            f"{list(match.bundle_only)}, only in the corpus: {list(match.corpus_only)}"
        )
    scores = kws_scoring.score_detector(
        bundle_detector(net, params, info.decoding, match),
        ScoredKeywordSource(source, match.corpus_to_scored),
        num_keywords=len(match.scored),
        batch_size=settings.batch_size,
        folder=workdir,
        lengths=batch_lengths,
    )
    per_keyword = scores.pop("AP_per_keyword@0.05")
    points = info.decoding.operating_points
    if not points:
        log(f"{path}: the bundle stores no operating points; none measured")
    return {
        "keywords": match.report(),
        "utterances": len(source),
        "scores": _finite_or_none(scores),
        "AP_per_keyword@0.05": {
            k: _finite_or_none(v) for k, v in zip(match.scored, per_keyword, strict=True)
        },
        "operating_points": _finite_or_none(kws_operating_points(workdir, points, match, split)),
    }


def _finite_or_none(value):
    """`value` with every NaN and inf (no ground truth) as None, in nested dicts and
    lists too, so results.json stays strict JSON."""
    if isinstance(value, dict):
        return {key: _finite_or_none(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_none(v) for v in value]
    if isinstance(value, float | np.floating) and not np.isfinite(value):
        return None
    return value


def kws_table(payload: dict) -> str:
    """The experiment's score table, then AP@0.05 per scored keyword."""
    scores = {k: (np.nan if v is None else v) for k, v in payload["scores"].items()}
    lines = [kws_scoring.table({"bundle": scores}), "", f"{'keyword':<18}{'AP@0.05':>10}"]
    for keyword, ap in payload["AP_per_keyword@0.05"].items():
        lines.append(f"{keyword:<18}" + (f"{ap:>10.3f}" if ap is not None else f"{'-':>10}"))
    return "\n".join([*lines, "", operating_points_table(payload["operating_points"])])


def operating_points_table(summary: dict) -> str:
    """Per stored operating point: its budget, the false alarms it allows on the split's
    hours, and what its thresholds give there."""
    if not summary["budgets"]:
        return "operating points: none stored in the bundle"
    head = ("budget FA/h", "allowed FA", "false alarms", "FA/h", "miss rate")
    lines = [
        f"operating points on {summary['split']} ({summary['hours']:.4g} h)",
        "".join(f"{c:>13}" for c in head) + "  chosen on",
    ]
    for entry in summary["budgets"]:
        measured = entry["measured"]
        miss = measured["miss_rate"]
        lines.append(
            f"{entry['fa_per_hour']:>13g}{entry['allowed_false_alarms']:>13d}"
            f"{measured['false_alarms']:>13d}{measured['fa_per_hour']:>13.2f}"
            + (f"{miss:>13.3f}" if miss is not None else f"{'-':>13}")
            + f"  {entry['chosen_on'] or '?'}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- multiqt


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
    to `experiments.scoring.calls.score` (e.g. per_call=True); the early question frames
    are counted on the bundle's output clock. `batch_lengths` as `evaluate`."""
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
    scored = calls.score(
        predict,
        calls.eval_batches(source, chosen, index, batching),
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
    corpus (`experiments.multiqt.ctc_text`); otherwise the corpus's own words (a log line
    says so for another recogniser's)."""
    trained = info.decoding.text_recogniser
    if "text" not in net.config.modalities or not trained:
        return source
    if trained not in multiqt.CTC_TEXT:
        log(f"{path}: trained on recogniser {trained!r}'s words; scored on the corpus's own")
        return source
    recogniser = settings.ctc_bundle or ctc_bundle.SHIPPED
    log(f"{path}: text from the CTC recogniser {recogniser} ({trained})")
    posteriors = trained == multiqt.CTC_POSTERIORS
    if not settings.manual_dir:
        data_dir = common.data_dir(settings)
        return multiqt.ctc_text(source, dataset, split, data_dir, recogniser, posteriors)
    with tempfile.TemporaryDirectory() as scratch:  # a rebuilt folder: recognised afresh
        return multiqt.ctc_text(source, dataset, split, scratch, recogniser, posteriors)


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
    (`batch_lengths` as `evaluate`)."""
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


# ------------------------------------------------------------------------------- main


def evaluate(settings, workdir: str, batch_lengths: str = BATCH_LENGTHS) -> dict:
    """Scores `settings.bundle` on `settings.dataset`; writes WORKDIR/results.json.

    batch_lengths: how the evaluation batches are padded along time
    (`speechkit.batching.LENGTHS`): "buckets" (the default) to a few fixed lengths
    (pad_multiple x 2^k frames, masked), so that one compiled program of the model serves
    every batch of a bucket; "exact" to each batch's own length, one program per length
    (as before the buckets; `benchmarks.evaluate_speed` compares the two)."""
    batching.check_lengths(batch_lengths)
    os.makedirs(workdir, exist_ok=True)
    task = bundle_task(settings.bundle)
    kws = task == kws_bundle.TASK
    check_missing(settings.missing)
    if kws and settings.missing:
        raise EvaluationError("--missing: only a MultiQT bundle reads more than one modality")
    builder = corpus_builder(settings.dataset, common.data_dir(settings))
    _check_corpus_kind(builder, kws, settings.dataset)
    prepare(builder, settings.manual_dir)
    split = settings.split or ("test" if kws else "train")
    source = split_source(builder, split, slices=kws)
    started = time.perf_counter()
    if kws:
        result = evaluate_kws(
            settings.bundle,
            builder,
            source,
            settings,
            workdir,
            f"{settings.dataset}:{split}",
            batch_lengths,
        )
    else:
        result = evaluate_calls(
            settings.bundle, builder, source, settings, settings.dataset, split, batch_lengths
        )
        result["missing"] = settings.missing or None  # a modality marked missing in every call
        result["ctc_bundle"] = settings.ctc_bundle or ctc_bundle.SHIPPED  # what CTC-text reads
    payload = {
        "task": task,
        "bundle": os.path.abspath(settings.bundle),
        "dataset": settings.dataset,
        "split": split,
        **result,
        "seconds": time.perf_counter() - started,
    }
    files.write_json(os.path.join(workdir, "results.json"), payload)
    name = os.path.basename(os.path.normpath(settings.bundle))
    print(kws_table(payload) if kws else calls.table({name: payload["scores"]}))
    return payload


def _check_corpus_kind(builder, kws: bool, dataset: str) -> None:
    features = builder.info.features
    if kws and "keyword_label" not in features:
        raise EvaluationError(
            f"--dataset={dataset}: a cskws bundle needs a keyword corpus (synthetic_kws, "
            "libritop20, folder_kws)"
        )
    if not kws and "labels" not in features:
        raise EvaluationError(
            f"--dataset={dataset}: a multiqt bundle needs a call corpus (annotated_calls, "
            "synthetic_calls)"
        )


def _option(default, help_text: str):
    return dataclasses.field(default=default, metadata={"help": help_text})


@dataclasses.dataclass(frozen=True)
class Settings:
    """What to score and how; the command line has a flag per field (and --workdir)."""

    bundle: str = _option("", "a bundle folder, or a folder of bundle-fold<k>")
    dataset: str = _option("", "TFDS name with config, e.g. folder_kws/shipped")
    split: str = _option("", "default: test (keyword corpus), train (call corpus)")
    data_dir: str = _option("", "TFDS data folder (default ~/tensorflow_datasets)")
    manual_dir: str = _option("", "build the corpus from this folder first")
    keywords: str = _option("shared", f"keyword mismatch policy, one of {KEYWORD_POLICIES}")
    batch_size: int = _option(16, "utterances or calls per evaluation batch")
    num_folds: int = _option(NUM_FOLDS, "folds of the bundles' cross-validation")
    min_frames: int = _option(3, "MultiQT: frames a class must hold when smoothed (1: off)")
    missing: str = _option("", "MultiQT: mark this modality missing in every call (audio, text)")
    ctc_bundle: str = _option(
        "", "MultiQT: the CTC recogniser of a bundle trained on its text (default: the shipped)"
    )


_FLAGS = {
    field.name: (flags.DEFINE_integer if field.type == "int" else flags.DEFINE_string)(
        field.name, field.default, field.metadata["help"]
    )
    for field in dataclasses.fields(Settings)
}


def main(argv) -> None:
    del argv
    settings = Settings(**{name: flag.value for name, flag in _FLAGS.items()})
    if not settings.bundle or not settings.dataset or not common.WORKDIR.value:
        raise app.UsageError("--bundle, --dataset and --workdir are required")
    common.cli_main(evaluate, settings, common.WORKDIR.value)


if __name__ == "__main__":
    app.run(main)
