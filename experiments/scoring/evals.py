"""Evaluations declared in a runner's config (big_vision's `config.evals`): what every
trained model is scored on besides its own test data.

    config.evals.heldout = dict(split="heldout", dataset="", optional=True)

Each entry names a split of a corpus, whole or a TFDS slice of it ("heldout[:50%]": the
first half, e.g. a development half to choose settings on and the other half to score
once), optionally only the records some engines spoke (`engines="festival"`: the
leave-one-engine-out protocol on a corpus all engines speak, `speechkit.corpus.
EngineSubset`): `dataset` "" is the run's own corpus (any other
TFDS name, e.g. "annotated_calls/questions", is read from the same data folder), and an
`optional` evaluation whose corpus cannot be read or lacks the split is skipped with a
log line instead of an error (`experiments.scoring.corpora.evaluation_sources` reads
them). A model's results.json entry holds each evaluation's scores under its name and
the ratio of its score to the in-corpus one under `transfer_key(name)`. The presets
declare one: "heldout", the split spoken only by a synthesiser never heard in training.
"""

from __future__ import annotations

import dataclasses

from experiments import common
from speechkit import corpus, prepared

HELDOUT = "heldout"  # the presets' evaluation: the held-out engine's split
# Keys a model's results.json entry has of its own (an evaluation's name is a key there too).
TAKEN = frozenset(
    {"test", "train", "folds", "mean", "std", "smoothed", "timestep_f1_per_class"}
    | {"intervals", "allowed_false_alarms", "operating_points", "seconds", "test_hours"}
    | {"trained_folds"}
)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One entry of `config.evals`: its `name` (the results key), a `split` of `dataset`
    ("" = the run's corpus), skipped when absent if `optional`, the records of `engines`
    only where it names some."""

    name: str
    split: str
    dataset: str = ""
    optional: bool = False
    engines: str = ""  # comma-separated: only the records these engines spoke; "": all

    def corpus(self, own: str) -> str:
        """The TFDS name of the corpus scored, given the run's own `own`."""
        return self.dataset or own


def evaluations(config) -> list[Evaluation]:
    """`config.evals` as `Evaluation`s, in the config's order (none when absent)."""
    section = config.get("evals") or {}
    found = []
    for name in section:
        if name in TAKEN or name.startswith("transfer"):
            raise ValueError(f"config.evals.{name}: the name is taken by the results' own keys")
        found.append(common.build(Evaluation, section[name], f"config.evals.{name}", name=name))
    return found


def transfer_key(name: str) -> str:
    """The results.json key of evaluation `name`'s score / the in-corpus score:
    "transfer" for "heldout" (as runs before `config.evals` wrote it), else
    "transfer_<name>"."""
    return "transfer" if name == HELDOUT else f"transfer_{name}"


def base_split(split: str) -> str:
    """The split a TFDS slice is of: "heldout" for "heldout[:50%]" (and for "heldout")."""
    return split.split("[", 1)[0].strip()


def split_of(evaluation: Evaluation, corpus: str, sources, log, data_dir: str | None = None):
    """The data source of `evaluation`'s split among `sources` (a corpus's splits, as
    `tfds.data_source` gives them; a slice is read from `data_dir`), or None for an
    optional evaluation whose split the corpus lacks (logged); a missing required split
    is a ValueError naming it."""
    base = base_split(evaluation.split)
    if base in sources:
        if base == evaluation.split:
            return sources[base]
        try:
            return prepared.data_source(corpus, split=evaluation.split, data_dir=data_dir)
        except ValueError as err:
            raise ValueError(
                f"config.evals.{evaluation.name}: split {evaluation.split!r} of {corpus}: {err}"
            ) from err
    why = f"{corpus} has no {base!r} split (has {sorted(sources)})"
    if not evaluation.optional:
        raise ValueError(f"config.evals.{evaluation.name}: {why}")
    log(f"config.evals.{evaluation.name}: {why}")
    return None


def of_engines(source, engines: str, where: str):
    """`source`, or only its records that `engines` (comma-separated) spoke when it names
    some (`speechkit.corpus.EngineSubset`); a ValueError naming `where` when none did."""
    chosen = corpus.engine_list(engines)
    if not chosen:
        return source
    try:
        return corpus.EngineSubset(source, chosen)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from err


def kept_engine(evaluation: Evaluation) -> str | None:
    """The one engine whose records `evaluation` keeps (`engines`), or None."""
    kept = corpus.engine_list(evaluation.engines)
    return kept[0] if len(kept) == 1 else None
