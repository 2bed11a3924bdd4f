"""The one training loop of the experiments: steps, logging, curves and checkpoints.

    state = training.run_loop(
        name="afkws", workdir=folder, loop=config.train, config=config,
        state=state, iterators=[iter(dataset)], step=step, log=log)

`step(state, batches, index) -> (state, loss)` does one optimiser step on `batches`
(one batch from each of `iterators`, in order) at step `index`; `loss` is a float or a
1-D array (one value per fold). The loop runs steps from the latest checkpoint (or 0)
to `loop.steps`; every `loop.log_every` steps it logs and records the mean loss since
the last log (`experiments.common.Curves`: curves.jsonl and TensorBoard), and every
`loop.checkpoint_every` steps (and at the end) it saves, with `experiments.checkpoints`,
the state and {"iterators": every iterator's state, "config": the run's config as
JSON}; a rerun restores both and continues with the same batches. `loop` is any object
with the fields steps, log_every, checkpoint_every and keep_checkpoints (the configs'
`train` section). Only the writer process (`writer=True`) writes curves.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

import numpy as np

from experiments import checkpoints, common


def _loss_text(loss: np.ndarray) -> str:
    if loss.ndim == 0:
        return f"loss {float(loss):.3f}"
    return "loss per fold " + " ".join(f"{v:.3f}" for v in loss)


def _curve_value(loss: np.ndarray):
    return float(loss) if loss.ndim == 0 else loss.tolist()


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
    with common.Curves(workdir, enabled=writer) as curves:
        for index in range(start, loop.steps):
            state, loss = step(state, [next(it) for it in iterators], index)
            loss = np.asarray(loss)
            recent.append(loss)
            done = index + 1
            if done % loop.log_every == 0 or done == loop.steps:
                mean = np.mean(recent, axis=0)
                curves.add(done, loss=_curve_value(mean))
                log(
                    f"{name}: step {done}/{loop.steps} {_loss_text(mean)} "
                    f"({time.perf_counter() - started:.0f} s)"
                )
                recent = []
            if done % loop.checkpoint_every == 0 or done == loop.steps:
                extra = {
                    "iterators": [it.get_state() for it in iterators],
                    "config": config.to_json(),
                }
                checkpoints.save(mgr, done, state, extra, float(np.mean(loss)))
    return state
