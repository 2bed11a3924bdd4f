"""The worked examples of docs/metrics.md, recomputed.

The expected values are read from the tables of the doc's "Worked examples" sections
(first cell = row key; a value is the text before any "≈", an exact fraction), so the
doc and this test cannot drift apart. The inputs are written out here and checked
against the doc. Every value is computed twice: by the jitted metrics and by the NumPy
loop references of `metrics.reference`.
"""

import pathlib
import re
from fractions import Fraction

import jax
import numpy as np
import pytest
from sklearn import metrics as sklearn_metrics  # the `full` extra's: never skipped

import metrics
from metrics import reference

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
JIT_TOL = 1e-6  # float32 metrics
REF_TOL = 1e-12  # float64 references

_timestep_counts = jax.jit(metrics.timestep_counts, static_argnames="num_classes")
_timestep = jax.jit(metrics.timestep_prf, static_argnames="num_classes")
_instance_counts = jax.jit(
    metrics.instance_counts, static_argnames=("num_classes", "background", "min_run")
)
_instance = jax.jit(metrics.instance_prf, static_argnames=("num_classes", "background", "min_run"))
_detection = jax.jit(
    metrics.detection_scores,
    static_argnames=("num_classes", "ignore_classes", "iou_thresholds", "fa_per_hour"),
)


def _section(title: str) -> str:
    """The text under the heading `### {title}`, up to the next heading."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^#|\Z)", text, re.M | re.S)
    assert found, f"docs/metrics.md has no section '### {title}'"
    return found.group(1)


def _cell(text: str):
    """A table cell: a Fraction where it reads as one (text before '≈'), else the text."""
    text = text.split("≈")[0].strip().strip("`")
    if not text:
        return None
    try:
        return Fraction(text)
    except ValueError:
        return text


def _row(section: str, key: str) -> list:
    """The parsed cells after the key of the one table row whose first cell reads `key`."""
    lines = [line.strip() for line in section.splitlines() if line.startswith("|")]
    rows = [line.strip("|").split("|") for line in lines]
    matching = [
        [_cell(c) for c in row[1:]] for row in rows if row[0].strip().replace("`", "") == key
    ]
    assert len(matching) == 1, f"expected one table row '{key}', found {len(matching)}"
    return matching[0]


def _close(actual, expected, tol):
    assert float(actual) == pytest.approx(float(expected), abs=tol)


def _one(labels, dtype=np.int32):
    return np.asarray([labels], dtype)


# Examples 1 and 2 ("A 13-step sequence"): the sequence as printed in the doc.
GOLD = [0, 1, 1, 1, 1, 1, 0, 2, 2, 2, 2, 2, 0]
PRED = [0, 1, 1, 1, 1, 0, 0, 2, 2, 2, 2, 2, 2]


def _sequence_inputs(section):
    for name, labels in (("gold", GOLD), ("pred", PRED)):
        assert f"{name} = [{', '.join(map(str, labels))}]" in section
    return _one(PRED), _one(GOLD), np.ones((1, len(GOLD)), bool)


def test_example_1_timestep():
    section = _section("Example 1: TIMESTEP on a 13-step sequence")
    pred, gold, mask = _sequence_inputs(section)
    counts = _timestep_counts(pred, gold, mask, num_classes=3)
    per_class = metrics.per_class_prf(counts)
    for c in range(3):
        tp, fp, fn, *prf = _row(section, str(c))
        assert (int(counts.tp[c]), int(counts.fp[c]), int(counts.fn[c])) == (tp, fp, fn)
        for value, expected in zip(per_class, prf, strict=True):
            _close(value[c], expected, JIT_TOL)

    expected = _row(section, "macro")[-3:]
    for value, want in zip(_timestep(pred, gold, mask, num_classes=3), expected, strict=True):
        _close(value, want, JIT_TOL)
    for value, want in zip(
        reference.timestep_prf(pred, gold, mask, num_classes=3), expected, strict=True
    ):
        _close(value, want, REF_TOL)
    sklearn = sklearn_metrics.precision_recall_fscore_support(
        gold[mask], pred[mask], average="macro", zero_division=0
    )
    for value, want in zip(sklearn[:3], expected, strict=True):
        _close(value, want, REF_TOL)

    average_over = np.array([False, True, True])
    expected = _row(section, "macro, average_over = [False, True, True]")[-3:]
    jitted = _timestep(pred, gold, mask, num_classes=3, average_over=average_over)
    loops = reference.timestep_prf(pred, gold, mask, num_classes=3, average_over=average_over)
    for value, loop, want in zip(jitted, loops, expected, strict=True):
        _close(value, want, JIT_TOL)
        _close(loop, want, REF_TOL)


def test_example_2_instance():
    section = _section("Example 2: INSTANCE on the same sequence")
    pred, gold, mask = _sequence_inputs(_section("Example 1: TIMESTEP on a 13-step sequence"))
    counts = _instance_counts(pred, gold, mask, num_classes=3)
    per_class = metrics.per_class_prf(counts)
    for c in (1, 2):
        n_gold, found, predicted, correct, *prf = _row(section, str(c))
        assert (n_gold, found, predicted, correct) == (
            int(counts.gold[c]),
            int(counts.found[c]),
            int(counts.predicted[c]),
            int(counts.correct[c]),
        )
        for value, expected in zip(per_class, prf, strict=True):
            _close(value[c], expected, JIT_TOL)
    assert int(counts.gold[0]) == int(counts.predicted[0]) == 0  # background: no instances

    expected = _row(section, "macro")[-3:]
    jitted = _instance(pred, gold, mask, num_classes=3)
    loops = reference.instance_prf(pred, gold, mask, num_classes=3)
    for value, loop, want in zip(jitted, loops, expected, strict=True):
        _close(value, want, JIT_TOL)
        _close(loop, want, REF_TOL)


# Example 3: case -> (pred, gold, mask) and the doc's (pred, gold, mask) cells.
INSTANCE_CASES = {
    "a": (
        [1, 1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0, 0],
        [True] * 8,
        ("[1, 1, 1, 0, 0, 0, 0, 0]", "same as pred", "all True"),
    ),
    "b": (
        [1] * 12,
        [1] * 12,
        [t != 4 for t in range(12)],
        ("[1] * 12", "same as pred", "False at t = 4"),
    ),
    "c": (
        [1, 1, 1, 1, 1, 0, 1, 1, 1, 1],
        [1] * 10,
        [True] * 10,
        ("[1, 1, 1, 1, 1, 0, 1, 1, 1, 1]", "[1] * 10", "all True"),
    ),
    "d": ([1] * 5, [1] * 5, [False] * 5, ("[1, 1, 1, 1, 1]", "same as pred", "all False")),
}


@pytest.mark.parametrize("case", sorted(INSTANCE_CASES))
def test_example_3_instance_corner_cases(case):
    section = _section("Example 3: INSTANCE corner cases")
    pred, gold, mask, cells = INSTANCE_CASES[case]
    *described, p, r, f1 = _row(section, case)
    assert tuple(described) == cells
    pred, gold, mask = _one(pred), _one(gold), _one(mask, bool)
    jitted = _instance(pred, gold, mask, num_classes=2)
    loops = reference.instance_prf(pred, gold, mask, num_classes=2)
    for value, loop, want in zip(jitted, loops, (p, r, f1), strict=True):
        _close(value, want, JIT_TOL)
        _close(loop, want, REF_TOL)


def _segments(rows, with_score=True):
    """rows of (start, end[, score]) -> one example's padded dict, one class (label 0)."""
    fields = {"start": _one([float(r[0]) for r in rows], np.float32)}
    fields["end"] = _one([float(r[1]) for r in rows], np.float32)
    if with_score:
        fields["score"] = _one([float(r[2]) for r in rows], np.float32)
    fields["label"] = np.zeros((1, len(rows)), np.int32)
    fields["valid"] = np.ones((1, len(rows)), bool)
    return fields


def _detection_scores(detections, ground_truth, **kwargs):
    """(jitted, reference) results of one detection evaluation, one class."""
    kwargs = {"num_classes": 1, **kwargs}
    jitted = _detection(detections, ground_truth, **kwargs)
    return {k: np.asarray(v) for k, v in jitted.items()}, reference.detection_scores(
        detections, ground_truth, **kwargs
    )


def _check_scores(section, keys, jitted, loops):
    for key in keys:
        (expected,) = _row(section, key)
        _close(jitted[key], expected, JIT_TOL)
        _close(loops[key], expected, REF_TOL)


# Example 4: the inputs as in the doc's tables.
EXAMPLE_4_TRUTH = {"g1": (0, 2), "g2": (3, 4)}
EXAMPLE_4_DETECTIONS = {"d1": (0.5, 2, 0.9), "d2": (0, 1, 0.8), "d3": (3, 5, 0.7)}


def test_example_4_detection():
    section = _section("Example 4: detection, 3 detections and 2 ground truths")
    for key, row in EXAMPLE_4_TRUTH.items():
        assert tuple(_row(section, key)) == row
    for key, row in EXAMPLE_4_DETECTIONS.items():
        start, end, score, *ious = _row(section, key)
        assert (start, end, float(score)) == row
        for (g_start, g_end), iou in zip(EXAMPLE_4_TRUTH.values(), ious, strict=True):
            _close(metrics.iou_1d(start, end, g_start, g_end), iou, JIT_TOL)
            _close(reference.iou_1d(start, end, g_start, g_end), iou, REF_TOL)

    detections = _segments(list(EXAMPLE_4_DETECTIONS.values()))
    ground_truth = _segments(list(EXAMPLE_4_TRUTH.values()), with_score=False)
    jitted, loops = _detection_scores(detections, ground_truth, total_hours=0.125)
    _check_scores(section, ("AP@0.05", "AP@0.75", "mAP", "FRR@5", "FRR@25"), jitted, loops)
    # The per-threshold AP the section's bullets state: 5/6 up to 0.50, 1/2 up to 0.75, 0 above.
    per_threshold = [5 / 6] * 10 + [1 / 2] * 5 + [0.0] * 4
    np.testing.assert_allclose(jitted["AP"][:, 0], per_threshold, atol=JIT_TOL)
    np.testing.assert_allclose(loops["AP"][:, 0], per_threshold, atol=REF_TOL)


def test_example_5_tied_scores():
    section = _section("Example 5: tied scores")
    assert "g1 = [0, 1], g2 = [2, 3]" in section
    rows = {key: tuple(_row(section, key)) for key in ("d1", "d2", "d3")}
    assert rows == {"d1": (0, 1, Fraction("0.9")), "d2": (2, 3, 0.5), "d3": (6, 7, 0.5)}
    ground_truth = _segments([(0, 1), (2, 3)], with_score=False)
    kwargs = {"total_hours": 1.0, "fa_per_hour": (0.0,)}

    jitted, loops = _detection_scores(
        _segments([rows["d1"], rows["d2"], rows["d3"]]), ground_truth, **kwargs
    )
    _check_scores(section, ("AP@0.05", "FRR@0"), jitted, loops)

    swapped = _segments([rows["d1"], rows["d3"], rows["d2"]])
    jitted, loops = _detection_scores(swapped, ground_truth, **kwargs)
    (expected,) = _row(section, "AP@0.05, d3 listed before d2")
    _close(jitted["AP@0.05"], expected, JIT_TOL)
    _close(loops["AP@0.05"], expected, REF_TOL)
    _check_scores(section, ("FRR@0",), jitted, loops)  # a tie is never split: FRR unchanged


def test_example_6_equal_iou():
    section = _section("Example 6: equal IoU")
    assert "g1 = [0, 2], g2 = [2, 4]" in section
    assert "d1 = [1, 3] with score 0.9 and d2 = [0, 2] with score 0.8" in " ".join(section.split())
    (iou,) = _row(section, "IoU of d1 with g1 and g2")
    for g_start, g_end in ((0, 2), (2, 4)):
        _close(metrics.iou_1d(1, 3, g_start, g_end), iou, JIT_TOL)
        _close(reference.iou_1d(1, 3, g_start, g_end), iou, REF_TOL)
    detections = _segments([(1, 3, 0.9), (0, 2, 0.8)])
    ground_truth = _segments([(0, 2), (2, 4)], with_score=False)
    jitted, loops = _detection_scores(detections, ground_truth, total_hours=1.0)
    _check_scores(section, ("AP@0.05",), jitted, loops)
