"""MultiQT scoring: a label predictor on a set of calls -> TIMESTEP / INSTANCE scores,
raw and after causal smoothing, and the summaries over folds that results.json holds.

    batching = calls.CallBatching(batch_size=4, causal_text=True)
    scored = calls.score_calls(
        predict, source, indices, index, batching,
        num_classes=7, smoothers=calls.smoothers(smoothing),
    )
    scored["raw"], scored["smoothed"]             # `experiments.scoring.evaluators.tracking` scores

`predict(batch)` -> (predicted int32 [B, To], gold, mask) on the model's 40 ms clock:
`multiqt_jax.train.predict` with a model's parameters, a baseline's sliding labels, or
`load_predictor(bundle folder)`. The runner (`experiments.multiqt`), `experiments.evaluate`
and the studies all score a fold's calls through `score_calls`, each choosing the calls,
batching, smoothers and predictor; its core is the tracking evaluator. Folds scored by
several processes are gathered as pytrees (`gather_folds`).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
from jax.experimental import multihost_utils

import metrics
from experiments import common
from experiments.scoring.evaluators import tracking
from multiqt_jax import bundle as calls_bundle
from multiqt_jax import decode, input_pipeline, model
from multiqt_jax import train as calls_train
from speechkit import batching as speechkit_batching

SCORES = tracking.SCORES
SMOOTHED = "smoothed"  # the smoothed labels, scored next to the raw ones
LABEL_STREAMS = ("raw", SMOOTHED)  # the labels every model is scored on
TRANSFER = {"timestep_f1": ("timestep", "f1"), "instance_f1": ("instance", "f1")}


@dataclasses.dataclass(frozen=True)
class CallBatching:
    """How calls are batched for scoring: `batch_size` calls per batch, in the given
    order and unshuffled, padded to `pad_multiple` 10 ms frames, the text streamed
    causally or not (`causal_text`) and altered as `text` says. `lengths`
    (`speechkit.batching.LENGTHS`): "buckets" pads each batch further to
    `speechkit.batching.bucket_length` frames (pad_multiple x 2^k), masked, so that a
    set of calls takes a few batch shapes (a few compiled programs)."""

    batch_size: int
    pad_multiple: int = 500
    causal_text: bool = True
    text: input_pipeline.TextAlterations = input_pipeline.TextAlterations()
    lengths: str = "exact"

    def __post_init__(self):
        speechkit_batching.check_lengths(self.lengths)


def eval_batches(source, indices, index, batching: CallBatching):
    """Evaluation batches of the calls `indices` of `source` (`index`: its
    `multiqt_jax.input_pipeline.CorpusIndex`), in that order (padded to buckets when
    `batching.lengths` says so, `bucketed`)."""
    pipeline = input_pipeline.PipelineConfig(
        batch_size=batching.batch_size,
        shuffle=False,
        bucket_window=1,
        pad_multiple=batching.pad_multiple,
        causal_text=batching.causal_text,
        text=batching.text,
    )
    batches = input_pipeline.batches(source, pipeline, indices=indices, index=index)
    if batching.lengths == "exact":
        return batches
    return batches.map(functools.partial(bucketed, multiple=batching.pad_multiple))


def bucketed(batch: dict, multiple: int) -> dict:
    """A call batch with its 10 ms fields (audio, audio_mask, labels: [B, Ta, ...]) padded
    to Ta' = `speechkit.batching.bucket_length(Ta, multiple)` frames and its 20 ms text
    fields (text, text_mask) to Ta' // 2, the added steps masked (labels 0)."""
    frames = speechkit_batching.bucket_length(batch["audio"].shape[1], multiple)
    return speechkit_batching.pad_steps(
        batch,
        {
            "audio": frames,
            "audio_mask": frames,
            "labels": frames,
            "text": frames // 2,
            "text_mask": frames // 2,
        },
    )


def smoothing_record(settings: decode.SmoothingConfig, hop_s: float) -> dict:
    """The smoothing rule and its declared latency at `hop_s` seconds per output frame,
    as results.json reports them."""
    return {
        **dataclasses.asdict(settings),
        "latency_frames": settings.latency_frames,
        "latency_ms": round(settings.latency_frames * hop_s * 1000, 3),
    }


@functools.cache
def smoother(settings: decode.SmoothingConfig):
    """`decode.smooth(pred int32 [B, T], mask bool [B, T])` with `settings`, jitted."""
    return jax.jit(functools.partial(decode.smooth, config=settings))


def smoothers(settings: decode.SmoothingConfig) -> dict:
    """{SMOOTHED: the jitted smoother}: what every model is scored under beside "raw"."""
    return {SMOOTHED: smoother(settings)}


def score_calls(
    predict,
    source,
    indices,
    index,
    batching: CallBatching,
    *,
    num_classes: int,
    smoothers: dict,
    alter=None,
    latency: bool = False,
    per_call: bool = False,
    hop_s: float | None = None,
) -> dict:
    """{"raw": scores, name: scores for each of `smoothers`} of `predict` on the calls
    `indices` of `source` (`index`: its `multiqt_jax.input_pipeline.CorpusIndex`), batched
    by `batching` (`eval_batches`): one fold's test calls, or every call of an
    evaluation's split (`experiments.scoring.evaluators.tracking.evaluate_smoothed`).
    `alter(position, batch)` -> the batch scored in its place (e.g. with noise in its
    audio). With `latency`, each also holds the tracking latencies of its found instances
    in output frames, with `per_call` each call's counts ("per_call", for
    `tracking.bootstrap_intervals`), with `hop_s` (seconds per predicted frame,
    `output_hop_s`) the early question frames ("early_frames")."""
    batches = eval_batches(source, indices, index, batching)
    if alter is not None:
        batches = [alter(position, batch) for position, batch in enumerate(batches)]
    return tracking.evaluate_smoothed(
        predict,
        batches,
        num_classes=num_classes,
        smoothers=smoothers,
        latency=latency,
        per_call=per_call,
        hop_s=hop_s,
    )


@functools.cache
def _jitted_predict(config: model.MultiQTConfig):
    return jax.jit(functools.partial(calls_train.predict, model.MultiQT(config)))


def load_predictor(path: str):
    """(predict(batch, present=None), net, bundle info) of a MultiQT bundle folder;
    `present` bool [B, 2] marks a modality missing. Bundles of one model config share
    one compiled predictor."""
    net, params, info = calls_bundle.load(path)
    jitted = _jitted_predict(net.config)
    return (lambda batch, present=None: jitted(params, batch, present)), net, info


def predictor(net, params):
    """predict(batch) of a model with `params` (jitted once per model config)."""
    jitted = _jitted_predict(net.config)
    return lambda batch: jitted(params, batch)


def output_hop_s(net) -> float:
    """Seconds per output frame of a MultiQT model."""
    return model.streaming_spec(net.config).output_hop_s


# ------------------------------------------------------------------ folds and summaries


EARLY_FIELDS = ("margin_s", "hop_s", "early", "predicted")  # what the folds' pytrees carry


def _as_arrays(scores: dict) -> dict:
    """One label stream's scores as a pytree of float64 arrays (absent classes as NaN)."""
    per_class = [np.nan if v is None else v for v in scores["timestep_f1_per_class"]]
    return {
        **{s: {p: np.float64(scores[s][p]) for p in tracking.PARTS} for s in SCORES},
        "timestep_f1_per_class": np.asarray(per_class, np.float64),
        tracking.EARLY: _early_arrays(scores.get(tracking.EARLY), len(per_class)),
    }


def _early_arrays(early: dict | None, num_classes: int) -> dict:
    """The early-frame counts and settings of one label stream's scores as float64
    arrays; all NaN where it has none (`_from_arrays` then leaves them out)."""
    if early is None:
        early = {"margin_s": np.nan, "hop_s": np.nan}
        early["early"] = early["predicted"] = np.full(num_classes, np.nan)
    return {k: np.asarray(early[k], np.float64) for k in EARLY_FIELDS}


def _from_arrays(arrays: dict) -> dict:
    scores = {
        **{s: {p: float(arrays[s][p]) for p in tracking.PARTS} for s in SCORES},
        "timestep_f1_per_class": [
            None if np.isnan(v) else float(v) for v in arrays["timestep_f1_per_class"]
        ],
    }
    early = arrays[tracking.EARLY]
    if not np.isnan(early["margin_s"]):
        scores[tracking.EARLY] = _early_record(
            [early["early"]], [early["predicted"]], early["margin_s"], early["hop_s"]
        )
    return scores


def _early_record(early, predicted, margin_s, hop_s) -> dict:
    """`tracking.early_frames_record` of the counts of folds (lists of [C]) summed. The
    settings are rounded to the microsecond: between processes the folds' pytrees travel
    as float32 (`process_allgather`), which would make 0.04 s 0.03999999910593033."""
    counts = (
        np.sum(np.asarray(c, np.float64), axis=0).astype(np.int32) for c in (early, predicted)
    )
    return tracking.early_frames_record(
        metrics.EarlyFrameCounts(*counts),
        margin_s=round(float(margin_s), 6),
        hop_s=round(float(hop_s), 6),
    )


def _empty(names, num_classes: int) -> dict:
    blank = {s: {p: np.nan for p in tracking.PARTS} for s in SCORES}
    blank["timestep_f1_per_class"] = [None] * num_classes
    return {name: _as_arrays(blank) for name in names}


def gather_folds(mine: dict[int, dict], names, num_folds: int, num_classes: int) -> dict:
    """This process's {fold: {stream: scores}} -> {stream: every fold's scores, in
    fold order} on every process, for each label stream of `names` (given, not read from
    `mine`: a process that owns no fold still joins the all-gather). The scores travel as
    one pytree of arrays [processes, folds, ...] (`process_allgather`); each fold is
    taken from the process that scored it."""
    table = {
        name: jax.tree_util.tree_map(lambda leaf: np.stack([leaf] * num_folds), tree)
        for name, tree in _empty(names, num_classes).items()
    }
    owned = np.zeros(num_folds, bool)
    for fold, scored in mine.items():
        owned[fold] = True
        for name in names:
            arrays = _as_arrays(scored[name])
            table[name] = jax.tree_util.tree_map(
                lambda column, value, f=fold: _set_row(column, f, value), table[name], arrays
            )
    if jax.process_count() > 1:
        tables, owners = multihost_utils.process_allgather((table, owned))
        owner = np.argmax(owners, axis=0)  # [folds]: the process that scored each fold
        table = jax.tree_util.tree_map(lambda t: t[owner, np.arange(num_folds)], tables)
    return {
        name: [
            _from_arrays(jax.tree_util.tree_map(lambda column, f=f: column[f], table[name]))
            for f in range(num_folds)
        ]
        for name in names
    }


def _set_row(column: np.ndarray, row: int, value) -> np.ndarray:
    column = column.copy()
    column[row] = value
    return column


def summarise(per_fold: list[dict]) -> dict:
    """Per-fold scores -> {"folds", "mean", "std", "timestep_f1_per_class" (the mean
    over the folds where the class is present)}, and "early_frames" of the folds' counts
    summed (`tracking.early_frames_record`) where every fold has them."""
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
    for name in SCORES:
        for part in tracking.PARTS:
            values = np.array([fold[name][part] for fold in per_fold], np.float64)
            summary["mean"].setdefault(name, {})[part] = float(np.nanmean(values))
            summary["std"].setdefault(name, {})[part] = float(np.nanstd(values))
    if per_fold and all(tracking.EARLY in fold for fold in per_fold):
        early = [fold[tracking.EARLY] for fold in per_fold]
        summary[tracking.EARLY] = _early_record(
            [e["early"] for e in early],
            [e["predicted"] for e in early],
            early[0]["margin_s"],
            early[0]["hop_s"],
        )
    return summary


def summarise_label_streams(per_fold: dict[str, list[dict]], smoothing: dict) -> dict:
    """A model's summary from {"raw", "smoothed": per-fold scores}: the raw summary, and
    under "smoothed" the smoothed one with its rule (`smoothing_record`)."""
    summary = summarise(per_fold["raw"])
    summary[SMOOTHED] = {**summarise(per_fold[SMOOTHED]), "smoothing": smoothing}
    return summary


def transfer(summary: dict, other: dict) -> dict:
    """{"timestep_f1", "instance_f1"}: `other`'s fold mean / `summary`'s (None where the
    latter is 0)."""
    return {
        key: common.transfer_ratio(other["mean"][name][part], summary["mean"][name][part])
        for key, (name, part) in TRANSFER.items()
    }


def _table_row(label: str, summary: dict) -> str:
    cells = "".join(
        f"{summary['mean'][name][part]:>14.3f} ± {summary['std'][name][part]:.3f}"
        for name in SCORES
        for part in tracking.PARTS
    )
    return f"{label:<18}{cells}"


def table(results: dict, evaluations=()) -> str:
    """Mean ± std over folds per model, the smoothed scores under each model's row
    ("+smooth 80 ms": the rule's declared latency), then its raw scores on each of
    `evaluations` (names of results entries, e.g. "heldout") it has."""
    header = f"{'model':<18}" + "".join(
        f"{name.upper() + ' ' + part:>22}" for name in SCORES for part in ("P", "R", "F1")
    )
    rows = [header]
    for name, summary in results.items():
        rows.append(_table_row(name, summary))
        if SMOOTHED in summary:
            latency_ms = summary[SMOOTHED]["smoothing"]["latency_ms"]
            rows.append(_table_row(f"  +smooth {latency_ms:g} ms", summary[SMOOTHED]))
        for evaluation in evaluations:
            if evaluation in summary:
                rows.append(_table_row(f"  on {evaluation}", summary[evaluation]))
    return "\n".join(rows)
