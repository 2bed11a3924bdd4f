"""Training throughput, and fold-parallel against sequential folds, side by side.

    python -m benchmarks.train --json benchmarks/results/train.json

Default-size MultiQT and AF-KWS train steps on random batches, in audio seconds trained
per wall second; the experiments' fold-parallel step against 5 sequential calls of the
single-fold step. The JSON adds `fold_forms` (every way
`experiments.folds.fold_parallel` can run 5 folds, at the quick and full presets) and
`loop` (the training loop with a host sync every step against device-side losses);
`--profile` adds where a MultiQT step's time goes, `--trace_dir` a profiler trace.
Every figure, flag and target: docs/benchmarks.md, "Training".
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import statistics
import sys
import tempfile
import time
import types

import jax
import numpy as np

from benchmarks import common
from cskws_jax import model as kws_model
from cskws_jax import train as kws_train
from experiments import common as experiments_common
from experiments import folds, training
from experiments.configs import multiqt as multiqt_configs
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
    for form in ("vmap", "unroll"):
        # timed repeatedly on one state, and "forward" returns no state: nothing donated
        jit = functools.partial(folds.fold_parallel, mesh=mesh, form=form, donate_state=False)
        args = (setup["states"], stacked, setup["rngs"])
        result[f"{FOLDS}_folds_{form}"] = _parts(jit, functions, args, repeats)
    result["one_fold_step_by_precision"] = _step_by_precision(
        net, state, batch, setup["rng_data"], repeats
    )
    return result


def _trace(setup: dict, directory: str) -> None:
    """A jax.profiler trace of three fold-parallel steps (compiled before tracing)."""
    step = setup["kept"]["vmap"]
    stacked = folds.to_global(folds.stack([setup["batch"]] * setup["slots"]), setup["mesh"])
    args = (setup["states"], stacked, setup["rngs"])
    jax.block_until_ready(step(*args))
    with jax.profiler.trace(directory):
        for _ in range(3):
            jax.block_until_ready(step(*args))


def multiqt_setup(rng, quick: bool = False) -> dict:
    """The MultiQT model, its batch and train states (one fold's; `FOLDS` stacked and
    padded to the devices, on them and on the host) shared by the measurements."""
    config = mq_model.MultiQTConfig(num_classes=7)
    net = mq_model.MultiQT(config)
    batch = multiqt_batch(rng, *QUICK_MULTIQT) if quick else multiqt_batch(rng)
    optimizer = OptimizerConfig()

    def init(key):
        return TrainState.create(net.init(key, mq_train.model_inputs(batch, rows=1)), optimizer)

    def one_fold(state, batch, rng):
        return mq_train.train_step(net, state, batch, jax.random.wrap_key_data(rng))

    mesh = folds.fold_mesh()
    slots = folds.fold_slots(FOLDS, mesh)
    host_states = jax.tree_util.tree_map(
        np.asarray, jax.jit(jax.vmap(init))(jax.random.split(jax.random.key(0), slots))
    )
    rng_data = jax.random.key_data(jax.random.key(1))
    return {
        "net": net,
        "quick": quick,
        "one_fold": one_fold,
        "state": jax.jit(init)(jax.random.key(0)),
        "host_states": host_states,
        "states": folds.to_global(host_states, mesh),
        "batch": batch,
        "mesh": mesh,
        "rng_data": rng_data,
        "rngs": folds.to_global(np.stack([np.asarray(rng_data)] * slots), mesh),
        "slots": slots,
        # fold-parallel steps that keep their state (timed repeatedly on one state)
        "kept": {
            form: folds.fold_parallel(one_fold, mesh, form=form, donate_state=False)
            for form in folds.FORMS
        },
    }


def bench_multiqt(
    setup: dict, repeats: int, profile: bool = False, trace_dir: str | None = None
) -> dict:
    net, state, batch, rng_data = (setup[k] for k in ("net", "state", "batch", "rng_data"))
    audio_seconds = batch["audio"].shape[0] * batch["audio"].shape[1] * FEATURES.hop_s
    single = jax.jit(setup["one_fold"])
    one = _median_seconds(lambda: single(state, batch, rng_data), repeats)
    stacked = folds.to_global(folds.stack([batch] * setup["slots"]), setup["mesh"])
    args = (setup["states"], stacked, setup["rngs"])
    parallel = _median_seconds(lambda: setup["kept"]["vmap"](*args), repeats)
    unrolled = _median_seconds(lambda: setup["kept"]["unroll"](*args), repeats)

    def sequential_run():
        return [single(state, batch, rng_data) for _ in range(FOLDS)]

    sequential = _median_seconds(sequential_run, repeats)
    result = {
        "model": mq_model.describe(net.config, state.params),
        "batch": "{} calls x {:g} s".format(*QUICK_MULTIQT) if setup["quick"] else "8 calls x 20 s",
        "step_seconds": one,
        "audio_seconds_per_second": audio_seconds / one,
        "five_folds_parallel_seconds": parallel,
        "five_folds_sequential_seconds": sequential,
        "parallel_speedup": sequential / parallel,
        "five_folds_unrolled_seconds": unrolled,
        "unrolled_speedup": sequential / unrolled,
        "devices": len(jax.devices()),
    }
    if profile:
        result["profile"] = profile_multiqt(setup, repeats)
    if trace_dir:
        _trace(setup, trace_dir)
        result["trace_dir"] = trace_dir
    return result


def afkws_setup(rng, quick: bool = False) -> dict:
    """The AF-KWS model, its batch, train state and jitted step (keeping its state)."""
    net = kws_model.AfKws(kws_model.AfKwsConfig())
    batch = kws_batch(rng, *QUICK_AFKWS) if quick else kws_batch(rng)
    train_step = functools.partial(kws_train.train_step, net, kws_train.AugmentConfig())
    return {
        "net": net,
        "quick": quick,
        "batch": batch,
        "state": kws_train.create_train_state(net, OptimizerConfig(), jax.random.key(0), batch),
        "train_step": train_step,
        "step": jax.jit(train_step),
    }


def bench_afkws(setup: dict, repeats: int) -> dict:
    net, batch, state, step = (setup[k] for k in ("net", "batch", "state", "step"))
    audio_seconds = batch["audio"].shape[0] * batch["audio"].shape[1] * FEATURES.hop_s
    seconds = _median_seconds(lambda: step(state, batch, jax.random.key(1)), repeats)
    return {
        "model": kws_model.describe(net.config, state.params),
        "batch": "{} crops x {:g} s".format(*QUICK_AFKWS) if setup["quick"] else "16 crops x 4 s",
        "step_seconds": seconds,
        "audio_seconds_per_second": audio_seconds / seconds,
    }


def _first_and_steps(run, repeats: int) -> tuple[float, float]:
    """(seconds of the first call, median seconds of the `repeats` calls after it)."""
    started = time.perf_counter()
    jax.block_until_ready(run())
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(run())
        times.append(time.perf_counter() - started)
    return first, statistics.median(times)


def _form_step(form: str, one_fold, mesh, host_states, batch, rngs):
    """A `run()` doing one training step of every fold in `form`, each call on the state
    the last one returned."""
    step = folds.fold_parallel(one_fold, mesh, form=form)
    stacked = folds.to_global(folds.stack([batch] * len(rngs)), mesh)
    keys = folds.to_global(np.stack(rngs), mesh)
    box = [folds.to_global(host_states, mesh)]

    def run():
        box[0], stats = step(box[0], stacked, keys)
        return stats["loss"]

    return run


def _first_fold_params(host_states):
    """The first fold's parameters of stacked host train states."""
    return jax.tree_util.tree_map(lambda leaf: leaf[0], host_states.params)


def fold_forms(preset: str, call_seconds: float, repeats: int, skip=()) -> dict:
    """Compile and step seconds of every fold form at a preset's model and batch (see the
    module docstring); forms in `skip` are left out."""
    config = multiqt_configs.get_config(preset)
    net = mq_model.MultiQT(
        experiments_common.build(
            mq_model.MultiQTConfig, config.model, "config.model", num_classes=7
        )
    )
    batch = multiqt_batch(np.random.default_rng(0), config.train.batch_size, call_seconds)
    optimizer = OptimizerConfig()

    def init(key):
        return TrainState.create(net.init(key, mq_train.model_inputs(batch, rows=1)), optimizer)

    def one_fold(state, batch, rng):
        return mq_train.train_step(net, state, batch, jax.random.wrap_key_data(rng))

    mesh = folds.fold_mesh()
    slots = folds.fold_slots(FOLDS, mesh)
    host_states = jax.tree_util.tree_map(
        np.asarray, jax.jit(jax.vmap(init))(jax.random.split(jax.random.key(0), slots))
    )
    rngs = [np.asarray(jax.random.key_data(jax.random.key(s))) for s in range(slots)]
    steps = config.train.steps
    forms = {}
    for form in folds.FORMS:
        if form in skip:
            continue
        run = _form_step(form, one_fold, mesh, host_states, batch, rngs)
        first, step = _first_and_steps(run, repeats)
        forms[form] = {
            "compile_seconds": max(first - step, 0.0),
            "step_seconds": step,
            "total_seconds": max(first - step, 0.0) + steps * step,
        }
        _log(f"fold forms, {preset}: {form} {forms[form]}")
    winner = min(forms, key=lambda form: forms[form]["total_seconds"])
    return {
        "model": mq_model.describe(net.config, _first_fold_params(host_states)),
        "batch": f"{config.train.batch_size} calls x {call_seconds:g} s",
        "folds": FOLDS,
        "steps": steps,
        "forms": forms,
        "skipped": sorted(skip),
        "winner": winner,
        "default": folds.default_form(),
    }


def bench_fold_forms(call_seconds: float, repeats: int) -> dict:
    """`fold_forms` at the quick and full presets, without the persistent cache."""
    jax.config.update("jax_enable_compilation_cache", False)
    quick = fold_forms("quick", call_seconds, repeats)
    fastest = min(entry["step_seconds"] for entry in quick["forms"].values())
    slow = {form for form, e in quick["forms"].items() if e["step_seconds"] > 5 * fastest}
    return {"quick": quick, "full": fold_forms("full", call_seconds, repeats, skip=slow)}


class Batches:
    """An endless iterator of `batch_at(1)`, `batch_at(2)`, ... (by default one batch
    every time), with the get_state / set_state that `experiments.training.run_loop`
    checkpoints."""

    def __init__(self, batch=None):
        self.batch, self.count = batch, 0

    def batch_at(self, count: int):
        return self.batch

    def __iter__(self):
        return self

    def __next__(self):
        self.count += 1
        return self.batch_at(self.count)

    def get_state(self) -> dict:
        return {"count": self.count}

    def set_state(self, state: dict) -> None:
        self.count = state["count"]


class _NoConfig:
    def to_json(self) -> str:
        return "{}"


def _timed_loop(step, state, iterators, fetch, loop) -> tuple[float, str]:
    """(steps per second, curves.jsonl) of one `run_loop` of `loop.steps` steps after
    `loop.log_every` steps of warm-up, timed from the first log line to the last."""
    stamps = []
    total = loop.log_every + loop.steps
    with tempfile.TemporaryDirectory() as workdir:
        training.run_loop(
            name="loop",
            workdir=workdir,
            loop=types.SimpleNamespace(
                steps=total, log_every=loop.log_every, checkpoint_every=total, keep_checkpoints=1
            ),
            config=_NoConfig(),
            state=state,
            iterators=iterators,
            step=step,
            log=lambda _: stamps.append(time.perf_counter()),
            fetch=fetch,
        )
        with open(os.path.join(workdir, "curves.jsonl")) as lines:
            curves = lines.read()
    return loop.steps / (stamps[-1] - stamps[0]), curves


def _compare_loops(ways: dict, fresh_state, fresh_iterators, loop) -> dict:
    """`ways` {"host_sync": (step, fetch), "device_metrics": (step, fetch)} run in turn
    for `loop.rounds` rounds, each from `fresh_state()` (a donated state is gone)."""
    rates, curves = {name: [] for name in ways}, {}
    for _ in range(loop.rounds):
        for name, (step, fetch) in ways.items():
            rate, curves[name] = _timed_loop(step, fresh_state(), fresh_iterators(), fetch, loop)
            rates[name].append(rate)
    old, new = (statistics.median(rates[name]) for name in ("host_sync", "device_metrics"))
    return {
        "host_sync_steps_per_s": old,
        "device_metrics_steps_per_s": new,
        "ratio": new / old,
        "rounds_steps_per_s": rates,
        "same_curves": curves["host_sync"] == curves["device_metrics"],
        "steps": loop.steps,
        "log_every": loop.log_every,
    }


def loop_multiqt(setup: dict, loop) -> dict:
    """MultiQT's training loop both ways (see the module docstring)."""
    mesh, slots, fold_form = setup["mesh"], setup["slots"], folds.default_form()
    total = loop.log_every + loop.steps
    keys = jax.random.key_data(jax.random.split(jax.random.key(2), total * slots))
    keys = np.asarray(keys).reshape(total, slots, -1)

    def stepper(fold_step, host_sync: bool):
        def step(states, batches, index):
            batch = folds.to_global(folds.stack(batches), mesh)
            states, stats = fold_step(states, batch, folds.to_global(keys[index], mesh))
            if host_sync:
                return states, folds.gather(stats["loss"])[:FOLDS]
            return states, stats["loss"]

        return step

    donating = folds.fold_parallel(setup["one_fold"], mesh, form=fold_form)
    ways = {
        "host_sync": (stepper(setup["kept"][fold_form], True), training.fetch_losses),
        "device_metrics": (
            stepper(donating, False),
            lambda losses: folds.gather_rows(losses)[:, :FOLDS],
        ),
    }
    return {
        "folds": FOLDS,
        "fold_form": fold_form,
        **_compare_loops(
            ways,
            lambda: folds.to_global(setup["host_states"], mesh),
            lambda: [Batches(setup["batch"]) for _ in range(slots)],
            loop,
        ),
    }


def loop_afkws(setup: dict, loop) -> dict:
    """AF-KWS's training loop both ways (see the module docstring)."""
    base = jax.random.key(3)

    def stepper(jitted, host_sync: bool):
        def step(state, batches, index):
            state, stats = jitted(state, batches[0], jax.random.fold_in(base, index))
            return state, float(stats["loss"]) if host_sync else stats["loss"]

        return step

    host_state = jax.device_get(setup["state"])
    ways = {
        "host_sync": (stepper(setup["step"], True), training.fetch_losses),
        "device_metrics": (
            stepper(jax.jit(setup["train_step"], donate_argnums=0), False),
            # float64 means, as the float(loss) of every step gave: the same curves
            functools.partial(training.fetch_losses, dtype=np.float64),
        ),
    }
    return _compare_loops(
        ways, lambda: jax.device_put(host_state), lambda: [Batches(setup["batch"])], loop
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/train.json")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="where a step's time goes")
    parser.add_argument("--trace_dir", default=None, help="write a jax.profiler trace here")
    parser.add_argument("--quick", action="store_true", help="small batches (a rehearsal)")
    parser.add_argument("--loop_steps", type=int, default=30, help="0: no loop measurement")
    parser.add_argument("--loop_log_every", type=int, default=10)
    parser.add_argument("--loop_rounds", type=int, default=2)
    parser.add_argument("--form_call_seconds", type=float, default=30.0, help="0: no fold forms")
    args = parser.parse_args(argv)
    accelerator.configure()  # deterministic XLA:GPU kernels, as the experiments train
    rng = np.random.default_rng(0)
    payload = {"machine": common.machine()}
    multiqt = multiqt_setup(rng, args.quick)
    afkws = afkws_setup(rng, args.quick)
    payload["multiqt"] = bench_multiqt(multiqt, args.repeats, args.profile, args.trace_dir)
    payload["afkws"] = bench_afkws(afkws, args.repeats)
    if args.form_call_seconds > 0:
        payload["fold_forms"] = bench_fold_forms(args.form_call_seconds, args.repeats)
    if args.loop_steps > 0:
        loop = types.SimpleNamespace(
            steps=args.loop_steps, log_every=args.loop_log_every, rounds=args.loop_rounds
        )
        payload["loop"] = {"multiqt": loop_multiqt(multiqt, loop), "afkws": loop_afkws(afkws, loop)}
    for name in ("multiqt", "afkws", "fold_forms", "loop"):
        if name in payload:
            _log(f"{name}: {payload[name]}")
    files.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
