"""Plain NumPy loop implementations of `docs/metrics.md`, for testing the jitted metrics.

Written to be read against the definitions, not to be fast: explicit loops, float64,
no vectorisation tricks. Same arguments and return values as the jitted functions,
with float results.
"""

from __future__ import annotations

import math

import numpy as np

from metrics.detection import DEFAULT_IOU_THRESHOLDS
from metrics.early import EarlyFrameCounts, EarlyFrames
from metrics.latency import DetectionLatencies, LatencySummary, TrackingLatencies


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else 0.0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def timestep_prf(pred, gold, mask, *, num_classes, average_over=None):
    """TIMESTEP macro (precision, recall, f1) as Python floats."""
    tp = [0] * num_classes
    fp = [0] * num_classes
    fn = [0] * num_classes
    present = [False] * num_classes
    for b in range(len(pred)):
        for t in range(len(pred[b])):
            if not mask[b][t]:
                continue
            p, g = int(pred[b][t]), int(gold[b][t])
            for c in range(num_classes):
                if p == c and g == c:
                    tp[c] += 1
                elif p == c:
                    fp[c] += 1
                elif g == c:
                    fn[c] += 1
                if p == c or g == c:
                    present[c] = True
    chosen = [
        c for c in range(num_classes) if present[c] and (average_over is None or average_over[c])
    ]
    precision = _mean([_ratio(tp[c], tp[c] + fp[c]) for c in chosen])
    recall = _mean([_ratio(tp[c], tp[c] + fn[c]) for c in chosen])
    f1 = _mean([_ratio(2 * tp[c], 2 * tp[c] + fp[c] + fn[c]) for c in chosen])
    return precision, recall, f1


def _instances(labels, mask, background):
    """Maximal runs of one non-background label: list of (class, first, last)."""
    runs = []
    current = None
    for t, (label, valid) in enumerate(zip(labels, mask, strict=True)):
        label = int(label)
        if valid and label != background:
            if current is not None and current[0] == label:
                current[2] = t
            else:
                if current is not None:
                    runs.append(tuple(current))
                current = [label, t, t]
        elif current is not None:
            runs.append(tuple(current))
            current = None
    if current is not None:
        runs.append(tuple(current))
    return runs


def _has_consecutive(other_labels, cls, first, last, min_run):
    streak = 0
    for t in range(first, last + 1):
        streak = streak + 1 if int(other_labels[t]) == cls else 0
        if streak >= min_run:
            return True
    return False


def instance_prf(pred, gold, mask, *, num_classes, background=0, min_run=5):
    """INSTANCE macro (precision, recall, f1) as Python floats."""
    correct = [0] * num_classes
    predicted = [0] * num_classes
    found = [0] * num_classes
    gold_count = [0] * num_classes
    for b in range(len(pred)):
        for cls, first, last in _instances(pred[b], mask[b], background):
            if 0 <= cls < num_classes:
                predicted[cls] += 1
                correct[cls] += _has_consecutive(gold[b], cls, first, last, min_run)
        for cls, first, last in _instances(gold[b], mask[b], background):
            if 0 <= cls < num_classes:
                gold_count[cls] += 1
                found[cls] += _has_consecutive(pred[b], cls, first, last, min_run)
    precisions, recalls, f1s = [], [], []
    for c in range(num_classes):
        if c == background or gold_count[c] + predicted[c] == 0:
            continue
        p = _ratio(correct[c], predicted[c])
        r = _ratio(found[c], gold_count[c])
        precisions.append(p)
        recalls.append(r)
        f1s.append(_ratio(2 * p * r, p + r))
    return _mean(precisions), _mean(recalls), _mean(f1s)


def iou_1d(start_a, end_a, start_b, end_b) -> float:
    """1-D IoU of two intervals (scalars)."""
    inter = max(0.0, min(end_a, end_b) - max(start_a, start_b))
    union = (end_a - start_a) + (end_b - start_b) - inter
    return inter / union if union > 0 else 0.0


def _evaluated_items(fields, num_classes, ignore_classes, with_score):
    """List of (example, index, label[, score]) of valid, in-range, not ignored entries."""
    items = []
    batch, width = np.shape(fields["label"])
    for b in range(batch):
        for i in range(width):
            label = int(fields["label"][b][i])
            if not fields["valid"][b][i] or not 0 <= label < num_classes:
                continue
            if label in ignore_classes:
                continue
            item = (b, i, label, float(fields["score"][b][i])) if with_score else (b, i, label)
            items.append(item)
    return items


def match(detections, ground_truth, dets, gts, cls, threshold):
    """Greedy matching of one class at one IoU threshold.

    Returns the class's detections in stable descending-score order as (item, is_tp).
    """
    ordered = sorted((d for d in dets if d[2] == cls), key=lambda d: -d[3])  # stable
    candidates = {}  # example -> ground truths of this class, in index order
    for gb, gi, label in gts:
        if label == cls:
            candidates.setdefault(gb, []).append(gi)
    taken = set()
    outcome = []
    for b, i, _, _ in ordered:
        best_iou, best_gt = -1.0, None
        for gi in candidates.get(b, []):
            gb = b
            if (gb, gi) in taken:
                continue
            iou = iou_1d(
                float(detections["start"][b][i]),
                float(detections["end"][b][i]),
                float(ground_truth["start"][gb][gi]),
                float(ground_truth["end"][gb][gi]),
            )
            if iou > best_iou:  # strict: equal IoU keeps the lowest index seen first
                best_iou, best_gt = iou, (gb, gi)
        is_tp = best_gt is not None and best_iou >= threshold
        if is_tp:
            taken.add(best_gt)
        outcome.append(((b, i, cls, float(detections["score"][b][i])), is_tp))
    return outcome


def average_precision(outcome, num_gt):
    """All-point interpolated AP of an ordered list of (item, is_tp)."""
    precisions, recalls = [], []
    tp = 0
    for k, (_, is_tp) in enumerate(outcome, start=1):
        tp += is_tp
        precisions.append(tp / k)
        recalls.append(tp / num_gt)
    for k in range(len(precisions) - 2, -1, -1):
        precisions[k] = max(precisions[k], precisions[k + 1])
    area, previous_recall = 0.0, 0.0
    for p, r in zip(precisions, recalls, strict=True):
        area += (r - previous_recall) * p
        previous_recall = r
    return area


def detection_scores(
    detections,
    ground_truth,
    *,
    num_classes,
    total_hours,
    ignore_classes=(),
    iou_thresholds=None,
    frr_iou=0.05,
    fa_per_hour=(5.0, 25.0),
):
    """Same keys as `metrics.detection_scores`, with NumPy / float values."""
    thresholds = DEFAULT_IOU_THRESHOLDS if iou_thresholds is None else tuple(iou_thresholds)
    ignore = set(int(c) for c in ignore_classes)
    dets = _evaluated_items(detections, num_classes, ignore, with_score=True)
    gts = _evaluated_items(ground_truth, num_classes, ignore, with_score=False)
    num_gt = [sum(1 for g in gts if g[2] == c) for c in range(num_classes)]
    with_gt = [c for c in range(num_classes) if num_gt[c] > 0]

    def ap_at(threshold):
        row = np.full(num_classes, np.nan)
        for c in with_gt:
            row[c] = average_precision(
                match(detections, ground_truth, dets, gts, c, threshold), num_gt[c]
            )
        return row

    def class_mean(row):
        return float(np.mean(row[with_gt])) if with_gt else float("nan")

    ap = np.stack([ap_at(t) for t in thresholds])
    scores = {
        "AP": ap,
        "mAP": float(np.mean([class_mean(row) for row in ap])),
        "AP@0.05": class_mean(ap_at(0.05)),
        "AP@0.75": class_mean(ap_at(0.75)),
    }
    pooled = _pooled(detections, ground_truth, dets, gts, num_classes, frr_iou)
    total_gt = len(gts)
    for budget in fa_per_hour:
        best = float("nan")
        if total_gt > 0:
            best = 1.0  # the cut before everything: no false alarm, nothing found
            fa = tp = 0
            for k, (item, is_tp) in enumerate(pooled):
                tp += is_tp
                fa += not is_tp
                last_of_score = k + 1 == len(pooled) or pooled[k + 1][0][3] != item[3]
                if last_of_score and fa / total_hours <= budget:
                    best = min(best, 1.0 - tp / total_gt)
        scores[f"FRR@{budget:g}"] = best
    return scores


def _pooled(detections, ground_truth, dets, gts, num_classes, iou):
    """Every class's (item, is_tp) at `iou`, pooled by score (ties: flat index)."""
    pooled = []
    for c in range(num_classes):
        pooled += match(detections, ground_truth, dets, gts, c, iou)
    width = np.shape(detections["label"])[1]
    return sorted(pooled, key=lambda entry: (-entry[0][3], entry[0][0] * width + entry[0][1]))


def pooled_matches(detections, ground_truth, *, num_classes, iou=0.05, ignore_classes=()):
    """`metrics.pooled_matches` for the evaluated detections only: (score float64 [n],
    hit bool [n], number of evaluated ground truths)."""
    ignore = set(int(c) for c in ignore_classes)
    dets = _evaluated_items(detections, num_classes, ignore, with_score=True)
    gts = _evaluated_items(ground_truth, num_classes, ignore, with_score=False)
    pooled = _pooled(detections, ground_truth, dets, gts, num_classes, iou)
    score = np.array([item[3] for item, _ in pooled], np.float64)
    return score, np.array([hit for _, hit in pooled], bool), len(gts)


def tracking_latency(pred, gold, mask, *, num_classes, background=0, min_run=5, max_instances=None):
    """`metrics.tracking_latency` as a `TrackingLatencies` of NumPy arrays [B, M]."""
    batch, length = np.shape(gold)
    slots = length if max_instances is None else max_instances
    latency = np.zeros((batch, slots), np.int64)
    valid = np.zeros((batch, slots), bool)
    instance = np.zeros((batch, slots), bool)
    onset = np.full((batch, slots), -1, np.int64)
    label = np.full((batch, slots), -1, np.int64)
    for b in range(batch):
        runs = [r for r in _instances(gold[b], mask[b], background) if 0 <= r[0] < num_classes]
        for k, (cls, first, last) in enumerate(runs[:slots]):
            instance[b, k], onset[b, k], label[b, k] = True, first, cls
            if _has_consecutive(pred[b], cls, first, last, min_run):
                valid[b, k] = True
                first_correct = min(t for t in range(first, last + 1) if int(pred[b][t]) == cls)
                latency[b, k] = first_correct - first
    return TrackingLatencies(latency, valid, instance, onset, label)


def _taken_ground_truths(detections, ground_truth, dets, gts, cls, threshold):
    """The greedy matching of `match`, as {(example, ground truth index): detection index}."""
    ordered = sorted((d for d in dets if d[2] == cls), key=lambda d: -d[3])  # stable
    taken = {}
    for b, i, _, _ in ordered:
        best_iou, best_gt = -1.0, None
        for gb, gi, label in gts:
            if gb != b or label != cls or (gb, gi) in taken:
                continue
            iou = iou_1d(
                float(detections["start"][b][i]),
                float(detections["end"][b][i]),
                float(ground_truth["start"][gb][gi]),
                float(ground_truth["end"][gb][gi]),
            )
            if iou > best_iou:  # strict: equal IoU keeps the lowest index
                best_iou, best_gt = iou, (gb, gi)
        if best_gt is not None and best_iou >= threshold:
            taken[best_gt] = i
    return taken


def detection_latency(
    detections, emitted, ground_truth, *, num_classes, iou=0.05, ignore_classes=()
):
    """`metrics.detection_latency` as a `DetectionLatencies` of NumPy arrays [B, G]
    (latency float64)."""
    ignore = set(int(c) for c in ignore_classes)
    dets = _evaluated_items(detections, num_classes, ignore, with_score=True)
    gts = _evaluated_items(ground_truth, num_classes, ignore, with_score=False)
    shape = np.shape(ground_truth["label"])
    latency = np.zeros(shape, np.float64)
    detection = np.full(shape, -1, np.int64)
    for c in range(num_classes):
        taken = _taken_ground_truths(detections, ground_truth, dets, gts, c, iou)
        for (b, g), i in taken.items():
            detection[b, g] = i
            latency[b, g] = float(emitted[b][i]) - float(ground_truth["end"][b][g])
    return DetectionLatencies(latency, detection >= 0, detection)


def _quantile(ordered, q):
    """Linear interpolation between the order statistics around position q (n - 1)."""
    position = q * (len(ordered) - 1)
    below = int(np.floor(position))
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def latency_summary(latency, valid):
    """`metrics.latency_summary` as a `LatencySummary` of Python numbers (NaN if none valid)."""
    values = sorted(float(x) for x, v in zip(np.ravel(latency), np.ravel(valid), strict=True) if v)
    if not values:
        return LatencySummary(0, float("nan"), float("nan"), float("nan"))
    mean = sum(values) / len(values)
    return LatencySummary(len(values), mean, _quantile(values, 0.5), _quantile(values, 0.9))


def _onset(gold_row, mask_row, cls) -> float:
    """The first valid frame with gold label `cls`; infinity when there is none."""
    for t, (label, valid) in enumerate(zip(gold_row, mask_row, strict=True)):
        if valid and int(label) == cls:
            return t
    return math.inf


def _is_early(t, onset, hop_s, margin_s) -> bool:
    """t * hop_s < onset * hop_s - margin_s, i.e. the lead (onset - t) * hop_s exceeds the
    margin; a lead within 1e-9 frames of the margin is the margin (not early)."""
    if onset == math.inf:
        return True
    return (onset - t) * hop_s > margin_s + 1e-9 * hop_s * max(1.0, margin_s / hop_s)


def early_frames(pred, gold, mask, *, num_classes, hop_s, margin_s=0.5, background=0):
    """`metrics.early_frames` as an `EarlyFrames` of NumPy arrays (shares float64)."""
    early = np.zeros(num_classes, np.int64)
    predicted = np.zeros(num_classes, np.int64)
    for b in range(len(gold)):
        for c in range(num_classes):
            if c == background:
                continue
            onset = _onset(gold[b], mask[b], c)
            for t in range(len(pred[b])):
                if mask[b][t] and int(pred[b][t]) == c:
                    predicted[c] += 1
                    early[c] += _is_early(t, onset, hop_s, margin_s)
    share = np.array([_ratio(early[c], predicted[c]) for c in range(num_classes)])
    overall = _ratio(early.sum(), predicted.sum())
    return EarlyFrames(share, overall, EarlyFrameCounts(early, predicted))
