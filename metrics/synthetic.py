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


def label_streams(
    rng: np.random.Generator, batch: int, length: int, num_classes: int, difficulty: float = 0.5
):
    """(pred, gold, mask): int32 [B, T], int32 [B, T], bool [B, T] at one label per timestep.

    difficulty in [0, 1] scales the miss rate (0.3 at 1), the class confusion rate (0.4)
    and the boundary jitter (10 + 30 timesteps). Gold and mask are drawn first, so the
    same seed gives the same gold at every difficulty.
    """
    gold = np.zeros((batch, length), np.int32)
    segments = []  # (row, start, size, class)
    for b in range(batch):
        t = int(rng.integers(0, 200))
        while t < length:
            size, cls = int(rng.integers(20, 300)), int(rng.integers(1, num_classes))
            gold[b, t : t + size] = cls
            segments.append((b, t, size, cls))
            t += size + int(rng.integers(50, 600))
    lengths = rng.integers(length // 2, length + 1, size=batch)
    mask = np.arange(length)[None] < lengths[:, None]

    pred = np.zeros((batch, length), np.int32)
    jitter = int(10 + 30 * difficulty)
    for b, t, size, cls in segments:
        if rng.random() < 0.3 * difficulty:
            continue  # missed
        confused = rng.random() < 0.4 * difficulty
        shown = int(rng.integers(1, num_classes)) if confused else cls
        lo = max(0, t + int(rng.integers(-jitter // 2, jitter)))
        hi = max(lo, t + size + int(rng.integers(-jitter, jitter // 2)))
        pred[b, lo:hi] = shown
    for b in range(batch):  # short false alarms
        for _ in range(int(rng.integers(0, max(1, length // 2000)) + 1)):
            lo = int(rng.integers(0, length))
            pred[b, lo : lo + int(rng.integers(3, 40))] = int(rng.integers(1, num_classes))
    return pred, gold, mask


def detection_sets(
    rng: np.random.Generator,
    batch: int,
    num_dets: int,
    num_gts: int,
    num_classes: int,
    duration: float = 30.0,
    difficulty: float = 0.5,
):
    """(detections, ground_truth): padded dicts [B, D] and [B, G], times in seconds.

    Detection slot i < G is the detector's answer to ground truth i: kept unless missed
    (rate 0.3 difficulty), with jittered ends (up to 4 + 24 difficulty grid steps),
    sometimes the wrong class (0.2 difficulty), scored high. The other slots are false
    alarms (each valid with probability 0.1 + 0.5 difficulty), scored low; the score
    distributions overlap more as difficulty grows. Ground truth is drawn first, so the
    same seed gives the same ground truth at every difficulty.
    """
    grid = int(duration / TIME_GRID)
    start = np.sort(rng.integers(0, grid - 128, (batch, num_gts)), axis=1) * TIME_GRID
    ground_truth = {
        "start": start.astype(np.float32),
        "end": (start + rng.integers(25, 128, start.shape) * TIME_GRID).astype(np.float32),
        "label": rng.integers(0, num_classes, start.shape).astype(np.int32),
        "valid": np.arange(num_gts)[None] < rng.integers(num_gts // 2, num_gts + 1, (batch, 1)),
    }

    slot = np.arange(num_dets)
    answers = np.minimum(slot, max(num_gts - 1, 0))[None].repeat(batch, 0)
    is_answer = (slot < num_gts)[None] & np.ones((batch, 1), bool)
    reach = int(4 + 24 * difficulty)
    jitter = rng.integers(-reach, reach + 1, (batch, num_dets, 2)) * TIME_GRID
    alarm_start = rng.integers(0, grid - 128, (batch, num_dets)) * TIME_GRID
    alarm_end = alarm_start + rng.integers(25, 128, (batch, num_dets)) * TIME_GRID
    if num_gts:
        copy = {k: np.take_along_axis(ground_truth[k], answers, 1) for k in ground_truth}
    else:
        copy = {"start": alarm_start, "end": alarm_end, "label": 0, "valid": False}
    det_start = np.where(is_answer, copy["start"] + jitter[..., 0], alarm_start)
    det_end = np.where(is_answer, copy["end"] + jitter[..., 1], alarm_end)
    confused = rng.random((batch, num_dets)) < 0.2 * difficulty
    random_label = rng.integers(0, num_classes, (batch, num_dets))
    det_label = np.where(is_answer & ~confused, copy["label"], random_label)
    kept = copy["valid"] & (rng.random((batch, num_dets)) >= 0.3 * difficulty)
    alarm = rng.random((batch, num_dets)) < 0.1 + 0.5 * difficulty
    spread = 1 + 4 * difficulty
    score = np.where(
        is_answer, rng.beta(8, spread, (batch, num_dets)), rng.beta(spread, 8, (batch, num_dets))
    )
    detections = {
        "start": np.maximum(det_start, 0).astype(np.float32),
        "end": np.maximum(det_end, np.maximum(det_start, 0)).astype(np.float32),
        "score": score.astype(np.float32),
        "label": det_label.astype(np.int32),
        "valid": np.where(is_answer, kept, alarm),
    }
    return detections, ground_truth
