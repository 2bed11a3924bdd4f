"""experiments.cskws.with_measures: the bundle's operating points carry what they
measured on the evaluation config.eval.measure_on names."""

from __future__ import annotations

import pytest

from cskws_jax.config import Measured, OperatingPoint
from experiments import cskws
from speechkit import errors

POINTS = (
    OperatingPoint(1.0, (0.9, 0.8), "c:dev", 1.0),
    OperatingPoint(5.0, (0.7, 0.6), "c:dev", 1.0),
)


def _summary(final: bool = True) -> dict:
    budgets = []
    for budget, rate in ((1.0, 2.5), (5.0, 9.0)):
        entry = {"fa_per_hour": budget, "test": {"fa_per_hour": 0.0}}
        if final:
            entry["final"] = {"fa_per_hour": rate, "miss_rate": 0.25, "hours": 2.0}
        budgets.append(entry)
    return {"budgets": budgets}


def test_each_point_carries_its_measures_on_the_named_evaluation():
    measured = cskws.with_measures(POINTS, _summary(), "final", "c:test[800:]")
    assert [p.measured for p in measured] == [
        Measured(2.5, 0.25, "c:test[800:]", 2.0),
        Measured(9.0, 0.25, "c:test[800:]", 2.0),
    ]
    assert [p.thresholds for p in measured] == [p.thresholds for p in POINTS]


def test_an_evaluation_without_measures_is_named():
    with pytest.raises(errors.InvalidInput, match="config.eval.measure_on: 'final'"):
        cskws.with_measures(POINTS, _summary(final=False), "final", "c:test")
