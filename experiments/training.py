"""The one training loop of the experiments: steps, logging, curves and checkpoints.

    state = training.run_loop(
        name="afkws", workdir=folder, loop=config.train, config=config,
        state=state, iterators=[iter(dataset)], step=step, log=log)

`run_loop` runs `step(state, batches, index) -> (state, loss)` from the latest checkpoint
to `loop.steps`, logs the mean loss and records curves every `loop.log_every` steps, and
checkpoints state, iterators and config every `loop.checkpoint_every` steps, so a rerun
continues with the same batches; `fetch_losses` reads losses back only at log steps.

Specification: docs/architecture.md#the-training-loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

import jax
import numpy as np

from experiments import checkpoints, common
from speechkit import progress


def fetch_losses(losses: Sequence, dtype=None) -> np.ndarray:
    """The default `fetch`: `losses` (device arrays, numpy arrays or floats) as one host
    array [n, ...], every transfer started before any is waited for. A step returning
    `float(loss)` gave float64 losses, so float64 means: `dtype=np.float64` keeps those
    means when the step returns the float32 device loss instead."""
    return np.asarray(jax.device_get(list(losses)), dtype)


def _loss_text(loss: np.ndarray) -> str:
    if loss.ndim == 0:
        return f"loss {float(loss):.3f}"
    return "loss per fold " + " ".join(f"{v:.3f}" for v in loss)


def _curve_value(loss: np.ndarray):
    return float(loss) if loss.ndim == 0 else loss.tolist()


def _host(fetch: Callable, losses: list) -> np.ndarray:
    """`fetch(losses)`, checked, as one C-ordered array: `np.mean` over its rows adds the
    same values in the same order as it did over the list of per-step host arrays."""
    rows = np.ascontiguousarray(fetch(losses))
    if rows.shape[:1] != (len(losses),):
        raise ValueError(f"fetch: expected {len(losses)} rows, got shape {rows.shape}")
    return rows


def run_loop(
    *,
    name: str,
    workdir: str,
    loop,
    config,
    state,
    iterators: Sequence,
    step: Callable,
    log: Callable[[str], None],
    describe: Callable[[object], str] | None = None,
    writer: bool = True,
    fetch: Callable[[list], np.ndarray] = fetch_losses,
):
    """Trains `state` to `loop.steps` (see the module docstring) and returns it.
    `describe(state)` gives the line logged at a fresh start."""
    mgr = checkpoints.manager(os.path.join(workdir, "checkpoints"), loop.keep_checkpoints)
    start = 0
    restored = checkpoints.restore_latest(mgr, state)
    if restored is not None:
        start, state, extra = restored
        if len(extra["iterators"]) != len(iterators):
            raise ValueError(
                f"{workdir}/checkpoints step {start}: {len(extra['iterators'])} iterator "
                f"states, expected {len(iterators)} (a checkpoint of another run?)"
            )
        for iterator, saved in zip(iterators, extra["iterators"], strict=True):
            iterator.set_state(saved)
        log(f"{name}: resumed at step {start}")
    elif describe is not None:
        log(f"{name}: {describe(state)}")
    recent, started = [], time.perf_counter()
    with (
        common.Curves(workdir, enabled=writer) as curves,
        progress.bar(loop.steps, f"{name} training", "step", initial=start) as shown,
    ):
        for index in range(start, loop.steps):
            state, loss = step(state, [next(it) for it in iterators], index)
            recent.append(loss)
            shown.update(1)
            done, last = index + 1, None
            if done % loop.log_every == 0 or done == loop.steps:
                rows = _host(fetch, recent)
                mean, last = np.mean(rows, axis=0), rows[-1]
                curves.add(done, loss=_curve_value(mean))
                log(
                    f"{name}: step {done}/{loop.steps} {_loss_text(mean)} "
                    f"({time.perf_counter() - started:.0f} s)"
                )
                recent = []
            if done % loop.checkpoint_every == 0 or done == loop.steps:
                if last is None:
                    last = _host(fetch, [loss])[0]
                extra = {
                    "iterators": [it.get_state() for it in iterators],
                    "config": config.to_json(),
                }
                checkpoints.save(mgr, done, state, extra, float(np.mean(last)))
    return state
