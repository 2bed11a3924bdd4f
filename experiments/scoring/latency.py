"""Latency records of both tasks' scores: pooled latencies -> {count, median_s, p90_s}."""

from __future__ import annotations

import numpy as np

import metrics


def record(latencies: list[np.ndarray], valid: list[np.ndarray]) -> dict:
    """{count, median_s, p90_s} of the pooled valid latencies (seconds;
    `metrics.latency_summary`), None where nothing was found."""
    summary = metrics.latency_summary(np.concatenate(latencies), np.concatenate(valid))
    median, p90 = float(summary.median), float(summary.p90)
    return {
        "count": int(summary.count),
        "median_s": None if np.isnan(median) else median,
        "p90_s": None if np.isnan(p90) else p90,
    }
