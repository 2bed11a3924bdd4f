"""The sliding-window classifier's training step with its two max-pools, side by side.

    python -m benchmarks.pooling --json benchmarks/results/pooling.json

`cskws_jax.baselines.max_pool` (strict comparisons, the classifier's pooling) against
`flax.linen.max_pool` (XLA's reduce_window, whose gradient XLA:CPU runs as
select-and-scatter, over index arrays of the whole input), each inside the classifier's
jitted training step (`cskws_jax.baselines.train_step`, default `WindowConfig`, 20
keywords) at the quick preset's batch (16 crops x 4 s, `experiments/configs/cskws.py`) on
random log-mel. Compiled first; then the two steps are timed in turns, `--calls` steps per
turn for `--rounds` rounds: the median seconds per step of each, their ratio, and whether
one step from the same state gives the same parameters bit for bit.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import flax.linen as nn
import jax
import numpy as np

from benchmarks import common
from benchmarks.train import kws_batch
from cskws_jax import baselines
from speechkit import files

NUM_KEYWORDS = 20

_log = common.logger("pooling")


def flax_max_pool(x, size: int):
    """`baselines.max_pool`'s arguments, flax's pooling."""
    return nn.max_pool(x, (size,), strides=(size,), padding="SAME")


@contextlib.contextmanager
def _pooling(pool):
    """The classifier built with `pool` while open (it is traced there)."""
    kept = baselines.max_pool
    baselines.max_pool = pool
    try:
        yield
    finally:
        baselines.max_pool = kept


def _compiled_step(pool, state, batch, config):
    """A jitted training step traced with `pool`, and its first result."""
    step = jax.jit(lambda state, batch: baselines.train_step(state, batch, config, NUM_KEYWORDS))
    with _pooling(pool):
        first = jax.block_until_ready(step(state, batch))
    return step, first


def _seconds_per_step(step, state, batch, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        result = step(state, batch)
    jax.block_until_ready(result)
    return (time.perf_counter() - started) / calls


def measure(rounds: int, calls: int, crops: int = 16, seconds: float = 4.0) -> dict:
    config = baselines.WindowConfig()
    batch = kws_batch(np.random.default_rng(0), crops, seconds)
    state = baselines.create_train_state(config, NUM_KEYWORDS, jax.random.key(0))
    forms = {"comparisons": baselines.max_pool, "flax_reduce_window": flax_max_pool}
    steps, firsts = {}, {}
    for name, pool in forms.items():
        steps[name], firsts[name] = _compiled_step(pool, state, batch, config)
    times = {name: [] for name in forms}
    for _ in range(rounds):
        for name, step in steps.items():
            times[name].append(_seconds_per_step(step, state, batch, calls))
    median = {name: statistics.median(values) for name, values in times.items()}
    new_params = [jax.tree_util.tree_leaves(firsts[name][0].params) for name in forms]
    return {
        "batch": f"{crops} crops x {seconds:g} s",
        "rounds": rounds,
        "calls_per_round": calls,
        "step_seconds": median,
        "min_step_seconds": {name: min(values) for name, values in times.items()},
        "flax_over_comparisons": median["flax_reduce_window"] / median["comparisons"],
        "same_parameters_after_one_step": all(
            np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(*new_params, strict=True)
        ),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/pooling.json")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5, help="steps per timed turn")
    args = parser.parse_args(argv)
    payload = {"machine": common.machine(), **measure(args.rounds, args.calls)}
    _log(f"{payload}")
    files.write_json(args.json, payload)
    _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
