"""Pure, jittable evaluation metrics for real-time speech tracking.

Definitions (normative, with worked examples): `docs/metrics.md`.

Sequence labelling (MultiQT): `timestep_prf`, `instance_prf`, their count-level
functions and `prf_from_counts`. Detection (CS-KWS): `iou_1d`, `detection_scores`,
`pooled_matches` (the per-detection outcomes behind FRR and the curves). Latency:
`tracking_latency`, `detection_latency` and `latency_summary`. Early question frames
(MultiQT predictions before the question is spoken): `early_frames`, its counts
`early_frame_counts` and `early_frames_from_counts`.
NumPy loop references live in `metrics.reference`.
"""

from metrics.checked import checked
from metrics.detection import DEFAULT_IOU_THRESHOLDS, detection_scores, iou_1d, pooled_matches
from metrics.early import (
    EarlyFrameCounts,
    EarlyFrames,
    early_frame_counts,
    early_frames,
    early_frames_from_counts,
)
from metrics.latency import (
    DetectionLatencies,
    LatencySummary,
    TrackingLatencies,
    detection_latency,
    latency_summary,
    tracking_latency,
)
from metrics.sequence import (
    PRF,
    InstanceCounts,
    TimestepCounts,
    eligible_classes,
    instance_counts,
    instance_prf,
    per_class_prf,
    prf_from_counts,
    sequence_counts,
    timestep_counts,
    timestep_prf,
)

__all__ = [
    "DEFAULT_IOU_THRESHOLDS",
    "DetectionLatencies",
    "EarlyFrameCounts",
    "EarlyFrames",
    "PRF",
    "InstanceCounts",
    "LatencySummary",
    "TimestepCounts",
    "TrackingLatencies",
    "checked",
    "detection_latency",
    "detection_scores",
    "early_frame_counts",
    "early_frames",
    "early_frames_from_counts",
    "eligible_classes",
    "instance_counts",
    "instance_prf",
    "iou_1d",
    "latency_summary",
    "per_class_prf",
    "pooled_matches",
    "prf_from_counts",
    "sequence_counts",
    "timestep_counts",
    "timestep_prf",
    "tracking_latency",
]
