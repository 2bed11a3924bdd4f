"""Bad input: clear errors at trace time; out-of-range labels through `metrics.checked`."""

import jax
import numpy as np
import pytest

import metrics

PRED = np.zeros((2, 6), np.int32)
MASK = np.ones((2, 6), bool)


def _dets(batch=1, width=2, **overrides):
    fields = {
        "start": np.zeros((batch, width), np.float32),
        "end": np.ones((batch, width), np.float32),
        "score": np.full((batch, width), 0.5, np.float32),
        "label": np.zeros((batch, width), np.int32),
        "valid": np.ones((batch, width), bool),
    }
    fields.update(overrides)
    return fields


def _gts(batch=1, width=3):
    return {k: v for k, v in _dets(batch, width).items() if k != "score"}


@pytest.mark.parametrize("metric", [metrics.timestep_prf, metrics.instance_prf])
def test_sequence_shape_and_dtype_errors(metric):
    with pytest.raises(
        ValueError, match=r"gold: shape \(2, 5\) does not match pred shape \(2, 6\)"
    ):
        metric(PRED, PRED[:, :5], MASK, num_classes=2)
    with pytest.raises(ValueError, match=r"pred: expected rank 2 \[B, T\], got shape \(6,\)"):
        metric(PRED[0], PRED[0], MASK[0], num_classes=2)
    with pytest.raises(TypeError, match="mask: expected bool, got dtype int32"):
        metric(PRED, PRED, PRED, num_classes=2)
    with pytest.raises(TypeError, match="gold: expected an integer dtype, got dtype float32"):
        metric(PRED, PRED.astype(np.float32), MASK, num_classes=2)
    with pytest.raises(ValueError, match="num_classes: expected an int >= 2, got 1"):
        metric(PRED, PRED, MASK, num_classes=1)


def test_errors_are_raised_at_trace_time_under_jit():
    traced = jax.jit(lambda p: metrics.instance_prf(p, PRED, MASK, num_classes=3, min_run=0))
    with pytest.raises(ValueError, match="min_run: expected an int >= 1, got 0"):
        traced(PRED)
    with pytest.raises(ValueError, match=r"background: expected a class id in \[0, 3\), got 3"):
        metrics.instance_prf(PRED, PRED, MASK, num_classes=3, background=3)
    with pytest.raises(TypeError, match="num_classes: expected a static Python int"):
        jax.jit(lambda c: metrics.timestep_prf(PRED, PRED, MASK, num_classes=c))(3)


def test_average_over_shape():
    with pytest.raises(ValueError, match=r"average_over: expected shape \(3,\), got \(2,\)"):
        metrics.timestep_prf(PRED, PRED, MASK, num_classes=3, average_over=np.ones(2, bool))


def test_detection_field_errors():
    with pytest.raises(KeyError, match=r"detections: missing field\(s\) \['score'\]"):
        metrics.detection_scores(
            {k: v for k, v in _dets().items() if k != "score"}, _gts(), num_classes=1, total_hours=1
        )
    with pytest.raises(ValueError, match=r"detections\['end'\]: shape \(1, 3\) does not match"):
        metrics.detection_scores(
            _dets(end=np.ones((1, 3), np.float32)), _gts(), num_classes=1, total_hours=1
        )
    with pytest.raises(TypeError, match=r"ground_truth\['label'\]: expected an integer dtype"):
        gts = _gts()
        gts["label"] = gts["label"].astype(np.float32)
        metrics.detection_scores(_dets(), gts, num_classes=1, total_hours=1)
    with pytest.raises(ValueError, match="detections have batch size 2 but ground_truth has 1"):
        metrics.detection_scores(_dets(batch=2), _gts(), num_classes=1, total_hours=1)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (
            dict(iou_thresholds=(0.5, 1.5)),
            r"iou_thresholds: thresholds must lie in \(0, 1\], got 1.5",
        ),
        (dict(iou_thresholds=(0.0,)), r"iou_thresholds: thresholds must lie in \(0, 1\], got 0.0"),
        (dict(iou_thresholds=()), "iou_thresholds: expected at least one threshold"),
        (dict(frr_iou=0.0), r"frr_iou: thresholds must lie in \(0, 1\]"),
        (dict(num_classes=0), "num_classes: expected an int >= 1, got 0"),
        (dict(ignore_classes=(4,)), r"ignore_classes: expected a class id in \[0, 2\), got 4"),
        (dict(fa_per_hour=(-1.0,)), "fa_per_hour: budgets must be >= 0"),
        (dict(total_hours=-2.0), "total_hours: expected a scalar > 0, got -2.0"),
    ],
)
def test_detection_static_argument_errors(kwargs, pattern):
    kwargs = {"num_classes": 2, "total_hours": 1.0, **kwargs}
    with pytest.raises(ValueError, match=pattern):
        metrics.detection_scores(_dets(), _gts(), **kwargs)


def test_checked_variant_reports_out_of_range_labels():
    bad = PRED.copy()
    bad[1, 2] = 7
    with pytest.raises(ValueError, match=r"pred: label values must lie in \[0, 2\)"):
        metrics.checked(metrics.timestep_prf)(bad, PRED, MASK, num_classes=2)
    with pytest.raises(ValueError, match=r"gold: label values must lie in \[0, 2\).*holds 7"):
        metrics.checked(metrics.instance_counts)(PRED, bad, MASK, num_classes=2)
    # Masked positions are padding and may hold anything.
    mask = MASK.copy()
    mask[1, 2] = False
    result = metrics.checked(metrics.timestep_prf)(bad, PRED, mask, num_classes=2)
    assert float(result.f1) == 1.0


def test_checked_variant_for_detections():
    with pytest.raises(
        ValueError, match=r"detections\['label'\]: label values must lie in \[0, 1\)"
    ):
        metrics.checked(metrics.detection_scores)(
            _dets(label=np.array([[0, 3]], np.int32)), _gts(), num_classes=1, total_hours=1.0
        )
    with pytest.raises(ValueError, match="valid detections need finite scores"):
        metrics.checked(metrics.detection_scores)(
            _dets(score=np.array([[0.5, np.nan]], np.float32)),
            _gts(),
            num_classes=1,
            total_hours=1.0,
        )
    result = metrics.checked(metrics.detection_scores)(
        _dets(), _gts(), num_classes=1, total_hours=1.0
    )
    assert float(result["AP@0.05"]) == pytest.approx(2 / 3)  # 2 hits on 3 ground truths
