"""Fold-parallel training: K train states stacked on a leading fold axis, one step for all.

    mesh = fold_mesh()                                    # every device on a "fold" axis
    slots = fold_slots(num_folds, mesh)                   # folds padded to the device count
    step = fold_parallel(one_fold_step, mesh)             # vmap over folds, shard_map over devices
    states, stats = step(states, batches, rngs)           # every leaf [slots, ...]

A fold's computation does not depend on which device holds it or how many folds share
a device: each device runs `vmap(one_fold_step)` over its own folds, and no collective
mixes folds. The fold count is padded up to a multiple of the device count with copies
of fold 0 (`fold_slots`), whose results are dropped; `unstack` takes real folds back.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

FOLD_AXIS = "fold"
REPLICA_AXIS = "replica"


def fold_mesh(devices=None) -> jax.sharding.Mesh:
    """A mesh over `devices` (default: all) with every device on the "fold" axis.

    A second, size-1 axis stays automatic inside `shard_map` (which makes "fold" manual):
    flax / sequence-layers parameters carry UNCONSTRAINED sharding annotations, which
    jax only accepts where some mesh axis is automatic.
    """
    devices = jax.devices() if devices is None else devices
    auto = jax.sharding.AxisType.Auto
    return jax.make_mesh(
        (len(devices), 1), (FOLD_AXIS, REPLICA_AXIS), axis_types=(auto, auto), devices=devices
    )


def fold_slots(num_folds: int, mesh) -> int:
    """Folds padded up to a multiple of the mesh's device count."""
    devices = mesh.shape[FOLD_AXIS]
    return -(-num_folds // devices) * devices


def pad_folds(stacked, slots: int):
    """Pads every leaf's leading fold axis to `slots` with copies of fold 0."""

    def pad(leaf):
        leaf = np.asarray(leaf) if not isinstance(leaf, jax.Array) else leaf
        missing = slots - leaf.shape[0]
        if missing == 0:
            return leaf
        filler = jnp.repeat(leaf[:1], missing, axis=0)
        return jnp.concatenate([jnp.asarray(leaf), filler], axis=0)

    return jax.tree_util.tree_map(pad, stacked)


def shard_folds(stacked, mesh):
    """Places every leaf with its fold axis split over the mesh's devices."""
    sharding = NamedSharding(mesh, PartitionSpec(FOLD_AXIS))
    return jax.tree_util.tree_map(lambda leaf: jax.device_put(leaf, sharding), stacked)


def fold_parallel(one_fold_fn, mesh, donate_first: bool = False):
    """jit(shard_map(vmap(one_fold_fn))) over the "fold" axis of every argument and
    output (each a pytree whose leaves lead with the fold axis)."""
    spec = PartitionSpec(FOLD_AXIS)
    sharded = jax.shard_map(
        jax.vmap(one_fold_fn),
        mesh=mesh,
        in_specs=spec,
        out_specs=spec,
        axis_names=frozenset({FOLD_AXIS}),
    )
    return jax.jit(sharded, donate_argnums=(0,) if donate_first else ())


def stack(trees):
    """[tree per fold] -> one tree whose leaves lead with the fold axis."""
    return jax.tree_util.tree_map(lambda *leaves: np.stack(leaves), *trees)


def unstack(stacked, num_folds: int):
    """The inverse of `stack` for the first `num_folds` folds (padding dropped)."""
    host = jax.device_get(stacked)
    return [jax.tree_util.tree_map(lambda leaf, i=i: leaf[i], host) for i in range(num_folds)]
