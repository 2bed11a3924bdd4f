"""Metric speed, side by side in one run: jitted `metrics` vs NumPy and scikit-learn peers.

    python -m benchmarks.metrics --json benchmarks/results/metrics.json

Sequence labelling (`metrics.sequence.sequence_counts`) against scikit-learn, the code
before issue 30 (`_pre_issue_30_counts`) and the NumPy loop references; detection
(`metrics.detection_scores`) against an ActivityNet-style NumPy AP and the loop
reference. Sizes, timing, agreement and targets: docs/benchmarks.md, "Metrics".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.metrics import precision_recall_fscore_support

import metrics
from benchmarks import activitynet_peer, common
from metrics import reference, sequence, synthetic
from speechkit import files

TOLERANCE = 1e-6


def _log(message: str) -> None:
    print(f"[benchmarks.metrics] {message}", file=sys.stderr, flush=True)


class Timing(NamedTuple):
    median: float  # seconds; what the ratios use
    minimum: float  # seconds; the least disturbed run (this VM's timings vary ~1.5x)


def _time(run: Callable[[], object], repeats: int) -> Timing:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(run())
        times.append(time.perf_counter() - start)
    return Timing(statistics.median(times), min(times))


def _time_in_turns(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, Timing]:
    """Each run once per round, `repeats` rounds: drifting load hits all of them alike."""
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            jax.block_until_ready(run())
            times[name].append(time.perf_counter() - start)
    return {name: Timing(statistics.median(t), min(t)) for name, t in times.items()}


def _compile(fn, args) -> tuple[float, Callable]:
    """(compile seconds, compiled function) of a jitted function."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return time.perf_counter() - start, compiled


# --- The sequence metrics before issue 30, frozen for the before/after comparison. ------
# The counting code of metrics/sequence.py as it was (same counts as today's: the tests
# compare both with metrics.reference). Do not edit.


def _pre_issue_30_bin_counts(bins, num_bins):
    bins = bins.reshape(-1)
    bins = jnp.where((bins >= 0) & (bins < num_bins), bins, num_bins)
    if num_bins < 127:
        bins = bins.astype(jnp.int8)
    counts = jnp.zeros(num_bins + 1, jnp.int32).at[bins].add(1, mode="promise_in_bounds")
    return counts[:num_bins]


def _pre_issue_30_in_range(labels, num_classes):
    return jnp.where((labels >= 0) & (labels < num_classes), labels, num_classes)


def _pre_issue_30_shift_right(values, by, fill):
    if by == 0:
        return values
    pad = [(0, 0)] * (values.ndim - 1) + [(by, 0)]
    return jnp.pad(values[..., : values.shape[-1] - by], pad, constant_values=fill)[
        ..., : values.shape[-1]
    ]


def _pre_issue_30_window_all(values, width):
    if width <= 8:
        out = values
        for by in range(1, width):
            out = out & _pre_issue_30_shift_right(values, by, False)
        return out
    window = jax.lax.reduce_window(
        values.astype(jnp.int32),
        0,
        jax.lax.add,
        (1,) * (values.ndim - 1) + (width,),
        (1,) * values.ndim,
        [(0, 0)] * (values.ndim - 1) + [(width - 1, 0)],
    )
    return window == width


def _pre_issue_30_run_events(labels, agree, mask, *, background, min_run):
    in_run = mask & (labels != background)
    same_as_before = _pre_issue_30_shift_right(labels, 1, 0) == labels
    continues = in_run & _pre_issue_30_shift_right(in_run, 1, False) & same_as_before
    starts = in_run & ~continues
    next_continues = jnp.pad(continues[:, 1:], ((0, 0), (0, 1)))
    ends = in_run & ~next_continues
    qualifies = _pre_issue_30_window_all(agree & in_run, min_run)
    if min_run > 1:
        qualifies &= _pre_issue_30_window_all(~starts, min_run - 1)
    return starts, ends, qualifies


def _pre_issue_30_counts(pred, gold, mask, *, num_classes, background=0, min_run=5):
    """(TimestepCounts, InstanceCounts) as computed before issue 30."""
    size = num_classes + 1
    in_range = _pre_issue_30_in_range
    cell = in_range(gold, num_classes) * size + in_range(pred, num_classes)
    confusion = _pre_issue_30_bin_counts(jnp.where(mask, cell, -1), size * size)
    confusion = confusion.reshape(size, size)
    tp = jnp.diagonal(confusion)[:num_classes]
    timestep = metrics.TimestepCounts(
        tp=tp,
        fp=confusion.sum(axis=0)[:num_classes] - tp,
        fn=confusion.sum(axis=1)[:num_classes] - tp,
    )
    sides, agree = (pred, gold), mask & (pred == gold)
    events, ends = [], []
    for labels in sides:
        starts, run_ends, qualifies = _pre_issue_30_run_events(
            labels, agree, mask, background=background, min_run=min_run
        )
        events.append(jnp.where(qualifies, 2, jnp.where(starts, 1, 0)).astype(jnp.int8))
        ends.append(run_ends)
    latest = jax.lax.associative_scan(
        lambda earlier, later: jnp.where(later != 0, later, earlier), jnp.stack(events), axis=-1
    )
    hit = latest == 2
    classes = jnp.stack([in_range(labels, num_classes) for labels in sides])
    side = jnp.arange(len(sides))[:, None, None]
    bins = jnp.where(jnp.stack(ends), (side * 2 + hit) * size + classes, -1)
    counts = _pre_issue_30_bin_counts(bins, len(sides) * 2 * size)
    counts = counts.reshape(len(sides), 2, size)[..., :num_classes]
    hits, instances = counts[:, 1], counts.sum(axis=1)
    instance = metrics.InstanceCounts(
        correct=hits[0], predicted=instances[0], found=hits[1], gold=instances[1]
    )
    return timestep, instance


# -----------------------------------------------------------------------------------------


def bench_sequence(args, rng) -> dict:
    num_classes = args.classes
    pred, gold, mask = synthetic.label_streams(rng, args.batch, args.length, num_classes)
    _log(f"sequence: {args.batch} x {args.length} timesteps, {num_classes} classes")

    def both(pred, gold, mask):
        counts = sequence.sequence_counts(pred, gold, mask, num_classes=num_classes)
        return tuple(metrics.prf_from_counts(c) for c in counts)

    def separately(pred, gold, mask):  # the two public calls under one jit
        return (
            metrics.timestep_prf(pred, gold, mask, num_classes=num_classes),
            metrics.instance_prf(pred, gold, mask, num_classes=num_classes),
        )

    def pre_issue_30(pred, gold, mask):
        counts = _pre_issue_30_counts(pred, gold, mask, num_classes=num_classes)
        return tuple(metrics.prf_from_counts(c) for c in counts)

    host = (pred, gold, mask)
    copy_s = _time(lambda: jax.device_put(host), max(3, args.sequence_repeats // 4))
    on_device = jax.block_until_ready(jax.device_put(host))
    compile_s, jitted = _compile(both, on_device)
    compile_old_s, jitted_old = _compile(pre_issue_30, on_device)
    _, jitted_separately = _compile(separately, on_device)
    timestep, instance = jax.block_until_ready(jitted(*on_device))
    old_timestep, old_instance = jitted_old(*on_device)
    separate_timestep, separate_instance = jitted_separately(*on_device)
    sk_values = precision_recall_fscore_support(
        gold[mask], pred[mask], average="macro", zero_division=0
    )[:3]
    timings = _time_in_turns(
        {
            "jit_timestep_plus_instance": lambda: jitted(*on_device),
            "jit_timestep_plus_instance_pre_issue_30": lambda: jitted_old(*on_device),
            "jit_timestep_then_instance": lambda: jitted_separately(*on_device),
            "jit_timestep_plus_instance_from_numpy": lambda: jitted(*host),
            "sklearn_timestep": lambda: precision_recall_fscore_support(
                gold[mask], pred[mask], average="macro", zero_division=0
            ),
        },
        args.sequence_repeats,
    )
    for name, timing in timings.items():
        _log(f"  {name}: {timing.median * 1e3:.2f} ms (min {timing.minimum * 1e3:.2f} ms)")
    _log(f"  compile {compile_s:.2f} s (pre-issue-30: {compile_old_s:.2f} s)")

    def difference(a, b):
        return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))

    result = {
        "shape": [args.batch, args.length],
        "num_classes": num_classes,
        "inputs": (
            "jitted functions get device arrays (one jax.device_put, timed as "
            "host_to_device_copy); *_from_numpy passes the NumPy arrays, copied on every "
            "call; scikit-learn gets the NumPy arrays and masks them"
        ),
        "seconds": {
            **{name: timing.median for name, timing in timings.items()},
            "host_to_device_copy": copy_s.median,
            "jit_compile": compile_s,
            "jit_compile_pre_issue_30": compile_old_s,
        },
        "min_seconds": {
            **{name: timing.minimum for name, timing in timings.items()},
            "host_to_device_copy": copy_s.minimum,
        },
        "values": {"timestep": list(map(float, timestep)), "instance": list(map(float, instance))},
        "max_abs_difference": {
            "timestep_vs_sklearn": difference(timestep, sk_values),
            "timestep_vs_pre_issue_30": difference(timestep, old_timestep),
            "instance_vs_pre_issue_30": difference(instance, old_instance),
            "timestep_vs_separate_calls": difference(timestep, separate_timestep),
            "instance_vs_separate_calls": difference(instance, separate_instance),
        },
    }
    if not args.skip_reference:
        start = time.perf_counter()
        ref_timestep = reference.timestep_prf(pred, gold, mask, num_classes=num_classes)
        ref_instance = reference.instance_prf(pred, gold, mask, num_classes=num_classes)
        result["seconds"]["numpy_reference_both"] = time.perf_counter() - start
        _log(f"  NumPy loop reference: {result['seconds']['numpy_reference_both']:.2f} s")
        result["max_abs_difference"]["timestep_vs_reference"] = difference(timestep, ref_timestep)
        result["max_abs_difference"]["instance_vs_reference"] = difference(instance, ref_instance)
    return result


def bench_detection(args, rng) -> dict:
    num_classes = args.kws_classes
    detections, ground_truth = synthetic.detection_sets(
        rng, args.det_batch, args.dets, args.gts, num_classes, duration=args.duration
    )
    total_hours = args.det_batch * args.duration / 3600
    num_dets, num_gts = int(detections["valid"].sum()), int(ground_truth["valid"].sum())
    _log(f"detection: {num_dets} detections, {num_gts} ground truths, {num_classes} classes")

    def scores(detections, ground_truth):
        return metrics.detection_scores(
            detections, ground_truth, num_classes=num_classes, total_hours=total_hours
        )

    compile_s, compiled = _compile(scores, (detections, ground_truth))
    result_jit = jax.block_until_ready(compiled(detections, ground_truth))
    jit_s = _time(lambda: compiled(detections, ground_truth), args.repeats)
    _log(f"  jitted detection_scores: {jit_s.median * 1e3:.2f} ms (compile {compile_s:.2f} s)")

    def peer():
        return activitynet_peer.average_precision(
            detections,
            ground_truth,
            num_classes=num_classes,
            iou_thresholds=metrics.DEFAULT_IOU_THRESHOLDS,
        )

    peer_ap = peer()
    peer_s = _time(peer, max(3, args.repeats // 3))
    _log(f"  ActivityNet-style NumPy AP peer: {peer_s.median * 1e3:.1f} ms")
    ap = np.asarray(result_jit["AP"])
    result = {
        "num_detections": num_dets,
        "num_ground_truths": num_gts,
        "num_classes": num_classes,
        "total_hours": total_hours,
        "seconds": {
            "jit_detection_scores": jit_s.median,
            "jit_compile": compile_s,
            "numpy_ap_peer": peer_s.median,
        },
        "min_seconds": {"jit_detection_scores": jit_s.minimum, "numpy_ap_peer": peer_s.minimum},
        "values": {k: float(v) for k, v in result_jit.items() if k != "AP"},
        "max_abs_difference": {"AP_vs_peer": float(np.nanmax(np.abs(ap - peer_ap)))},
        "nan_pattern_agrees_with_peer": bool(np.array_equal(np.isnan(ap), np.isnan(peer_ap))),
    }
    if not args.skip_reference:
        start = time.perf_counter()
        expected = reference.detection_scores(
            detections, ground_truth, num_classes=num_classes, total_hours=total_hours
        )
        result["seconds"]["numpy_reference"] = time.perf_counter() - start
        _log(f"  NumPy loop reference: {result['seconds']['numpy_reference']:.2f} s")
        result["max_abs_difference"]["all_vs_reference"] = max(
            float(np.nanmax(np.abs(np.asarray(result_jit[k]) - np.asarray(expected[k]))))
            for k in expected
        )
    return result


def _peer_ratios(sequence_seconds: dict, detection_seconds: dict) -> dict[str, float]:
    """Peer time over jitted time for the targets, and the sequence metrics' speed-up
    over their implementation before issue 30."""
    seq, det = sequence_seconds, detection_seconds
    new, old = seq["jit_timestep_plus_instance"], seq["jit_timestep_plus_instance_pre_issue_30"]
    return {
        "sklearn_timestep_over_jit_timestep_plus_instance": seq["sklearn_timestep"] / new,
        "sklearn_timestep_over_jit_timestep_plus_instance_pre_issue_30": (
            seq["sklearn_timestep"] / old
        ),
        "pre_issue_30_over_jit_timestep_plus_instance": old / new,
        "numpy_ap_peer_over_jit_detection_scores": det["numpy_ap_peer"]
        / det["jit_detection_scores"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=10, help="detection timing repeats")
    parser.add_argument(
        "--sequence-repeats", type=int, default=40, help="rounds of the sequence timings"
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=20_000)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--det-batch", type=int, default=1000)
    parser.add_argument("--dets", type=int, default=120)
    parser.add_argument("--gts", type=int, default=27)
    parser.add_argument("--kws-classes", type=int, default=20)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per example")
    parser.add_argument(
        "--skip-reference", action="store_true", help="skip the slow NumPy loop references"
    )
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    sequence = bench_sequence(args, rng)
    detection = bench_detection(args, rng)
    ratios = _peer_ratios(sequence["seconds"], detection["seconds"])
    ratios_of_minimums = _peer_ratios(sequence["min_seconds"], detection["min_seconds"])
    if not args.skip_reference:
        seq_s, det_s = sequence["seconds"], detection["seconds"]
        ratios["reference_over_jit_sequence"] = (
            seq_s["numpy_reference_both"] / seq_s["jit_timestep_plus_instance"]
        )
        ratios["reference_over_jit_detection"] = (
            det_s["numpy_reference"] / det_s["jit_detection_scores"]
        )
    differences = [
        *sequence["max_abs_difference"].values(),
        *detection["max_abs_difference"].values(),
    ]
    payload = {
        "machine": common.machine(),
        "arguments": vars(args),
        "sequence": sequence,
        "detection": detection,
        "ratios": ratios,
        "ratios_of_minimums": ratios_of_minimums,
        "targets": {
            "sequence_vs_sklearn_10x_median": ratios[
                "sklearn_timestep_over_jit_timestep_plus_instance"
            ]
            >= 10,
            "detection_vs_numpy_peer_10x": ratios["numpy_ap_peer_over_jit_detection_scores"] >= 10,
        },
        "values_agree_within_1e-6": max(differences) <= TOLERANCE
        and detection["nan_pattern_agrees_with_peer"],
    }
    files.write_json(args.json, payload)
    for name, ratio in ratios.items():
        best = ratios_of_minimums.get(name)
        _log(f"ratio {name}: {ratio:.1f}x" + (f" (of minimums {best:.1f}x)" if best else ""))
    _log(f"values agree within {TOLERANCE}: {payload['values_agree_within_1e-6']}")
    _log(f"wrote {args.json}")
    return 0 if payload["values_agree_within_1e-6"] else 1


if __name__ == "__main__":
    sys.exit(main())
