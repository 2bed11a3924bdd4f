"""Checkpoints of a training run: orbax `CheckpointManager`, last N plus the best.

A checkpoint, at its step, holds the train state (for MultiQT the fold states stacked,
every leaf [folds, ...]; for CS-KWS one model's) and an `extra` JSON dict
{"iterators": [the state of each data iterator, in order], "config": the run's config
as JSON}, written by `experiments.training.run_loop`, so rerunning the same command on
the same workdir continues where it stopped with the same batches. "Best" is the lowest
training loss passed to `save` (the loop passes the last step's, its mean over folds for
MultiQT): the held-out fold must not choose checkpoints.
"""

from __future__ import annotations

import os

import jax
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as policies


def manager(directory: str, keep_last: int) -> ocp.CheckpointManager:
    policy = policies.AnyPreservationPolicy(
        [
            policies.LatestN(n=keep_last),
            policies.BestN(get_metric_fn=lambda m: m["loss"], reverse=True, n=1),
        ]
    )
    options = ocp.CheckpointManagerOptions(preservation_policy=policy, create=True)
    return ocp.CheckpointManager(
        os.path.abspath(directory), options=options, item_names=("state", "extra")
    )


def save(mgr: ocp.CheckpointManager, step: int, state, extra: dict, loss: float) -> None:
    """Saves synchronously (a killed run then never leaves a half-written step behind).
    `state` may hold global arrays split over several processes (each writes its part)."""
    mgr.save(
        step,
        args=ocp.args.Composite(state=ocp.args.StandardSave(state), extra=ocp.args.JsonSave(extra)),
        metrics={"loss": float(loss)},
    )
    mgr.wait_until_finished()


def restore_latest(mgr: ocp.CheckpointManager, template_state):
    """(step, state, extra) of the latest checkpoint, or None without one; the state
    comes back with the shapes, dtypes and shardings of `template_state`."""
    step = mgr.latest_step()
    if step is None:
        return None
    template = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, template_state)
    restored = mgr.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(template), extra=ocp.args.JsonRestore()
        ),
    )
    return step, restored["state"], restored["extra"]
