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

# The scoring itself is a library: `experiments.scoring.bundles` (and the modules it calls,
# `experiments.scoring.corpora`, `experiments.scoring.bundle_keywords`,
# `experiments.scoring.bundle_calls`); this module is its command line.

from __future__ import annotations

import dataclasses
import os

import numpy as np
from absl import app, flags

from cskws_jax import bundle as kws_bundle
from experiments import common
from experiments.scoring import bundles, calls
from experiments.scoring import keywords as kws_scoring


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


def run(settings: bundles.Settings, workdir: str) -> dict:
    """`experiments.scoring.bundles.evaluate`, then the scores' table on stdout."""
    payload = bundles.evaluate(settings, workdir)
    if payload["task"] == kws_bundle.TASK:
        print(kws_table(payload))
    else:
        name = os.path.basename(os.path.normpath(settings.bundle))
        print(calls.table({name: payload["scores"]}))
    return payload


_FLAGS = {
    field.name: (flags.DEFINE_integer if field.type == "int" else flags.DEFINE_string)(
        field.name, field.default, field.metadata["help"]
    )
    for field in dataclasses.fields(bundles.Settings)
}


def main(argv) -> None:
    del argv
    settings = bundles.Settings(**{name: flag.value for name, flag in _FLAGS.items()})
    if not settings.bundle or not settings.dataset or not common.WORKDIR.value:
        raise app.UsageError("--bundle, --dataset and --workdir are required")
    common.cli_main(run, settings, common.WORKDIR.value)


if __name__ == "__main__":
    app.run(main)
