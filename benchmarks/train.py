"""Training throughput, and fold-parallel against sequential folds, side by side.

    python -m benchmarks.train --json benchmarks/results/train.json

MultiQT (default size) and AF-KWS (default size) train steps on random batches of the
shapes the experiments use (MultiQT: 8 calls x 20 s; AF-KWS: 16 crops x 4 s), in audio
seconds trained per wall second. Then the experiments' fold-parallel step (5 folds
stacked, vmap inside shard_map, one jitted call) against 5 sequential calls of the
jitted single-fold step on the same data (target: >= 2x on CPU), vmapped and unrolled
(`experiments.folds.fold_parallel(loop=...)`). Medians over repeats,
after compilation; all devices of the default backend.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time

import jax
import numpy as np

from benchmarks import common
from cskws_jax import model as kws_model
from cskws_jax import train as kws_train
from experiments import folds
from multiqt_jax import model as mq_model
from multiqt_jax import train as mq_train
from speechkit.optim import OptimizerConfig, TrainState

FOLDS = 5


_log = common.logger("train")


def _median_seconds(run, repeats: int) -> float:
    jax.block_until_ready(run())  # compile
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(run())
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def multiqt_batch(rng, batch: int = 8, seconds: float = 20.0, classes: int = 7) -> dict:
    frames = int(seconds * 100)
    return {
        "audio": rng.normal(size=(batch, frames, 40)).astype(np.float32),
        "text": rng.random((batch, frames // 2, 29)).astype(np.float32),
        "labels": rng.integers(0, classes, (batch, frames)).astype(np.int32),
        "audio_mask": np.ones((batch, frames), bool),
        "text_mask": np.ones((batch, frames // 2), bool),
        "example_mask": np.ones(batch, bool),
    }


def kws_batch(rng, batch: int = 16, seconds: float = 4.0) -> dict:
    frames, events = int(seconds * 100), 12
    start = np.sort(rng.uniform(0, seconds - 0.5, (batch, events)), axis=1).astype(np.float32)
    return {
        "audio": rng.normal(size=(batch, frames, 64)).astype(np.float32),
        "audio_mask": np.ones((batch, frames), bool),
        "example_mask": np.ones(batch, bool),
        "start": start,
        "end": start + 0.4,
        "label": rng.integers(0, 21, (batch, events)).astype(np.int32),
        "valid": np.ones((batch, events), bool),
    }


def bench_multiqt(rng, repeats: int) -> dict:
    config = mq_model.MultiQTConfig(num_classes=7)
    net = mq_model.MultiQT(config)
    batch = multiqt_batch(rng)
    audio_seconds = batch["audio"].shape[0] * batch["audio"].shape[1] / 100
    optimizer = OptimizerConfig()

    def init(key):
        return TrainState.create(net.init(key, batch["audio"][:1], batch["text"][:1]), optimizer)

    def one_fold(state, batch, rng):
        return mq_train.train_step(net, state, batch, jax.random.wrap_key_data(rng))

    single = jax.jit(one_fold)
    state = jax.jit(init)(jax.random.key(0))
    rng_data = jax.random.key_data(jax.random.key(1))
    one = _median_seconds(lambda: single(state, batch, rng_data), repeats)

    mesh = folds.fold_mesh()
    slots = folds.fold_slots(FOLDS, mesh)
    states = folds.to_global(
        jax.tree_util.tree_map(
            np.asarray, jax.jit(jax.vmap(init))(jax.random.split(jax.random.key(0), slots))
        ),
        mesh,
    )
    stacked = folds.to_global(folds.stack([batch] * slots), mesh)
    rngs = folds.to_global(np.stack([np.asarray(rng_data)] * slots), mesh)
    parallel_step = folds.fold_parallel(one_fold, mesh)
    parallel = _median_seconds(lambda: parallel_step(states, stacked, rngs), repeats)
    unrolled_step = folds.fold_parallel(one_fold, mesh, loop="unroll")
    unrolled = _median_seconds(lambda: unrolled_step(states, stacked, rngs), repeats)

    def sequential_run():
        return [single(state, batch, rng_data) for _ in range(FOLDS)]

    sequential = _median_seconds(sequential_run, repeats)
    return {
        "model": mq_model.describe(config, state.params),
        "batch": "8 calls x 20 s",
        "step_seconds": one,
        "audio_seconds_per_second": audio_seconds / one,
        "five_folds_parallel_seconds": parallel,
        "five_folds_sequential_seconds": sequential,
        "parallel_speedup": sequential / parallel,
        "five_folds_unrolled_seconds": unrolled,
        "unrolled_speedup": sequential / unrolled,
        "devices": len(jax.devices()),
    }


def bench_afkws(rng, repeats: int) -> dict:
    config = kws_model.AfKwsConfig()
    net = kws_model.AfKws(config)
    batch = kws_batch(rng)
    audio_seconds = batch["audio"].shape[0] * batch["audio"].shape[1] / 100
    state = kws_train.create_train_state(net, OptimizerConfig(), jax.random.key(0), batch)
    step = jax.jit(functools.partial(kws_train.train_step, net, kws_train.AugmentConfig()))
    seconds = _median_seconds(lambda: step(state, batch, jax.random.key(1)), repeats)
    return {
        "model": kws_model.describe(config, state.params),
        "batch": "16 crops x 4 s",
        "step_seconds": seconds,
        "audio_seconds_per_second": audio_seconds / seconds,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/train.json")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    payload = {
        "machine": common.machine(),
        "multiqt": bench_multiqt(rng, args.repeats),
        "afkws": bench_afkws(rng, args.repeats),
    }
    for name in ("multiqt", "afkws"):
        _log(f"{name}: {payload[name]}")
    common.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
