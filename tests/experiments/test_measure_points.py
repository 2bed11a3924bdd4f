"""experiments.measure_points: operating points chosen on keyword-free speech and
measured on other speech, per engine, written into a bundle and its card."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from cskws_jax import bundle as kws_bundle
from cskws_jax import models
from cskws_jax import operating_points as op
from experiments import measure_points
from experiments.report import card as card_lib

pytestmark = pytest.mark.slow


def _outcomes(rng, count, keywords=3, hours=0.5):
    score = np.sort(rng.random(count).astype(np.float32))[::-1]
    label = rng.integers(0, keywords, count).astype(np.int32)
    hit = rng.random(count) < 0.3
    truth = rng.integers(0, 5, keywords).astype(np.int64)
    return op.Outcomes(score, label, hit, truth, hours)


def test_pooled_outcomes_measure_as_the_sum_of_their_parts():
    rng = np.random.default_rng(0)
    parts = [_outcomes(rng, n) for n in (0, 7, 30)]
    found = op.pooled(parts)
    assert np.all(np.diff(found.score) <= 0)
    assert found.hours == pytest.approx(1.5)
    assert np.array_equal(found.ground_truth, sum(p.ground_truth for p in parts))
    for _ in range(20):
        thresholds = rng.random(3)
        whole = op.measure(found, thresholds)
        pieces = [op.measure(p, thresholds) for p in parts]
        for key in ("false_alarms", "hits"):
            assert whole[key] == sum(piece[key] for piece in pieces)
    with pytest.raises(ValueError, match="parts\\[1\\] has 2 keywords"):
        op.pooled([parts[0], _outcomes(rng, 3, keywords=2)])
    with pytest.raises(ValueError, match="no outcomes"):
        op.pooled([])


def _row(rule, budget, ratio, miss):
    return {"rule": rule, "budget": budget, "ratio": ratio, "final_miss_rate": miss}


def test_the_kept_rule_meets_every_budget_within_2x_with_the_fewest_misses():
    rows = [
        _row("a", 1, 3.0, 0.1),
        _row("a", 5, 1.0, 0.1),
        _row("b", 1, 1.5, 0.5),
        _row("b", 5, 0.6, 0.4),
        _row("c", 1, 0.9, 0.3),
        _row("c", 5, 1.1, 0.3),
    ]
    assert measure_points.kept_rule(rows) == "c"  # b and c meet both; c misses fewer
    far = [_row("a", 1, 9.0, 0.1), _row("b", 1, 0.2, 0.9), _row("c", 1, 0.0, 1.0)]
    assert measure_points.kept_rule(far) == "b"  # none within: closest on a log scale


def test_the_final_set_takes_any_splits_or_slices_of_the_keyword_corpus():
    plan = measure_points.evaluations("kf/full", "synthetic_kws/large-all", ("test[800:]",))
    assert list(plan) == ["dev", "final", "keywords-test_800"]
    assert plan["keywords-test_800"].label == "synthetic_kws/large-all:test[800:]"
    assert measure_points.joined_label(list(plan.values())[1:]) == (
        "kf/full:final + synthetic_kws/large-all:test[800:]"
    )
    default = measure_points.evaluations("kf/full", "synthetic_kws/quick-festival")
    assert list(default) == ["dev", "final", "keywords-test", "keywords-heldout"]


def test_measured_points_go_into_a_bundle_and_its_card(
    smoke_build, keyword_free_smoke, tmp_path, monkeypatch
):
    data_dir, _ = smoke_build
    bundle = tmp_path / "afkws-top20"
    shutil.copytree(models.path("afkws-top20"), bundle, ignore=shutil.ignore_patterns("export"))
    exported = []
    monkeypatch.setattr(measure_points.ship_files, "write_parts", lambda *a: exported.append(a))
    workdir = tmp_path / "points"
    argv = [
        f"--bundle={bundle}",
        f"--data_dir={data_dir}",
        f"--workdir={workdir}",
        "--keyword_free_corpus=keyword_free/smoke",
        "--keywords_corpus=synthetic_kws/smoke",
        "--ship",
    ]
    assert measure_points.main(argv) == 0
    result = json.loads((workdir / "points.json").read_text())
    assert result["rule"] in op.RULES
    assert result["dev"]["split"] == "keyword_free/smoke:dev"
    hours = result["final"]["hours"]
    assert sum(result["engine_hours"].values()) == pytest.approx(hours)
    # the final set: keyword-free final, the keyword corpus's test and heldout
    final = "keyword_free/smoke:final + synthetic_kws/smoke:test+heldout"
    assert result["final"]["split"] == final and result["final"]["keywords_spoken"] > 0
    assert len(result["rules"]) == len(op.RULES) * 3

    _, _, info = kws_bundle.load(bundle)
    points = info.decoding.operating_points
    assert [p.fa_per_hour for p in points] == [1.0, 5.0, 25.0]
    for point, per_engine in zip(points, result["per_engine"].values(), strict=True):
        assert point.rule == result["rule"] and point.split == "keyword_free/smoke:dev"
        assert point.measured.split == result["final"]["split"]
        assert point.measured.hours == pytest.approx(hours)
        # the engines' parts add up to the final set's false alarms
        false_alarms = sum(m["false_alarms"] for m in per_engine.values())
        assert false_alarms == pytest.approx(point.measured.fa_per_hour * hours)
    assert exported == [(str(bundle), "cskws", ("export",))]

    card = json.loads((bundle / card_lib.CARD_JSON).read_text())
    assert card["points"]["rule"] == result["rule"] and card["chosen_on"] == "dev"
    shipped = json.loads((Path(models.path("afkws-top20")) / card_lib.CARD_JSON).read_text())
    assert card["points"]["before"] == shipped["points"]["before"]  # kept from the first
    first = card["operating_points"][0]
    assert first["final"]["fa_per_hour"] == points[0].measured.fa_per_hour
    assert first["dev"]["miss_rate"] is None  # no keyword is spoken in dev
    page = (bundle / card_lib.CARD_MD).read_text()
    assert "Every rule" in page and f"`{result['rule']}`" in page and "n/a" in page
    # a second run reuses the scores and keeps the points the card had first
    assert measure_points.main(argv) == 0
    again = json.loads((bundle / card_lib.CARD_JSON).read_text())
    assert again["points"]["before"] == card["points"]["before"]
    assert os.path.exists(workdir / "dev" / "detections.npz")
