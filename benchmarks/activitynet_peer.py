"""A vectorised NumPy detection-AP peer in the style of ActivityNet's evaluation code.

ActivityNet's `compute_average_precision_detection` evaluates one class at a time:
sort its detections by score, loop over them in Python, compute the IoU against the
ground truths of the same video with NumPy, and lock matched ground truths per IoU
threshold. This peer keeps that structure and vectorises what ActivityNet leaves in
loops (all thresholds at once per detection, the AP curve with cumsum), and follows the
tie rules of docs/metrics.md (stable score order, lowest ground-truth index on equal IoU,
IoU 0 for zero-length segments) so its numbers can be compared with `metrics`.
It computes AP only (no FRR): the part both implement.
"""

from __future__ import annotations

import numpy as np


def _interpolated_ap(tp: np.ndarray, num_gt: int) -> np.ndarray:
    """All-point interpolated AP per threshold row of tp [K, N] (N in score order)."""
    if tp.shape[1] == 0:
        return np.zeros(tp.shape[0])
    tp_cum = np.cumsum(tp, axis=1)
    precision = tp_cum / np.arange(1, tp.shape[1] + 1)
    recall_step = tp / num_gt
    envelope = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]
    return np.sum(recall_step * envelope, axis=1)


def class_average_precision(det_example, det_start, det_end, det_score, gt_by_example, thresholds):
    """AP [K] of one class.

    det_*: [N] arrays of this class's detections; gt_by_example: example id ->
    (start [g], end [g]) of this class's ground truths in index order.
    """
    order = np.argsort(-det_score, kind="stable")
    thresholds = np.asarray(thresholds)[:, None]
    locked = {b: np.zeros((len(thresholds), len(s)), bool) for b, (s, _) in gt_by_example.items()}
    tp = np.zeros((len(thresholds), len(order)), bool)
    for k, d in enumerate(order):
        example = det_example[d]
        if example not in gt_by_example:
            continue
        gt_start, gt_end = gt_by_example[example]
        inter = np.clip(
            np.minimum(det_end[d], gt_end) - np.maximum(det_start[d], gt_start), 0, None
        )
        union = (det_end[d] - det_start[d]) + (gt_end - gt_start) - inter
        iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
        open_iou = np.where(locked[example], -2.0, iou[None])  # [K, g]
        best = np.argmax(open_iou, axis=1)
        hit = open_iou[np.arange(len(best)), best] >= thresholds[:, 0]
        tp[:, k] = hit
        locked[example][np.arange(len(best))[hit], best[hit]] = True
    num_gt = sum(len(s) for s, _ in gt_by_example.values())
    return _interpolated_ap(tp, num_gt)


def average_precision(detections, ground_truth, *, num_classes, iou_thresholds):
    """AP [K, num_classes] (NaN where a class has no ground truth) from padded dicts."""
    det_b, det_i = np.nonzero(detections["valid"])
    gt_b, gt_i = np.nonzero(ground_truth["valid"])
    det_label = detections["label"][det_b, det_i]
    gt_label = ground_truth["label"][gt_b, gt_i]
    ap = np.full((len(iou_thresholds), num_classes), np.nan)
    for c in range(num_classes):
        in_class = gt_label == c
        if not in_class.any():
            continue
        gt_by_example = {}
        for b in np.unique(gt_b[in_class]):
            rows = gt_i[in_class & (gt_b == b)]
            gt_by_example[int(b)] = (
                ground_truth["start"][b, rows].astype(np.float64),
                ground_truth["end"][b, rows].astype(np.float64),
            )
        mine = det_label == c
        ap[:, c] = class_average_precision(
            det_b[mine],
            detections["start"][det_b[mine], det_i[mine]].astype(np.float64),
            detections["end"][det_b[mine], det_i[mine]].astype(np.float64),
            detections["score"][det_b[mine], det_i[mine]],
            gt_by_example,
            iou_thresholds,
        )
    return ap
