"""The corpora models are scored on. A bundle's (`experiments.scoring.bundles`): a TFDS
builder by name, built when needed, and one split of it, whole or a TFDS slice; a
runner's evaluations (`config.evals`, `experiments.scoring.evals`): each one's split, and
the synthesiser that alone speaks it.

    builder = corpora.corpus_builder("folder_kws/shipped", data_dir)
    corpora.prepare(builder, manual_dir="/data/my_keywords")
    source = corpora.split_source(builder, "test", slices=True)
    others = corpora.evaluation_sources(config, "synthetic_kws/quick", log)
    engine = corpora.split_engine(evaluation, "synthetic_kws/quick", data_dir)

A corpus, split or bundle that cannot be scored is an `EvaluationError` (the command
line's exit status 2).
"""

from __future__ import annotations

import tensorflow_datasets as tfds

from cskws_jax.datasets import folder_kws, keyword_free, libritop20, synthetic_kws  # noqa: F401
from experiments import common
from experiments.scoring import evals
from multiqt_jax.datasets import annotated_calls, synthetic_calls  # noqa: F401 (registers)
from speechkit import errors, prepared

CROSS_VALIDATED_SPLIT = "train"  # the call corpora's split that experiments.multiqt folds
BATCH_LENGTHS = "buckets"  # evaluation batches padded to a few lengths (speechkit.batching)

log = common.logger("evaluate")


class EvaluationError(errors.InvalidInput):
    """A bundle and a corpus that cannot be scored together; the message says why."""


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
    keyword corpus), a TFDS slice of it ("heldout[50%:]", as `experiments.scoring.evals`
    reads them)."""
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


def check_corpus_kind(builder, kws: bool, dataset: str) -> None:
    """An EvaluationError unless the corpus is of the bundle's kind: a keyword corpus for
    a cskws bundle (`kws`), a call corpus for a multiqt one."""
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


def evaluation_sources(config, own: str, log, leave_out=None) -> dict:
    """{evaluation name: data source} of `config.evals` (`evals.evaluations`) for a run on
    corpus `own` (its TFDS name): each evaluation's split of its corpus, whole or a TFDS
    slice, only the records of its `engines`. An optional evaluation whose corpus cannot
    be read or lacks the split is logged (`log`) and left out, a required one is an error;
    so is one for which `leave_out(evaluation, corpus)` gives a reason (a runner's own
    rule; None: none)."""
    data_dir, found = common.data_dir(config), {}
    for evaluation in evals.evaluations(config):
        corpus, where = evaluation.corpus(own), f"config.evals.{evaluation.name}"
        why = leave_out(evaluation, corpus) if leave_out else None
        if why and not evaluation.optional:
            raise ValueError(f"{where}: {why}")
        if why:
            log(f"{where}: skipped, {why}")
            continue
        try:
            sources = prepared.data_source(corpus, data_dir=data_dir)
        except Exception as err:  # noqa: BLE001 - TFDS raises several kinds for "not built"
            if not evaluation.optional:
                raise
            log(f"{where}: {corpus} not readable ({type(err).__name__})")
            continue
        source = evals.split_of(evaluation, corpus, sources, log, data_dir)
        if source is not None:
            found[evaluation.name] = evals.of_engines(
                source, evaluation.engines, f"{where}.engines"
            )
    return found


SYNTHETIC = {
    "synthetic_calls": synthetic_calls.SyntheticCalls,
    "synthetic_kws": synthetic_kws.SyntheticKws,
}


def split_engine(evaluation: evals.Evaluation, own: str, data_dir: str) -> str | None:
    """The synthesiser that alone speaks an evaluation's records (`own`: the run's corpus):
    the one engine it keeps (`engines`), or a synthetic corpus's (synthetic_calls,
    synthetic_kws) held-out engine for its "heldout" split or a slice of it (a corpus of
    your own keywords says it in its metadata); None otherwise."""
    kept = evals.kept_engine(evaluation)
    if kept:
        return kept
    corpus = evaluation.corpus(own)
    family, _, name = corpus.partition("/")
    if evals.base_split(evaluation.split) != "heldout" or family not in SYNTHETIC:
        return None
    built = SYNTHETIC[family].builder_configs.get(name)
    if built is not None:
        return built.render_config.heldout_engine
    metadata = prepared.builder(corpus, data_dir=data_dir).info.metadata or {}
    return metadata.get("heldout_engine")
