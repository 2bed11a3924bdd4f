"""Streaming speed of MultiQT and AF-KWS: on one CPU core, or on one accelerator.

    python -m benchmarks.streaming --json benchmarks/results/streaming.json
    python -m benchmarks.streaming --json benchmarks/results/streaming-gpu.json \
        --accelerator --budget_s 240                    # any backend; the default on GPU/TPU

Per model and block size (40, 120, 480 ms): the real-time factor of one stream, the
per-block latency, the real-time streams per core (or per device), the algorithmic
latency and |stream - offline|. What each figure is and the targets: docs/benchmarks.md,
"Streaming"; the accelerator mode: docs/gpu.md, "The device check".
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from cskws_jax import decode
from cskws_jax import model as kws_model
from cskws_jax.streaming import StreamDetector
from multiqt_jax import model as mq_model
from speechkit import accelerator, files, streaming

BLOCK_OUTPUTS = (1, 3, 12)  # x 40 ms


_log = common.logger("streaming")


def _block_times(step, blocks, state) -> list[float]:
    """Wall seconds of each step over `blocks` ((inputs, mask) pairs) after one warm-up."""
    jax.block_until_ready(step(*blocks[0], state))
    times = []
    for block in blocks:
        started = time.perf_counter()
        out, _, state = step(*block, state)
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


# -- the models' cases: setup, one stream, a batched step ----------------------------------


def multiqt_case(seconds: float, rng) -> dict:
    """Default MultiQT with random weights, one random stream of `seconds`, its offline
    logits."""
    config = mq_model.MultiQTConfig(num_classes=7)
    net = mq_model.MultiQT(config)
    spec = mq_model.streaming_spec(config)
    audio = spec.inputs["audio"]
    frames = int(seconds / audio.hop_s) // audio.block * audio.block
    audio = rng.normal(size=(1, frames, 40)).astype(np.float32)
    text = rng.random((1, frames // 2, 29)).astype(np.float32)
    params = net.init(jax.random.key(0), {"audio": audio[:, :40], "text": text[:, :20]})
    offline = jax.jit(net.apply)(params, {"audio": audio, "text": text})[0]["logits"]
    return {
        "net": net,
        "params": params,
        "spec": spec,
        "audio": audio,
        "text": text,
        "frames": frames,
        "offline": offline,
        "model": mq_model.describe(config, params),
    }


def _stream_blocks(inputs: dict, block_frames: dict, count: int) -> list[tuple[dict, None]]:
    """The first `count` blocks of a stream, as (inputs, mask None: all real) pairs."""
    return [
        (
            {
                name: value[:, i * block_frames[name] : (i + 1) * block_frames[name]]
                for name, value in inputs.items()
            },
            None,
        )
        for i in range(count)
    ]


def multiqt_one_stream(case: dict, outputs: int) -> tuple[dict, streaming.BlockRunner]:
    """RTF, per-block latency, algorithmic latency and max |stream - offline| of one
    stream in blocks of `outputs` output frames."""
    spec, inputs = case["spec"], {"audio": case["audio"], "text": case["text"]}
    runner = streaming.BlockRunner.for_model(case["net"], case["params"], block_outputs=outputs)
    count = case["frames"] // runner.block_frames["audio"]
    blocks = _stream_blocks(inputs, runner.block_frames, count)
    times = _block_times(runner.step, blocks, runner.initial_state(1))
    entry = _summary(times, outputs * spec.output_hop_s)
    entry["algorithmic_latency_ms"] = round(
        (spec.output_latency + outputs) * spec.output_hop_s * 1000
    )
    streamed = runner.run(inputs)[0]["logits"]
    entry["max_abs_stream_minus_offline"] = float(np.max(np.abs(streamed - case["offline"])))
    return entry, runner


def multiqt_batched(case: dict, outputs: int):
    """make(batch) -> (compiled step, (audio, text, state)): one block of `batch`
    streams, inputs on the device, the state donated (threaded through the calls)."""
    runner = streaming.BlockRunner.for_model(case["net"], case["params"], block_outputs=outputs)
    inputs = {"audio": case["audio"], "text": case["text"]}
    return _batched(runner, _stream_blocks(inputs, runner.block_frames, 1)[0][0])


def _batched(runner: streaming.BlockRunner, block: dict):
    """make(batch) -> (compiled step, (inputs, mask, state)) for `batch` copies of one
    block, the state donated."""
    jitted = jax.jit(runner._step, donate_argnums=2)

    def make(batch: int):
        inputs = {name: jnp.repeat(jnp.asarray(value), batch, 0) for name, value in block.items()}
        mask = {name: jnp.ones(value.shape[:2], bool) for name, value in inputs.items()}
        args = (inputs, mask, runner.initial_state(batch))
        return jitted.lower(*args).compile(), args

    return make


def afkws_case(seconds: float, rng) -> dict:
    """Default AF-KWS with random weights, one random stream of `seconds`, its offline
    detections."""
    config = kws_model.AfKwsConfig()
    net = kws_model.AfKws(config)
    audio = kws_model.streaming_spec(config).inputs["audio"]
    frames = int(seconds / audio.hop_s) // audio.block * audio.block
    features = rng.normal(size=(1, frames, 64)).astype(np.float32)
    params = net.init(jax.random.key(0), {"audio": features[:, :400]})
    hop = kws_model.streaming_spec(config).output_hop_s
    heads, mask = jax.jit(net.apply)(params, {"audio": features})
    offline = decode.decode(heads, mask, num_keywords=20, hop_s=hop, max_detections=4096)
    return {
        "net": net,
        "params": params,
        "hop": hop,
        "features": features,
        "frames": frames,
        "offline": offline,
        "model": kws_model.describe(config, params),
    }


def afkws_one_stream(case: dict, outputs: int) -> tuple[dict, StreamDetector]:
    """RTF, per-block latency, algorithmic latency and streamed vs offline detections
    of one stream in blocks of `outputs` output frames."""
    features, hop = case["features"], case["hop"]
    detector = StreamDetector(case["net"], case["params"], block_outputs=outputs)
    count = case["frames"] // detector.block_frames["audio"]
    blocks = _stream_blocks({"audio": features}, detector.block_frames, count)
    times = _block_times(detector.step, blocks, detector.initial_state(1))
    entry = _summary(times, outputs * hop)
    entry["algorithmic_latency_ms"] = round((detector.latency_s + (outputs - 1) * hop) * 1000)
    streamed, _ = detector.detect(features, max_detections=4096)
    entry.update(_compare_detections(case["offline"], streamed))
    return entry, detector


def afkws_batched(case: dict, outputs: int):
    """make(batch) -> (compiled step, (inputs, mask, state)), as `multiqt_batched`."""
    detector = StreamDetector(case["net"], case["params"], block_outputs=outputs)
    block = _stream_blocks({"audio": case["features"]}, detector.block_frames, 1)[0][0]
    return _batched(detector, block)


# -- CPU mode -----------------------------------------------------------------------------


def bench_multiqt(seconds: float, rng) -> dict:
    case = multiqt_case(seconds, rng)
    result = {"model": case["model"], "blocks": []}
    audio, text, spec = case["audio"], case["text"], case["spec"]
    for outputs in BLOCK_OUTPUTS:
        entry, runner = multiqt_one_stream(case, outputs)
        block = _stream_blocks({"audio": audio, "text": text}, runner.block_frames, 1)[0][0]
        entry["realtime_streams_per_core"] = _max_streams(
            _repeated_step(runner, block, lambda out: out["logits"]),
            outputs * spec.output_hop_s,
            limit=4096,
        )
        result["blocks"].append(entry)
        _log(f"MultiQT {entry}")
    return result


def _repeated_step(runner: streaming.BlockRunner, block: dict, pick):
    """make_step(batch) for `_max_streams`: the runner's jitted step on `batch` copies of
    one block, returning pick(outputs)."""

    def make_step(batch: int):
        inputs = {name: np.repeat(value, batch, 0) for name, value in block.items()}
        args = (inputs, None, runner.initial_state(batch))
        return (lambda *args: pick(runner.step(*args)[0])), args

    return make_step


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
    case = afkws_case(seconds, rng)
    result = {"model": case["model"], "blocks": []}
    features, hop = case["features"], case["hop"]
    for outputs in BLOCK_OUTPUTS:
        entry, detector = afkws_one_stream(case, outputs)
        block = _stream_blocks({"audio": features}, detector.block_frames, 1)[0][0]
        entry["realtime_streams_per_core"] = _max_streams(
            _repeated_step(detector, block, lambda out: out["peak"]), outputs * hop, limit=4096
        )
        result["blocks"].append(entry)
        _log(f"AF-KWS {entry}")
    return result


def run_cpu(args, rng) -> dict:
    seconds = args.seconds or 60.0
    return {
        "machine": common.machine(),
        "stream_seconds": seconds,
        "multiqt": bench_multiqt(seconds, rng),
        "afkws": bench_afkws(seconds, rng),
    }


# -- accelerator mode ---------------------------------------------------------------------


def _time_batched(compiled, args, repeats: int = 5, max_s: float = 2.0) -> float:
    """Median wall seconds of `compiled` on `args` (inputs..., state), the state
    threaded from call to call; after one warm-up call; at least 2 calls."""
    *inputs, state = args
    out, _, state = compiled(*inputs, state)
    jax.block_until_ready((out, state))
    times = []
    while len(times) < repeats and (len(times) < 2 or sum(times) < max_s):
        started = time.perf_counter()
        out, _, state = compiled(*inputs, state)
        jax.block_until_ready((out, state))
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def _try_batch(make_step, batch: int) -> tuple[float | None, float, float]:
    """(median step seconds, or None when the device ran out of memory; seconds spent
    compiling; seconds spent running)."""
    started = time.perf_counter()
    try:
        compiled, args = make_step(batch)
        compiled_at = time.perf_counter()
        seconds = _time_batched(compiled, args)
    except jax.errors.JaxRuntimeError as error:
        if "RESOURCE_EXHAUSTED" not in str(error) and "memory" not in str(error).lower():
            raise
        return None, 0.0, time.perf_counter() - started
    return seconds, compiled_at - started, time.perf_counter() - compiled_at


def device_streams(make_step, block_s: float, deadline: float, limit: int) -> dict:
    """Concurrent real-time streams on one device: the largest power-of-two batch whose
    batched step (median) takes <= `block_s` seconds. Batches grow x4 from 1 (one
    compilation each), then the power of two between the last that kept up and the first
    that did not is tried. Stops at `limit`, out of memory, or before a try expected to
    end past `deadline` (perf_counter seconds); then the figure is a lower bound."""
    step_ms, compile_s, fits, slow, stopped_by = {}, [], 0, None, "limit"
    expected = 0.0  # seconds the next try should take: compiling + 4x the last run
    batch = 1
    while batch <= limit:
        if time.perf_counter() + expected > deadline:
            stopped_by = "budget"
            break
        seconds, compiling, running = _try_batch(make_step, batch)
        if seconds is not None:
            step_ms[str(batch)] = round(seconds * 1000, 4)
            compile_s.append(round(compiling, 2))
        if seconds is None or seconds > block_s:
            stopped_by, slow = ("memory" if seconds is None else "real time"), batch
            break
        fits, batch, expected = batch, batch * 4, compiling + 4 * running
    if slow and fits and slow > 2 * fits and time.perf_counter() + expected < deadline:
        seconds, _, _ = _try_batch(make_step, 2 * fits)
        if seconds is not None:
            step_ms[str(2 * fits)] = round(seconds * 1000, 4)
            fits = 2 * fits if seconds <= block_s else fits
    return {
        "realtime_streams_per_device": fits,
        "lower_bound": stopped_by in ("budget", "limit"),
        "stopped_by": stopped_by,
        "step_ms_by_batch": step_ms,
        "compile_s": compile_s,
    }


def run_accelerator(args, rng) -> dict:
    """One-stream figures for every block size of both models, then streams per device,
    40 ms blocks first, until `args.budget_s` is spent."""
    started = time.perf_counter()
    deadline = started + args.budget_s
    seconds = args.seconds or 8.0
    cases = {"multiqt": multiqt_case(seconds, rng), "afkws": afkws_case(seconds, rng)}
    one_stream = {"multiqt": multiqt_one_stream, "afkws": afkws_one_stream}
    batched = {"multiqt": multiqt_batched, "afkws": afkws_batched}
    hop = {"multiqt": cases["multiqt"]["spec"].output_hop_s, "afkws": cases["afkws"]["hop"]}
    results = {name: {"model": case["model"], "blocks": []} for name, case in cases.items()}
    for name, case in cases.items():
        for outputs in args.block_outputs:
            entry, _ = one_stream[name](case, outputs)
            results[name]["blocks"].append(entry)
            _log(f"{name} one stream {entry}")
    for index, outputs in enumerate(args.block_outputs):
        for name, case in cases.items():
            entry = results[name]["blocks"][index]
            if time.perf_counter() >= deadline:
                entry["realtime_streams_per_device"] = None  # no time left to measure
                continue
            make = batched[name](case, outputs)
            entry.update(device_streams(make, outputs * hop[name], deadline, args.max_streams))
            _log(
                f"{name} {entry['block_ms']} ms blocks: {entry['realtime_streams_per_device']} "
                f"streams ({entry['stopped_by']})"
            )
    return {
        "machine": common.machine(),
        "mode": "accelerator",
        "stream_seconds": seconds,
        "budget_s": args.budget_s,
        "elapsed_s": round(time.perf_counter() - started, 1),
        **results,
    }


def _block_list(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/streaming.json")
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="stream length (default 60 on CPU, 8 on an accelerator)",
    )
    parser.add_argument(
        "--accelerator",
        action="store_true",
        help="accelerator mode on any backend (automatic on GPU / TPU)",
    )
    parser.add_argument("--budget_s", type=float, default=240.0, help="accelerator mode")
    parser.add_argument("--max_streams", type=int, default=2**20, help="accelerator mode")
    parser.add_argument(
        "--block_outputs",
        type=_block_list,
        default=BLOCK_OUTPUTS,
        help="accelerator mode: blocks in 40 ms output frames, e.g. 1,3,12",
    )
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="also set the deterministic XLA:GPU flags (slower kernels)",
    )
    args = parser.parse_args(argv)
    accelerated = args.accelerator or accelerator.accelerator_expected()
    if not accelerated and hasattr(os, "sched_setaffinity"):  # before jax's thread pools
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    accelerator.configure(deterministic=args.deterministic)
    rng = np.random.default_rng(0)
    payload = run_accelerator(args, rng) if accelerated else run_cpu(args, rng)
    files.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
