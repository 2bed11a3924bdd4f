"""Cost model: FLOPs per second of audio (XLA's cost analysis) and the share of this
CPU's peak the models reach, with the per-layer breakdown that says what dominates.

    python -m benchmarks.cost --json benchmarks/results/cost.json

For MultiQT and AF-KWS (default sizes) on 10 s of input: total FLOPs of the jitted
whole-sequence forward from `jax.jit(f).lower(...).compile().cost_analysis()`, the
measured forward time (median, after compilation), achieved FLOP/s, and the peak of
this CPU estimated as cores x clock x FLOPs per cycle (FMA width from /proc/cpuinfo:
32 float32 FLOPs per cycle with AVX2+FMA, 64 with AVX-512). The per-layer counts are
analytic (2 x kernel x in x out per output frame for each convolution or dense layer).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import jax
import numpy as np

from benchmarks import common
from cskws_jax import model as kws_model
from multiqt_jax import model as mq_model
from speechkit import files

SECONDS = 10.0


_log = common.logger("cost")


def cpu_peak_flops() -> dict:
    """cores x clock x float32 FLOPs per cycle, from /proc/cpuinfo (None if unknown)."""
    try:
        with open("/proc/cpuinfo") as info:
            text = info.read()
    except OSError:
        return {"peak_flops": None}
    megahertz = [float(line.split(":")[1]) for line in text.splitlines() if "cpu MHz" in line]
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    per_cycle = 64 if "avx512f" in flags else 32 if ("avx2" in flags and "fma" in flags) else 8
    cores = os.cpu_count() or 1
    clock = (statistics.mean(megahertz) * 1e6) if megahertz else None
    return {
        "cores": cores,
        "clock_hz": clock,
        "flops_per_cycle_per_core": per_cycle,
        "peak_flops": cores * clock * per_cycle if clock else None,
    }


def _measure(fn, args, repeats: int = 5) -> dict:
    compiled = jax.jit(fn).lower(*args).compile()
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, list) else analysis
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    flops = float(analysis.get("flops", float("nan")))
    return {"flops": flops, "seconds": seconds, "achieved_flops": flops / seconds}


def _conv_layers(prefix, channels, kernels, strides, width_in, frames_in) -> list[tuple]:
    rows, frames, width = [], frames_in, width_in
    for i, (out, kernel, stride) in enumerate(zip(channels, kernels, strides, strict=True)):
        frames = -(-frames // stride)
        rows.append((f"{prefix}.conv{i}", 2 * kernel * width * out * frames))
        width = out
    return rows, width, frames


def multiqt_breakdown(config: mq_model.MultiQTConfig, frames: int) -> list[tuple]:
    audio, audio_width, outputs = _conv_layers(
        "f_a", config.audio_channels, config.audio_kernels, config.audio_strides, 40, frames
    )
    text, text_width, _ = _conv_layers(
        "f_s", config.text_channels, config.text_kernels, config.text_strides, 29, frames // 2
    )
    rows, width = audio + text, audio_width + text_width
    for i, hidden in enumerate(config.dense):
        rows.append((f"g{i}", 2 * width * hidden * outputs))
        width = hidden
    rows.append(("h", 2 * width * config.num_classes * outputs))
    return rows


def afkws_breakdown(config: kws_model.AfKwsConfig, frames: int) -> list[tuple]:
    rows, frames = [("stem", 2 * config.kernel * 64 * config.stem_channels * frames)], frames
    width = config.stem_channels
    for s, stage in enumerate(config.stages):
        for b in range(stage.blocks):
            stride = stage.stride if b == 0 else 1
            frames = -(-frames // stride)
            flops = 2 * config.kernel * (width + stage.channels) * stage.channels * frames
            if stride != 1 or width != stage.channels:
                flops += 2 * width * stage.channels * frames
            rows.append((f"stage{s}.block{b}", flops))
            width = stage.channels
    rows.append(("head_conv", 2 * 3 * width * config.head_channels * frames))
    rows.append(("heads", 2 * config.head_channels * (config.num_classes + 2) * frames))
    return rows


def _report(name, measured, breakdown, peak, seconds) -> dict:
    total = sum(flops for _, flops in breakdown)
    shares = sorted(((layer, flops / total) for layer, flops in breakdown), key=lambda r: -r[1])
    return {
        "model": name,
        "xla_flops_per_audio_second": measured["flops"] / seconds,
        "analytic_flops_per_audio_second": total / seconds,
        "forward_seconds_for_10s": measured["seconds"],
        "achieved_flops": measured["achieved_flops"],
        "fraction_of_peak": measured["achieved_flops"] / peak if peak else None,
        "layer_shares": {layer: round(share, 4) for layer, share in shares},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/cost.json")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    peak = cpu_peak_flops()
    frames = int(SECONDS * 100)

    mq_config = mq_model.MultiQTConfig(num_classes=7)
    mq_net = mq_model.MultiQT(mq_config)
    audio = rng.normal(size=(1, frames, 40)).astype(np.float32)
    text = rng.random((1, frames // 2, 29)).astype(np.float32)
    inputs = {"audio": audio, "text": text}
    mq_params = mq_net.init(jax.random.key(0), inputs)
    multiqt = _report(
        mq_model.describe(mq_config, mq_params),
        _measure(lambda p, i: mq_net.apply(p, i)[0]["logits"], (mq_params, inputs)),
        multiqt_breakdown(mq_config, frames),
        peak["peak_flops"],
        SECONDS,
    )

    kws_config = kws_model.AfKwsConfig()
    kws_net = kws_model.AfKws(kws_config)
    features = rng.normal(size=(1, frames, 64)).astype(np.float32)
    kws_params = kws_net.init(jax.random.key(0), {"audio": features})
    afkws = _report(
        kws_model.describe(kws_config, kws_params),
        _measure(lambda p, f: kws_net.apply(p, {"audio": f})[0]["heatmap"], (kws_params, features)),
        afkws_breakdown(kws_config, frames),
        peak["peak_flops"],
        SECONDS,
    )
    payload = {"machine": common.machine(), "cpu_peak": peak, "multiqt": multiqt, "afkws": afkws}
    for name in ("multiqt", "afkws"):
        _log(f"{name}: {payload[name]}")
    files.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
