r"""A detector's operating points chosen on ten hours of speech and measured on ten others.

    python -m experiments.measure_points --bundle=afkws-top20 \
        --data_dir=outputs/tensorflow_datasets --workdir=outputs/points [--ship]

Scores the bundle (a folder, or a shipped model's name) on `keyword_free/full`'s dev and
final splits (about 10.4 hours each of keyword-free speech from espeak-ng, Festival and
Piper) and on `--keywords_splits` of `--keywords_corpus` (keywords spoken by every
engine, for miss rates: test and heldout of synthetic_kws/quick-festival by default;
a model that heard every engine is measured on its own corpus's final slice), building
the corpora when missing; a rerun reuses the scores in
`--workdir` that the same parameters made. Per-keyword thresholds for each budget are
chosen on dev by every rule of `cskws_jax.operating_points.RULES` and measured on the
final set: final and the keyword splits together. The rule kept is the one within 2x of
every budget there with the lowest mean miss rate (none within: the one closest to its
budgets). Writes points.json and points.md to the workdir; `--ship` also writes the kept
points into the bundle (with what they measured) and its card, and exports the bundle
again (`experiments.ship_files`). docs/models.md has the shipped detector's figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time

import numpy as np

from cskws_jax import bundle as kws_bundle
from cskws_jax import models as kws_models
from cskws_jax import operating_points
from cskws_jax.config import Measured, OperatingPoint
from cskws_jax.datasets import keyword_free  # noqa: F401 (registers the builder)
from experiments import common, ship_files
from experiments.report import card as card_lib
from experiments.scoring import bundle_keywords, bundles, corpora
from experiments.scoring import keywords as kws_scoring
from speechkit import corpus, dataclass_json, files
from speechkit.bundle import MANIFEST

log = common.logger("measure_points")
KEYWORD_FREE = "keyword_free/full"
KEYWORDS_CORPUS = "synthetic_kws/quick-festival"
KEYWORDS_SPLITS = ("test", "heldout")
WITHIN = 2.0  # the goal: measured FA/h within this factor of the budget


@dataclasses.dataclass(frozen=True)
class Evaluation:
    name: str  # its folder in the workdir
    dataset: str
    split: str

    @property
    def label(self) -> str:
        return f"{self.dataset}:{self.split}"


def evaluations(
    keyword_free_corpus: str, keywords_corpus: str, keywords_splits=KEYWORDS_SPLITS
) -> dict[str, Evaluation]:
    """dev (chosen on), then the parts of the final set: keyword-free final and each of
    `keywords_splits` (whole splits or TFDS slices) of `keywords_corpus`."""
    found = {
        "dev": Evaluation("dev", keyword_free_corpus, "dev"),
        "final": Evaluation("final", keyword_free_corpus, "final"),
    }
    for split in keywords_splits:
        name = "keywords-" + "".join(c if c.isalnum() else "_" for c in split).strip("_")
        found[name] = Evaluation(name, keywords_corpus, split)
    return found


def joined_label(parts) -> str:
    """ "a:x + b:y+z" of evaluations, each corpus once with its splits."""
    splits: dict[str, list[str]] = {}
    for evaluation in parts:
        splits.setdefault(evaluation.dataset, []).append(evaluation.split)
    return " + ".join(f"{dataset}:{'+'.join(names)}" for dataset, names in splits.items())


def score(bundle: str, evaluation: Evaluation, data_dir: str, folder: str, batch_size: int):
    """(outcomes, engine of each utterance [utterances], `folder`) of `bundle` on
    `evaluation`, scored into `folder` (detections.npz; reused when scored.json says the
    same parameters, peak decoding and split made it)."""
    builder = corpora.corpus_builder(evaluation.dataset, data_dir)
    corpora.prepare(builder, None)
    source = corpora.split_source(builder, evaluation.split, slices=True)
    _, _, info = kws_bundle.load(bundle)
    manifest = files.read_json(os.path.join(bundle, MANIFEST))
    peaks = dataclasses.replace(info.decoding, operating_points=())
    key = {
        "params_sha256": manifest["params"]["sha256"],
        "decoding": repr(peaks),
        "split": evaluation.label,
        "utterances": len(source),
    }
    record = os.path.join(folder, "scored.json")
    if files.read_json(record) != key:
        log(f"scoring {evaluation.label}: {len(source)} utterances")
        settings = bundles.Settings(batch_size=batch_size)
        bundle_keywords.evaluate_kws(bundle, builder, source, settings, folder, evaluation.split)
        files.write_json(record, key)
    found = kws_scoring.saved_outcomes(folder, len(info.labels))
    return found, corpus.record_engines(source), folder


def by_engine(parts) -> dict[str, operating_points.Outcomes]:
    """{engine: its utterances' outcomes over every part} of (outcomes, engines, folder)
    parts."""
    found = {}
    for _, engines, folder in parts:
        for engine in sorted(set(engines)):
            num_keywords = parts[0][0].num_keywords
            found.setdefault(engine, []).append(
                kws_scoring.saved_outcomes(folder, num_keywords, rows=engines == engine)
            )
    return {engine: operating_points.pooled(outcomes) for engine, outcomes in found.items()}


def kept_rule(rows) -> str:
    """The rule within WITHIN of every budget with the lowest mean final miss rate; when
    none is, the one whose worst log ratio to a budget is smallest."""
    rules = list(dict.fromkeys(row["rule"] for row in rows))

    def of(rule):
        return [row for row in rows if row["rule"] == rule]

    def within(rule):
        return all(1 / WITHIN <= row["ratio"] <= WITHIN for row in of(rule))

    def worst(rule):
        return max(abs(math.log(max(row["ratio"], 1e-9))) for row in of(rule))

    def miss(rule):
        return float(np.mean([row["final_miss_rate"] for row in of(rule)]))

    meeting = [rule for rule in rules if within(rule)]
    return min(meeting, key=miss) if meeting else min(rules, key=worst)


def measure_points(
    bundle: str,
    data_dir: str,
    workdir: str,
    *,
    budgets=None,
    batch_size=16,
    keyword_free_corpus=KEYWORD_FREE,
    keywords_corpus=KEYWORDS_CORPUS,
    keywords_splits=KEYWORDS_SPLITS,
) -> dict:
    """points.json's content (see the module docstring); the chosen points are in
    "points" as `OperatingPoint` dicts."""
    started = time.perf_counter()
    _, _, info = kws_bundle.load(bundle)
    budgets = tuple(budgets or (p.fa_per_hour for p in info.decoding.operating_points))
    if not budgets:
        raise ValueError(f"{bundle}: the bundle stores no operating points; give --budgets")
    plan = evaluations(keyword_free_corpus, keywords_corpus, keywords_splits)
    scored = {
        name: score(bundle, ev, data_dir, os.path.join(workdir, name), batch_size)
        for name, ev in plan.items()
    }
    dev = scored["dev"][0]
    final_names = [name for name in plan if name != "dev"]
    final_parts = [scored[name] for name in final_names]
    final = operating_points.pooled([part[0] for part in final_parts])
    rows = operating_points.compare_rules(dev, final, budgets)
    rule = kept_rule(rows)
    final_label = joined_label([plan[name] for name in final_names])
    points = []
    engines = by_engine(final_parts)
    per_engine = {}
    for point in operating_points.choose(dev, budgets, split=plan["dev"].label, rule=rule):
        measured = operating_points.measure(final, point.thresholds)
        points.append(
            dataclasses.replace(
                point,
                measured=Measured(
                    measured["fa_per_hour"], measured["miss_rate"], final_label, final.hours
                ),
            )
        )
        per_engine[f"{point.fa_per_hour:g}"] = {
            engine: operating_points.measure(found, point.thresholds)
            for engine, found in engines.items()
        }
    return {
        "bundle": os.path.abspath(bundle),
        "rule": rule,
        "dev": {"split": plan["dev"].label, "hours": dev.hours},
        "final": {
            "split": final_label,
            "hours": final.hours,
            "keywords_spoken": int(final.ground_truth.sum()),
        },
        "engine_hours": {engine: found.hours for engine, found in engines.items()},
        "rules": rows,
        "per_engine": per_engine,
        "points": [dataclasses.asdict(point) for point in points],
        "seconds": time.perf_counter() - started,
    }


def markdown(result: dict) -> str:
    """points.md: the rules table and the kept rule's figures per engine."""
    lines = [
        f"# Operating points of {result['bundle']}",
        "",
        f"Chosen on {result['dev']['split']} ({result['dev']['hours']:.2f} h), measured on "
        f"{result['final']['split']} ({result['final']['hours']:.2f} h, "
        f"{result['final']['keywords_spoken']} keywords spoken).",
        "",
        operating_points.comparison_markdown(result["rules"]),
        "",
        f"Kept: `{result['rule']}`. Its final FA/h and miss rate per engine:",
        "",
        "| budget FA/h | " + " | ".join(result["engine_hours"]) + " |",
        "|---:|" + "---:|" * len(result["engine_hours"]),
    ]
    for budget, engines in result["per_engine"].items():
        cells = [
            f"{m['fa_per_hour']:.2f} / "
            + ("n/a" if m["miss_rate"] is None else f"{100 * m['miss_rate']:.1f}%")
            for m in engines.values()
        ]
        lines.append(f"| {budget} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def ship(bundle: str, result: dict, command: str) -> None:
    """Writes the kept points into the bundle folder, its card and its export."""
    net, params, info = kws_bundle.load(bundle)
    points = tuple(
        dataclass_json.from_dict(OperatingPoint, point, f"points.json points[{i}]")
        for i, point in enumerate(result["points"])
    )
    decoding = dataclasses.replace(info.decoding, operating_points=points)
    kws_bundle.save(bundle, net, params, info.labels, decoding, info.corpus, info.features)
    card_path = os.path.join(bundle, card_lib.CARD_JSON)
    card = files.read_json(card_path)
    if card is not None:
        card_lib.write(bundle, card_lib.with_measured_points(card, result, command))
    ship_files.write_parts(bundle, "cskws", ("export",))


def main(argv=None) -> int:
    parse = argparse.ArgumentParser(
        prog="python -m experiments.measure_points",
        description="Choose a detector's operating points on 10 h of speech, measure them "
        "on 10 other hours.",
    )
    parse.add_argument("--bundle", required=True, help="a bundle folder or a shipped model")
    parse.add_argument("--data_dir", required=True, help="TFDS data folder")
    parse.add_argument("--workdir", required=True)
    parse.add_argument(
        "--budgets", default="", help="FA/h, comma-separated (default: the bundle's)"
    )
    parse.add_argument("--keyword_free_corpus", default=KEYWORD_FREE)
    parse.add_argument("--keywords_corpus", default=KEYWORDS_CORPUS)
    parse.add_argument(
        "--keywords_splits",
        default=",".join(KEYWORDS_SPLITS),
        help="its splits or slices with keywords, comma-separated (e.g. 'test[800:]')",
    )
    parse.add_argument("--batch_size", type=int, default=16)
    parse.add_argument("--ship", action="store_true", help="write the points into the bundle")
    args = parse.parse_args(argv)
    bundle = args.bundle
    if not os.path.isdir(bundle) and bundle in kws_models.names():
        bundle = kws_models.path(bundle)
    budgets = tuple(float(b) for b in args.budgets.split(",") if b)
    result = measure_points(
        bundle,
        args.data_dir,
        args.workdir,
        budgets=budgets,
        batch_size=args.batch_size,
        keyword_free_corpus=args.keyword_free_corpus,
        keywords_corpus=args.keywords_corpus,
        keywords_splits=tuple(split for split in args.keywords_splits.split(",") if split),
    )
    files.write_json(os.path.join(args.workdir, "points.json"), result)
    text = markdown(result)
    with files.atomic_open(os.path.join(args.workdir, "points.md")) as out:
        out.write(text)
    print(text)
    if args.ship:
        ship(
            bundle, result, "python -m experiments.measure_points " + " ".join(argv or sys.argv[1:])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
