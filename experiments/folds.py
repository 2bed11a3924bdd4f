"""Fold-parallel training: K train states stacked on a leading fold axis, one step for all.

    mesh = fold_mesh()                                    # every device on a "fold" axis
    slots = fold_slots(num_folds, mesh)                   # folds padded to the device count
    mine = local_slots(mesh, slots)                       # the slots this process feeds
    step = fold_parallel(one_fold_step, mesh, form=default_form())  # shard_map over devices
    states, stats = step(to_global(local_states, mesh), to_global(local_batches, mesh), ...)
    losses = gather_rows([stats["loss"], ...])            # [steps, slots] on every process

A fold's computation does not depend on which device holds it or how many folds share
a device: each device runs `one_fold_step` over its own folds (one at a time through
one compiled program, or vmapped, unrolled or scanned: `FORMS`), and no collective
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


def _scanned(one_fold_fn):
    """A device's folds one after another through one compiled fold (`lax.map`)."""

    def run(*args):
        return jax.lax.map(lambda fold_args: one_fold_fn(*fold_args), args)

    return run


# The forms that run a device's folds in one program: each turns the one-fold function
# into the function of all of them.
ONE_PROGRAM_FORMS = {"vmap": jax.vmap, "unroll": _unrolled, "scan": _scanned}
FORMS = ("sequential", *ONE_PROGRAM_FORMS)  # every way a device can run its folds


def default_form() -> str:
    """ "sequential" on CPU, "vmap" elsewhere (see `fold_parallel`)."""
    return "sequential" if jax.default_backend() == "cpu" else "vmap"


def _per_device(fn, mesh, in_specs=None):
    """shard_map of `fn` over the "fold" axis of every output and of every argument (or
    as `in_specs` says)."""
    spec = PartitionSpec(FOLD_AXIS)
    return jax.shard_map(
        fn,
        mesh=mesh,
        in_specs=spec if in_specs is None else in_specs,
        out_specs=spec,
        axis_names=frozenset({FOLD_AXIS}),
    )


def _jit(fn, mesh, donate: int | None, in_specs=None):
    """jit of `_per_device(fn)` donating argument `donate` (None: none)."""
    # The outputs keep the inputs' sharding: left to jit, a one-device mesh hands the
    # state back as P() (the same placement, another sharding), so the next step with
    # that state compiled the same program again and missed the compilation cache. Kept
    # shardings also let the new state's buffers reuse the donated ones.
    return jax.jit(
        _per_device(fn, mesh, in_specs),
        out_shardings=jax.sharding.NamedSharding(mesh, PartitionSpec(FOLD_AXIS)),
        donate_argnums=() if donate is None else donate,
    )


def _leading(tree) -> int:
    return jax.tree_util.tree_leaves(tree)[0].shape[0]


def _sequential(one_fold_fn, mesh, donate_state: bool):
    """One program for one fold slot per device, called once per slot of a device with
    the slot's index (so it compiles once whatever the fold count). It reads its slot
    out of the stacked arguments and, with `donate_state`, writes the new state into the
    donated stacked state in place; the other outputs (every output without
    `donate_state`) come out per call and are stacked by one small program."""
    index_and_folds = (PartitionSpec(), PartitionSpec(FOLD_AXIS), PartitionSpec(FOLD_AXIS))

    def outputs(index, args):
        return one_fold_fn(*jax.tree_util.tree_map(lambda leaf: leaf[index], args))

    def expanded(tree):
        return jax.tree_util.tree_map(lambda leaf: leaf[None], tree)

    def in_place(index, state, others):
        new, *rest = outputs(index, (state, *others))
        new = jax.tree_util.tree_map(
            lambda whole, part: jax.lax.dynamic_update_index_in_dim(whole, part, index, 0),
            state,
            new,
        )
        return new, expanded(rest)

    def join(groups):
        return jax.tree_util.tree_map(lambda *leaves: jnp.concatenate(leaves), *groups)

    join = _jit(join, mesh, None)

    def slots_per_device(args) -> range:
        return range(_leading(args[0]) // mesh.shape[FOLD_AXIS])

    if not donate_state:
        each = _jit(
            lambda index, args: expanded(outputs(index, args)), mesh, None, index_and_folds[:2]
        )
        return lambda *args: join([each(np.int32(j), args) for j in slots_per_device(args)])

    step = _jit(in_place, mesh, 1, index_and_folds)

    def run(state, *others):
        rests = []
        for j in slots_per_device((state,)):
            state, rest = step(np.int32(j), state, others)
            rests.append(rest)
        return (state, *join(rests))

    return run


def fold_parallel(one_fold_fn, mesh, form: str = "sequential", donate_state: bool = True):
    """`one_fold_fn` for every fold slot: a function of pytrees whose leaves lead with
    the fold axis (global arrays split over the mesh's "fold" axis), returning the same.

    How a device runs its folds (`form`, one of `FORMS`; `benchmarks.train` measures each
    form's compile and step seconds: "fold_forms" in benchmarks/results/train.json, the
    figures behind the choices below): "sequential" calls
    one compiled program per slot of a device, which reads its slot's arguments by index
    and writes the new state into the donated stacked state in place (it compiles one
    fold's step whatever the fold count); "vmap" batches them in one program
    (convolutions become grouped convolutions with the folds' weights side by side);
    "unroll" writes them one after another into one program; "scan" loops over them
    (`lax.map`) in one program (on XLA:CPU a weight-gradient convolution inside a loop
    body runs many times slower). `default_form()` is "sequential" on CPU, where it
    compiled and stepped fastest, and "vmap" elsewhere (on a GPU, vmapped and unrolled
    folds stepped faster than separately called ones; see the README's GPU check).

    With `donate_state` the first argument's buffers are donated: the outputs' first item
    (a train step's new state) is written over them, and the argument cannot be used
    again. Pass False to call a step more than once on one state (benchmarks), or for a
    function whose outputs do not start with a state of the first argument's shapes."""
    if form not in FORMS:
        raise ValueError(f"form: expected one of {list(FORMS)}, got {form!r}")
    if form == "sequential":
        return _sequential(one_fold_fn, mesh, donate_state)
    return _jit(ONE_PROGRAM_FORMS[form](one_fold_fn), mesh, 0 if donate_state else None)


def stack(trees):
    """[tree per fold] -> one tree whose leaves lead with the fold axis."""
    return jax.tree_util.tree_map(lambda *leaves: np.stack(leaves), *trees)
