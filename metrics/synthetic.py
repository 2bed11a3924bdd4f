"""Seeded synthetic predictions for demos and benchmarks (NumPy only).

Label streams look like a tracker's output: gold is a sequence of segments (background
between instances of varying length), predictions shift the boundaries, swap some
classes, miss some instances and add short false alarms. Detections look like a
keyword detector's: jittered copies of most ground truths with a confusion rate, plus
scored false alarms. Times sit on a 1/128 s grid, which float32 represents exactly.
"""

from __future__ import annotations

import numpy as np

TIME_GRID = 1 / 128  # seconds


def label_streams(rng: np.random.Generator, batch: int, length: int, num_classes: int):
    """(pred, gold, mask): int32 [B, T], int32 [B, T], bool [B, T] at one label per timestep."""
    gold = np.zeros((batch, length), np.int32)
    pred = np.zeros((batch, length), np.int32)
    for b in range(batch):
        t = int(rng.integers(0, 200))
        while t < length:
            size = int(rng.integers(20, 300))
            cls = int(rng.integers(1, num_classes))
            gold[b, t : t + size] = cls
            if rng.random() > 0.15:  # found, with jittered boundaries and maybe confused
                shown = cls if rng.random() > 0.2 else int(rng.integers(1, num_classes))
                lo = max(0, t + int(rng.integers(-15, 25)))
                hi = max(lo, t + size + int(rng.integers(-25, 15)))
                pred[b, lo:hi] = shown
            t += size + int(rng.integers(50, 600))
        for _ in range(int(rng.integers(0, max(1, length // 2000)) + 1)):  # false alarms
            lo = int(rng.integers(0, length))
            pred[b, lo : lo + int(rng.integers(3, 40))] = int(rng.integers(1, num_classes))
    lengths = rng.integers(length // 2, length + 1, size=batch)
    mask = np.arange(length)[None] < lengths[:, None]
    return pred, gold, mask


def detection_sets(
    rng: np.random.Generator,
    batch: int,
    num_dets: int,
    num_gts: int,
    num_classes: int,
    duration: float = 30.0,
):
    """(detections, ground_truth): padded dicts [B, D] and [B, G], times in seconds."""
    grid = int(duration / TIME_GRID)
    start = np.sort(rng.integers(0, grid - 128, (batch, num_gts)), axis=1) * TIME_GRID
    ground_truth = {
        "start": start.astype(np.float32),
        "end": (start + rng.integers(25, 128, start.shape) * TIME_GRID).astype(np.float32),
        "label": rng.integers(0, num_classes, start.shape).astype(np.int32),
        "valid": np.arange(num_gts)[None] < rng.integers(num_gts // 2, num_gts + 1, (batch, 1)),
    }
    source = rng.integers(0, num_gts, (batch, num_dets))
    is_copy = rng.random((batch, num_dets)) < 0.6
    jitter = rng.integers(-16, 17, (batch, num_dets, 2)) * TIME_GRID
    random_start = rng.integers(0, grid - 128, (batch, num_dets)) * TIME_GRID
    det_start = np.where(
        is_copy, np.take_along_axis(ground_truth["start"], source, 1) + jitter[..., 0], random_start
    )
    det_end = np.where(
        is_copy,
        np.take_along_axis(ground_truth["end"], source, 1) + jitter[..., 1],
        random_start + rng.integers(25, 128, (batch, num_dets)) * TIME_GRID,
    )
    confused = rng.random((batch, num_dets)) < 0.1
    det_label = np.where(
        is_copy & ~confused,
        np.take_along_axis(ground_truth["label"], source, 1),
        rng.integers(0, num_classes, (batch, num_dets)),
    )
    score = np.where(is_copy, rng.beta(5, 2, (batch, num_dets)), rng.beta(2, 5, (batch, num_dets)))
    detections = {
        "start": det_start.astype(np.float32),
        "end": np.maximum(det_end, det_start).astype(np.float32),
        "score": score.astype(np.float32),
        "label": det_label.astype(np.int32),
        "valid": np.ones((batch, num_dets), bool),
    }
    return detections, ground_truth
