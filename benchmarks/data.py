"""Corpus build throughput per stage, in audio seconds per wall second (one process).

    python -m benchmarks.data --json benchmarks/results/data.json

Renders a few calls of synthetic_calls (synthesis, channel, recognition, features) and
a few utterances of synthetic_kws (text, synthesis, alignment, channel, features) exactly
as the builders do, in this process, and divides the audio produced by the seconds
each stage took. A build's worker pool multiplies these by about the number of cores.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from benchmarks import common
from cskws_jax import keywords as keyword_list
from cskws_jax.datasets import synthetic_kws
from multiqt_jax.datasets import dialogue, render
from speechkit import files

_log = common.logger("data")


def _summary(items: list) -> dict:
    """Audio seconds, summed stage seconds and throughput of rendered items (each with
    `duration` and `stage_seconds`)."""
    audio = sum(item.duration for item in items)
    totals: dict[str, float] = {}
    for item in items:
        for stage, seconds in item.stage_seconds.items():
            totals[stage] = totals.get(stage, 0.0) + seconds
    throughput = {
        stage: audio / seconds if seconds > 0 else None for stage, seconds in totals.items()
    }
    return {
        "items": len(items),
        "audio_seconds": audio,
        "stage_seconds": totals,
        "audio_seconds_per_second": throughput | {"all_stages": audio / sum(totals.values())},
    }


def bench_calls(count: int) -> dict:
    config = render.RenderConfig()
    render.render_call(
        dialogue.generate_call(np.random.default_rng(99), (1, 1)), np.random.default_rng(99), config
    )  # warm-up: model loading, compilation
    calls = [
        render.render_call(
            dialogue.generate_call(np.random.default_rng([7, index]), (3, 5)),
            np.random.default_rng([8, index]),
            config,
        )
        for index in range(count)
    ]
    return _summary(calls)


def bench_kws(count: int) -> dict:
    config = synthetic_kws.SyntheticKwsBuilderConfig(size="smoke")
    keywords = tuple(keyword_list.load_keywords())

    def job(index):
        return synthetic_kws.UtteranceJob(
            "train", index, 7, keywords, config.duration_s, config.text_config, config.render_config
        )

    synthetic_kws.render_one(job(10_000))  # warm-up
    return _summary([synthetic_kws.render_one(job(index)) for index in range(count)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/data.json")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--utterances", type=int, default=30)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    payload = {
        "machine": common.machine(),
        "synthetic_calls": bench_calls(args.calls),
        "synthetic_kws": bench_kws(args.utterances),
    }
    payload["seconds"] = time.perf_counter() - started
    for name in ("synthetic_calls", "synthetic_kws"):
        _log(f"{name}: {payload[name]['audio_seconds_per_second']}")
    files.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
