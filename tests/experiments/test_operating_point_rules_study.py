"""experiments.operating_point_rules: the synthetic study of the threshold rules."""

from __future__ import annotations

import json

from cskws_jax import operating_points
from experiments import operating_point_rules


def test_the_study_reports_every_rule_and_budget_and_repeats(tmp_path):
    out = tmp_path / "rules.json"
    argv = ["--dev-hours", "2", "--draws", "3", "--keywords", "6", "--out", str(out)]
    assert operating_point_rules.main(argv) == 0
    first = json.loads(out.read_text())
    rows = {(row["rule"], row["budget"]) for row in first["rows"]}
    assert rows == {(r, b) for r in operating_points.RULES for b in (1.0, 5.0, 25.0)}
    assert all(row["p5"] <= row["median"] <= row["p95"] for row in first["rows"])
    assert operating_point_rules.main(argv) == 0
    assert json.loads(out.read_text()) == first  # same arguments, same numbers
