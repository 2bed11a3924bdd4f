"""Fold-parallel training: K train states stacked on a leading fold axis, one step for all.

    mesh = fold_mesh()                                    # every device on a "fold" axis
    slots = fold_slots(num_folds, mesh)                   # folds padded to the device count
    mine = local_slots(mesh, slots)                       # the slots this process feeds
    step = fold_parallel(one_fold_step, mesh)             # vmap over folds, shard_map over devices
    states, stats = step(to_global(local_states, mesh), to_global(local_batches, mesh), ...)
    losses = gather_rows([stats["loss"], ...])            # [steps, slots] on every process

A fold's computation does not depend on which device holds it or how many folds share
a device: each device runs `vmap(one_fold_step)` over its own folds, and no collective
mixes folds. The fold count is padded up to a multiple of the device count; a padding
slot s repeats fold s % K and its results are dropped. With several processes
(`jax.distributed`), each process builds only its own slots' data (`local_slots`,
`to_global`) and reads results back with `to_local` / `gather` / `gather_rows`. The
step donates the stacked state (its first argument): the caller passes each step the
state the last one returned and keeps no other reference to it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import PartitionSpec

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


def local_slots(mesh, slots: int) -> list[int]:
    """The fold slots held by this process's devices (contiguous; all of them on one host).

    Slot s lives on the mesh's device s // (slots / devices)."""
    devices = list(mesh.devices.flat)
    per_device = slots // len(devices)
    me = jax.process_index()
    return [s for s in range(slots) if devices[s // per_device].process_index == me]


def to_global(local_tree, mesh):
    """This process's slots (every leaf [local slots, ...]) -> global arrays split over
    the "fold" axis of all processes' devices."""
    return multihost_utils.host_local_array_to_global_array(
        local_tree, mesh, PartitionSpec(FOLD_AXIS)
    )


def to_local(global_tree, mesh):
    """The inverse of `to_global`: this process's slots as host arrays."""
    local = multihost_utils.global_array_to_host_local_array(
        global_tree, mesh, PartitionSpec(FOLD_AXIS)
    )
    return jax.tree_util.tree_map(np.asarray, local)


def gather(global_tree):
    """Every slot's values on every process (host arrays [slots, ...])."""
    return jax.tree_util.tree_map(
        np.asarray, multihost_utils.process_allgather(global_tree, tiled=True)
    )


@jax.jit
def _stack_rows(arrays):
    return jnp.stack(arrays)


def gather_rows(global_arrays) -> np.ndarray:
    """Same-shaped global arrays (each [slots, ...], say a loss per step) as one host
    array [len, slots, ...] on every process: stacked on the devices, then one `gather`
    (one transfer, one collective across processes) for them all."""
    return gather(_stack_rows(list(global_arrays)))


def _unrolled(one_fold_fn):
    """A device's folds one after another in one program (the count is static)."""

    def run(*args):
        count = jax.tree_util.tree_leaves(args[0])[0].shape[0]
        outputs = [
            one_fold_fn(*jax.tree_util.tree_map(lambda leaf, f=f: leaf[f], args))
            for f in range(count)
        ]
        return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *outputs)

    return run


def default_loop() -> str:
    """ "unroll" on CPU, "vmap" elsewhere (see `fold_parallel`)."""
    return "unroll" if jax.default_backend() == "cpu" else "vmap"


def fold_parallel(one_fold_fn, mesh, loop: str = "vmap", donate_state: bool = True):
    """jit(shard_map(per-device folds)) over the "fold" axis of every argument and
    output (each a pytree whose leaves lead with the fold axis).

    loop="vmap" batches a device's folds with `vmap` (convolutions become grouped
    convolutions with the folds' weights side by side); loop="unroll" writes them one
    after another into the same program. On XLA:CPU grouped convolutions are slower than
    plain ones: 5 folds of MultiQT take 0.96 s vmapped, 0.67 s unrolled and 0.73 s as 5
    separate calls (benchmarks/train.py), so the experiments unroll on CPU.

    With `donate_state` the first argument's buffers are donated: the outputs' first item
    (a train step's new state) is written over them, and the argument cannot be used
    again. Pass False to call a step more than once on one state (benchmarks), or for a
    function whose outputs do not start with a state of the first argument's shapes."""
    if loop not in ("vmap", "unroll"):
        raise ValueError(f"loop: expected 'vmap' or 'unroll', got {loop!r}")
    per_device = jax.vmap(one_fold_fn) if loop == "vmap" else _unrolled(one_fold_fn)
    spec = PartitionSpec(FOLD_AXIS)
    sharded = jax.shard_map(
        per_device,
        mesh=mesh,
        in_specs=spec,
        out_specs=spec,
        axis_names=frozenset({FOLD_AXIS}),
    )
    # The outputs keep the inputs' sharding: left to jit, a one-device mesh hands the
    # state back as P() (the same placement, another sharding), so the next step with
    # that state compiled the same program again and missed the compilation cache. Kept
    # shardings also let the new state's buffers reuse the donated ones.
    return jax.jit(
        sharded,
        out_shardings=jax.sharding.NamedSharding(mesh, spec),
        donate_argnums=0 if donate_state else (),
    )


def stack(trees):
    """[tree per fold] -> one tree whose leaves lead with the fold axis."""
    return jax.tree_util.tree_map(lambda *leaves: np.stack(leaves), *trees)
