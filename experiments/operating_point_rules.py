r"""How each threshold rule holds its false-alarm budget on new data, on synthetic keywords.

    python -m experiments.operating_point_rules --dev-hours 1.06 --draws 40 \
        --out outputs/operating_point_rules/dev-1.06h.json

Each draw makes a population of `--keywords` keywords whose false alarms arrive at
2-40 per hour with logistic logits (location -4 to -1, scale 0.5 to 1.5; `--beta`: Beta
scores instead), and spoken keywords at 5 per hour found 90 % of the time with logits
N(2.5, 1.5). Thresholds are chosen on `--dev-hours` of it by every rule of
`cskws_jax.operating_points.RULES` and measured on 200 other hours
(`operating_points.compare_rules`). The JSON holds, per rule and budget, the median and
the 5th and 95th percentiles of measured / budget over the draws, and the share of draws
within 2x. The same arguments give the same numbers (every draw has its own seed).
docs/models.md cites its runs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from cskws_jax import operating_points
from speechkit import files

FINAL_HOURS = 200.0  # hours the thresholds are measured on
MIN_SCORE = 0.05  # the detector's peak threshold: lower scores are never detections


def population(seed: int, keywords: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(false alarms per hour, logit location, logit scale), each [keywords]."""
    rng = np.random.default_rng(seed)
    rate = np.exp(rng.uniform(np.log(2), np.log(40), keywords))
    return rate, rng.uniform(-4, -1, keywords), rng.uniform(0.5, 1.5, keywords)


def draw(population_, hours: float, seed: int, beta: bool) -> operating_points.Outcomes:
    """`hours` of detections of the keywords of `population_` (false alarms and hits)."""
    rate, location, scale = population_
    rng = np.random.default_rng(seed)
    scores, labels, hits, spoken = [], [], [], []
    for keyword in range(len(rate)):
        count = rng.poisson(rate[keyword] * hours)
        if beta:
            false = rng.beta(1.0, 2.0 / scale[keyword] + 2.0, count)
        else:
            false = 1 / (1 + np.exp(-rng.logistic(location[keyword], scale[keyword], count)))
        said = rng.poisson(5.0 * hours)
        found = int(np.sum(rng.random(said) < 0.9))
        true = 1 / (1 + np.exp(-rng.normal(2.5, 1.5, found)))
        for values, hit in ((false, False), (true, True)):
            kept = values[values >= MIN_SCORE]
            scores.append(kept)
            labels.append(np.full(len(kept), keyword))
            hits.append(np.full(len(kept), hit))
        spoken.append(said)
    score = np.concatenate(scores).astype(np.float32)
    order = np.argsort(-score, kind="stable")
    label = np.concatenate(labels).astype(np.int32)[order]
    return operating_points.Outcomes(
        score[order], label, np.concatenate(hits)[order], np.array(spoken, np.int64), hours
    )


def study(dev_hours: float, draws: int, keywords: int, budgets, beta: bool) -> dict:
    """{"rows": [{rule, budget, median, p5, p95, within_2x}], the arguments}."""
    ratios: dict[tuple[str, float], list[float]] = {}
    for seed in range(draws):
        population_ = population(seed, keywords)
        dev = draw(population_, dev_hours, 1000 + seed, beta)
        final = draw(population_, FINAL_HOURS, 2000 + seed, beta)
        for row in operating_points.compare_rules(dev, final, budgets):
            ratios.setdefault((row["rule"], row["budget"]), []).append(row["ratio"])
    rows = []
    for (rule, budget), values in ratios.items():
        values = np.asarray(values)
        rows.append(
            {
                "rule": rule,
                "budget": budget,
                "median": float(np.median(values)),
                "p5": float(np.percentile(values, 5)),
                "p95": float(np.percentile(values, 95)),
                "within_2x": float(np.mean((values >= 0.5) & (values <= 2))),
            }
        )
    arguments = {"dev_hours": dev_hours, "draws": draws, "keywords": keywords, "beta": beta}
    return {**arguments, "final_hours": FINAL_HOURS, "rows": rows}


def main(argv=None) -> int:
    parse = argparse.ArgumentParser(
        prog="python -m experiments.operating_point_rules",
        description="The threshold rules on synthetic keywords: measured / budget on new data.",
    )
    parse.add_argument("--dev-hours", type=float, default=10.0)
    parse.add_argument("--draws", type=int, default=40)
    parse.add_argument("--keywords", type=int, default=20)
    parse.add_argument("--budgets", default="1,5,25", help="FA/h, comma-separated")
    parse.add_argument("--beta", action="store_true", help="Beta scores, not logistic logits")
    parse.add_argument("--out", default="", help="a JSON file for the result")
    args = parse.parse_args(argv)
    budgets = tuple(float(b) for b in args.budgets.split(","))
    result = study(args.dev_hours, args.draws, args.keywords, budgets, args.beta)
    for row in result["rows"]:
        print(
            f"{row['rule']:<15} {row['budget']:>5g} FA/h: measured / budget median "
            f"{row['median']:.2f} [{row['p5']:.2f}, {row['p95']:.2f}], within 2x "
            f"{row['within_2x']:.0%}"
        )
    if args.out:
        files.write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
