"""Streaming speed of MultiQT and AF-KWS on one CPU core.

    python -m benchmarks.streaming --json benchmarks/results/streaming.json

The process pins itself to one core (sched_setaffinity) before jax starts, so every
figure is per core. For each model (default configs, random weights: speed does not
depend on the values) and block size: the real-time factor of one stream (compute
seconds per second of audio, block by block through the jitted step, as a live stream
would run), per-block latency (median and p99 of the step's wall time), the number of
concurrent streams one core keeps in real time (the largest power-of-two batch whose
batched step takes no longer than the block's duration), the algorithmic latency
(declared look-ahead plus the wait for a block) and max |stream - offline| on the same
input. Blocks are whole output frames (40 ms), so the sizes are 40, 120 and 480 ms.
Targets: MultiQT RTF <= 0.01 at ~100 ms blocks and >= 200 real-time streams per core;
AF-KWS RTF <= 0.01 (the paper reports 0.031).
"""

from __future__ import annotations

import os

if hasattr(os, "sched_setaffinity"):  # before jax creates its thread pools
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import common
from cskws_jax import decode  # noqa: E402
from cskws_jax import model as kws_model  # noqa: E402
from cskws_jax.streaming import StreamDetector  # noqa: E402
from multiqt_jax import model as mq_model  # noqa: E402
from multiqt_jax.streaming import StreamRunner  # noqa: E402

FRAME_S = 0.01
BLOCK_OUTPUTS = (1, 3, 12)  # x 40 ms


_log = common.logger("streaming")


def _block_times(step, blocks, state) -> list[float]:
    """Wall seconds of each step over `blocks` (after one warm-up step)."""
    jax.block_until_ready(step(*blocks[0], state))
    times = []
    for block in blocks:
        started = time.perf_counter()
        out, state = step(*block, state)
        jax.block_until_ready(out)
        times.append(time.perf_counter() - started)
    return times


def _summary(times: list[float], block_s: float) -> dict:
    return {
        "block_ms": round(block_s * 1000),
        "rtf": float(np.sum(times) / (len(times) * block_s)),
        "latency_median_ms": float(np.median(times) * 1000),
        "latency_p99_ms": float(np.percentile(times, 99) * 1000),
    }


def _max_streams(make_step, block_s: float, limit: int) -> int:
    """Largest power-of-two batch whose step takes <= block_s (median of 5)."""
    best, batch = 0, 1
    while batch <= limit:
        step, args = make_step(batch)
        jax.block_until_ready(step(*args))
        times = []
        for _ in range(5):
            started = time.perf_counter()
            jax.block_until_ready(step(*args))
            times.append(time.perf_counter() - started)
        if np.median(times) > block_s:
            break
        best, batch = batch, batch * 2
    return best


def bench_multiqt(seconds: float, rng) -> dict:
    config = mq_model.MultiQTConfig(num_classes=7)
    net = mq_model.MultiQT(config)
    spec = mq_model.streaming_spec(config)
    frames = int(seconds / FRAME_S) // spec.audio_block * spec.audio_block
    audio = rng.normal(size=(1, frames, 40)).astype(np.float32)
    text = rng.random((1, frames // 2, 29)).astype(np.float32)
    params = net.init(jax.random.key(0), audio[:, :40], text[:, :20])
    result = {"model": mq_model.describe(config, params), "blocks": []}
    offline, _ = jax.jit(net.apply)(params, audio, text)
    for outputs in BLOCK_OUTPUTS:
        runner = StreamRunner(net, params, block_outputs=outputs)
        a, t = runner.audio_frames, runner.text_frames
        count = frames // a
        blocks = [
            (audio[:, i * a : (i + 1) * a], text[:, i * t : (i + 1) * t]) for i in range(count)
        ]
        times = _block_times(runner.step, blocks, runner.initial_state(1))
        entry = _summary(times, outputs * spec.output_hop_s)
        entry["algorithmic_latency_ms"] = round(
            (spec.output_latency + outputs) * spec.output_hop_s * 1000
        )
        streamed = runner.logits(audio, text)
        entry["max_abs_stream_minus_offline"] = float(np.max(np.abs(streamed - offline)))

        def make_step(batch, runner=runner, a=a, t=t):
            state = runner.initial_state(batch)
            block = (np.repeat(audio[:, :a], batch, 0), np.repeat(text[:, :t], batch, 0))
            return (lambda *args: runner.step(*args)[0]), (*block, state)

        entry["realtime_streams_per_core"] = _max_streams(
            make_step, outputs * spec.output_hop_s, limit=4096
        )
        result["blocks"].append(entry)
        _log(f"MultiQT {entry}")
    return result


def _compare_detections(offline, streamed, tolerance: float = 1e-4) -> dict:
    """Offline vs streamed detections of one example: how many of each have no
    counterpart (same keyword, start and end within `tolerance` s), and the largest
    difference among the matched ones. A peak decision can flip where two neighbouring
    frames' probabilities are within float rounding of each other."""

    def rows(found):
        valid = np.asarray(found["valid"][0])
        return np.stack(
            [
                np.asarray(found[k][0], np.float64)[valid]
                for k in ("label", "start", "end", "score")
            ],
            axis=1,
        )

    a, b = rows(offline), rows(streamed)
    close = (a[:, None, 0] == b[None, :, 0]) & np.all(
        np.abs(a[:, None, 1:3] - b[None, :, 1:3]) <= tolerance, axis=2
    )
    matched_a, matched_b = close.any(axis=1), close.any(axis=0)
    pairs = np.argwhere(close)
    difference = np.abs(a[pairs[:, 0], 1:] - b[pairs[:, 1], 1:]).max() if len(pairs) else 0.0
    return {
        "detections_offline": int(len(a)),
        "only_offline": int((~matched_a).sum()),
        "only_streamed": int((~matched_b).sum()),
        "max_abs_stream_minus_offline": float(difference),
    }


def bench_afkws(seconds: float, rng) -> dict:
    config = kws_model.AfKwsConfig()
    net = kws_model.AfKws(config)
    frames = int(seconds / FRAME_S) // config.output_stride * config.output_stride
    features = rng.normal(size=(1, frames, 64)).astype(np.float32)
    params = net.init(jax.random.key(0), features[:, :400])
    result = {"model": kws_model.describe(config, params), "blocks": []}
    hop = config.output_stride * FRAME_S
    offline = decode.decode(
        jax.jit(net.apply)(params, features), num_keywords=20, hop_s=hop, max_detections=4096
    )
    for outputs in BLOCK_OUTPUTS:
        detector = StreamDetector(net, params, block_outputs=outputs)
        size = detector.block_frames
        mask = np.ones((1, size), bool)
        blocks = [(features[:, i * size : (i + 1) * size], mask) for i in range(frames // size)]
        times = _block_times(detector.step, blocks, detector.initial_state(1))
        entry = _summary(times, outputs * hop)
        entry["algorithmic_latency_ms"] = round((detector.latency_s + (outputs - 1) * hop) * 1000)
        streamed, _ = detector.detect(features, max_detections=4096)
        entry.update(_compare_detections(offline, streamed))

        def make_step(batch, detector=detector, size=size):
            state = detector.initial_state(batch)
            block = np.repeat(features[:, :size], batch, 0)
            return (lambda *args: detector.step(*args)[0]["peak"]), (
                block,
                np.ones((batch, size), bool),
                state,
            )

        entry["realtime_streams_per_core"] = _max_streams(make_step, outputs * hop, limit=4096)
        result["blocks"].append(entry)
        _log(f"AF-KWS {entry}")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/streaming.json")
    parser.add_argument("--seconds", type=float, default=60.0, help="stream length")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    payload = {
        "machine": common.machine(),
        "stream_seconds": args.seconds,
        "multiqt": bench_multiqt(args.seconds, rng),
        "afkws": bench_afkws(args.seconds, rng),
    }
    common.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
