"""Corpus build throughput per stage, in audio seconds per wall second (one process).

    python -m benchmarks.data --json benchmarks/results/data.json

Renders a few calls of synthetic_calls (synthesis, channel, recognition, features) and
a few utterances of synthetic_kws (text, synthesis, alignment, channel, features) exactly
as the builders do, in this process, and divides the audio produced by the seconds
each stage took. A build's worker pool multiplies these by about the number of cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from cskws_jax import keywords as keyword_list
from cskws_jax.datasets import synthetic_kws
from multiqt_jax.datasets import dialogue, render


def _log(message: str) -> None:
    print(f"[benchmarks.data] {message}", file=sys.stderr, flush=True)


def _throughput(audio_seconds: float, stage_seconds: dict) -> dict:
    return {
        stage: audio_seconds / seconds if seconds > 0 else None
        for stage, seconds in stage_seconds.items()
    } | {"all_stages": audio_seconds / sum(stage_seconds.values())}


def bench_calls(count: int) -> dict:
    config = render.RenderConfig()
    totals, audio = {}, 0.0
    render.render_call(
        dialogue.generate_call(np.random.default_rng(99), (1, 1)), np.random.default_rng(99), config
    )  # warm-up: model loading, compilation
    for index in range(count):
        turns = dialogue.generate_call(np.random.default_rng([7, index]), (3, 5))
        call = render.render_call(turns, np.random.default_rng([8, index]), config)
        audio += call.duration
        for stage, seconds in call.stage_seconds.items():
            totals[stage] = totals.get(stage, 0.0) + seconds
    return {
        "items": count,
        "audio_seconds": audio,
        "stage_seconds": totals,
        "audio_seconds_per_second": _throughput(audio, totals),
    }


def bench_kws(count: int) -> dict:
    config = synthetic_kws.KwsConfig(size="smoke")
    keywords = tuple(keyword_list.load_keywords())

    def job(index):
        return synthetic_kws.UtteranceJob(
            "train", index, 7, keywords, config.duration_s, config.text_config, config.render_config
        )

    synthetic_kws.render_one(job(10_000))  # warm-up
    totals, audio = {}, 0.0
    for index in range(count):
        utterance = synthetic_kws.render_one(job(index))
        audio += utterance.duration
        for stage, seconds in utterance.stage_seconds.items():
            totals[stage] = totals.get(stage, 0.0) + seconds
    return {
        "items": count,
        "audio_seconds": audio,
        "stage_seconds": totals,
        "audio_seconds_per_second": _throughput(audio, totals),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/data.json")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--utterances", type=int, default=30)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    payload = {
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
        },
        "synthetic_calls": bench_calls(args.calls),
        "synthetic_kws": bench_kws(args.utterances),
    }
    payload["seconds"] = time.perf_counter() - started
    for name in ("synthetic_calls", "synthetic_kws"):
        _log(f"{name}: {payload[name]['audio_seconds_per_second']}")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json + ".tmp", "w") as out:
        json.dump(payload, out, indent=2)
    os.replace(args.json + ".tmp", args.json)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
