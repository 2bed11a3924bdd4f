"""Training throughput, and fold-parallel against sequential folds, side by side.

    python -m benchmarks.train --json benchmarks/results/train.json

MultiQT (default size) and AF-KWS (default size) train steps on random batches of the
shapes the experiments use (MultiQT: 8 calls x 20 s; AF-KWS: 16 crops x 4 s), in audio
seconds trained per wall second. Then the experiments' fold-parallel step (5 folds
stacked, vmap inside shard_map, one jitted call) against 5 sequential calls of the
jitted single-fold step on the same data (target: >= 2x on CPU), vmapped and unrolled
(`experiments.folds.fold_parallel(loop=...)`). Medians over repeats,
after compilation; all devices of the default backend.

`--profile` adds where a MultiQT step's time goes (`profile` in the JSON): the floor of
one jitted dispatch, host-side batch stacking and transfer for 5 folds, forward (loss
only), forward + backward and the whole step (the rest is the optimiser) for one fold
and for 5 folds vmapped and unrolled, XLA's FLOP count of each program with the rate
reached, and one fold's step at each matmul precision ("highest" is the models'
default; "high" / "default" are TF32 / bfloat16 on GPU / TPU). `--trace_dir DIR`
writes a `jax.profiler` trace of three fold-parallel steps (view it with XProf /
TensorBoard's profile plugin).
"""

from __future__ import annotations

import argparse
import dataclasses
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
from multiqt_jax.datasets.features import FEATURES  # 10 ms frames (so are the KWS ones)
from speechkit import accelerator, files
from speechkit.optim import OptimizerConfig, TrainState

FOLDS = 5
QUICK_MULTIQT = (2, 4.0)  # --quick batches: calls x seconds
QUICK_AFKWS = (4, 2.0)  # crops x seconds


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


def _multiqt_loss(net, params, batch, rng):
    """The train step's loss (`multiqt_jax.train.loss`) from raw key data."""
    return mq_train.loss(net, params, batch, jax.random.wrap_key_data(rng))


def _one_fold_functions(net) -> dict:
    """forward (loss), forward + backward (loss and gradients) and the whole step of one
    fold, each (state, batch, rng) -> outputs."""
    loss = functools.partial(_multiqt_loss, net)
    return {
        "forward": lambda state, batch, rng: loss(state.params, batch, rng),
        "forward_backward": lambda state, batch, rng: jax.value_and_grad(loss)(
            state.params, batch, rng
        ),
        "step": lambda state, batch, rng: mq_train.train_step(
            net, state, batch, jax.random.wrap_key_data(rng)
        ),
    }


def _flops(jitted, *args) -> float | None:
    """XLA's FLOP count of one call, from the lowered program (None where none)."""
    try:
        cost = jitted.lower(*args).cost_analysis()
        cost = cost[0] if isinstance(cost, list | tuple) else cost
        return float(cost["flops"])
    except Exception:  # cost analysis is optional and backend-dependent
        return None


def _timed(jitted, args, repeats: int) -> dict:
    seconds = _median_seconds(lambda: jitted(*args), repeats)
    flops = _flops(jitted, *args)
    rate = None if flops is None else round(flops / seconds / 1e9, 2)
    return {
        "seconds": seconds,
        "gflop": None if flops is None else flops / 1e9,
        "gflop_per_s": rate,
    }


def _parts(jit, functions: dict, args, repeats: int) -> dict:
    """Forward, forward + backward and the whole step, each compiled by `jit`, and the
    backward and optimiser shares (differences of medians: noisy when small)."""
    times = {name: _timed(jit(fn), args, repeats) for name, fn in functions.items()}
    times["backward_seconds"] = times["forward_backward"]["seconds"] - times["forward"]["seconds"]
    times["optimizer_seconds"] = times["step"]["seconds"] - times["forward_backward"]["seconds"]
    return times


def _step_by_precision(net, state, batch, rng_data, repeats: int) -> dict:
    """One fold's whole step at each matmul precision of the policy."""
    result = {}
    for precision in accelerator.PRECISIONS:
        other = mq_model.MultiQT(dataclasses.replace(net.config, precision=precision))
        step = jax.jit(_one_fold_functions(other)["step"])
        result[precision] = _median_seconds(lambda step=step: step(state, batch, rng_data), repeats)
    return result


def profile_multiqt(setup: dict, repeats: int) -> dict:
    """Where one MultiQT training step's time goes (see the module docstring)."""
    net, state, batch, mesh = (setup[k] for k in ("net", "state", "batch", "mesh"))
    tiny = jax.jit(lambda x: x + 1)
    started = time.perf_counter()
    stacked = jax.block_until_ready(folds.to_global(folds.stack([batch] * setup["slots"]), mesh))
    host = time.perf_counter() - started
    functions = _one_fold_functions(net)
    result = {
        "dispatch_floor_seconds": _median_seconds(lambda: tiny(np.float32(0)), repeats),
        "host_stack_and_transfer_seconds": host,
        "batch_bytes_per_fold": sum(np.asarray(v).nbytes for v in batch.values()),
        "one_fold": _parts(jax.jit, functions, (state, batch, setup["rng_data"]), repeats),
    }
    for loop in ("vmap", "unroll"):
        jit = functools.partial(folds.fold_parallel, mesh=mesh, loop=loop)
        args = (setup["states"], stacked, setup["rngs"])
        result[f"{FOLDS}_folds_{loop}"] = _parts(jit, functions, args, repeats)
    result["one_fold_step_by_precision"] = _step_by_precision(
        net, state, batch, setup["rng_data"], repeats
    )
    return result


def _trace(setup: dict, directory: str) -> None:
    """A jax.profiler trace of three fold-parallel steps (compiled before tracing)."""
    step = folds.fold_parallel(_one_fold_functions(setup["net"])["step"], setup["mesh"])
    stacked = folds.to_global(folds.stack([setup["batch"]] * setup["slots"]), setup["mesh"])
    args = (setup["states"], stacked, setup["rngs"])
    jax.block_until_ready(step(*args))
    with jax.profiler.trace(directory):
        for _ in range(3):
            jax.block_until_ready(step(*args))


def bench_multiqt(
    rng, repeats: int, profile: bool = False, trace_dir: str | None = None, quick: bool = False
) -> dict:
    config = mq_model.MultiQTConfig(num_classes=7)
    net = mq_model.MultiQT(config)
    batch = multiqt_batch(rng, *QUICK_MULTIQT) if quick else multiqt_batch(rng)
    audio_seconds = batch["audio"].shape[0] * batch["audio"].shape[1] * FEATURES.hop_s
    optimizer = OptimizerConfig()

    def init(key):
        return TrainState.create(net.init(key, mq_train.model_inputs(batch, rows=1)), optimizer)

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
    result = {
        "model": mq_model.describe(config, state.params),
        "batch": "{} calls x {:g} s".format(*QUICK_MULTIQT) if quick else "8 calls x 20 s",
        "step_seconds": one,
        "audio_seconds_per_second": audio_seconds / one,
        "five_folds_parallel_seconds": parallel,
        "five_folds_sequential_seconds": sequential,
        "parallel_speedup": sequential / parallel,
        "five_folds_unrolled_seconds": unrolled,
        "unrolled_speedup": sequential / unrolled,
        "devices": len(jax.devices()),
    }
    setup = {
        "net": net,
        "state": state,
        "states": states,
        "batch": batch,
        "mesh": mesh,
        "rng_data": rng_data,
        "rngs": rngs,
        "slots": slots,
    }
    if profile:
        result["profile"] = profile_multiqt(setup, repeats)
    if trace_dir:
        _trace(setup, trace_dir)
        result["trace_dir"] = trace_dir
    return result


def bench_afkws(rng, repeats: int, quick: bool = False) -> dict:
    config = kws_model.AfKwsConfig()
    net = kws_model.AfKws(config)
    batch = kws_batch(rng, *QUICK_AFKWS) if quick else kws_batch(rng)
    audio_seconds = batch["audio"].shape[0] * batch["audio"].shape[1] * FEATURES.hop_s
    state = kws_train.create_train_state(net, OptimizerConfig(), jax.random.key(0), batch)
    step = jax.jit(functools.partial(kws_train.train_step, net, kws_train.AugmentConfig()))
    seconds = _median_seconds(lambda: step(state, batch, jax.random.key(1)), repeats)
    return {
        "model": kws_model.describe(config, state.params),
        "batch": "{} crops x {:g} s".format(*QUICK_AFKWS) if quick else "16 crops x 4 s",
        "step_seconds": seconds,
        "audio_seconds_per_second": audio_seconds / seconds,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/train.json")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="where a step's time goes")
    parser.add_argument("--trace_dir", default=None, help="write a jax.profiler trace here")
    parser.add_argument("--quick", action="store_true", help="small batches (a rehearsal)")
    args = parser.parse_args(argv)
    accelerator.configure()  # deterministic XLA:GPU kernels, as the experiments train
    rng = np.random.default_rng(0)
    payload = {
        "machine": common.machine(),
        "multiqt": bench_multiqt(rng, args.repeats, args.profile, args.trace_dir, args.quick),
        "afkws": bench_afkws(rng, args.repeats, args.quick),
    }
    for name in ("multiqt", "afkws"):
        _log(f"{name}: {payload[name]}")
    files.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
