"""The streaming protocol of the project's models, the spec they declare, one jitted
block runner and the contract check.

A streaming model is a flax module with a `streaming_spec()` (a `StreamingSpec`), a
whole-sequence call, and `initial_state` and `step` methods that stream block by block.
`check_contract` checks that the steps' outputs, concatenated and shifted by the
model's look-ahead, equal the whole-sequence outputs. `BlockRunner` runs a step:

    runner = BlockRunner.for_model(net, params, block_outputs=5)
    state = runner.initial_state(batch_size)
    outputs, out_mask, state = runner.step(block_inputs, block_mask, state)   # live use
    outputs, out_mask = runner.run(inputs, mask)      # a whole stream, one lax.scan in jit

Specification (methods, shapes, clocks, look-ahead, the contract): docs/architecture.md,
"Streaming contract".
"""

from __future__ import annotations

import dataclasses
import fractions
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from speechkit import checks


def _seconds(value: float) -> float:
    """A time rounded to the microsecond, so that 2 * 0.02 == 4 * 0.01."""
    return round(value, 6)


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One input of a streaming model."""

    hop_s: float  # seconds per input frame
    block: int  # input frames per output frame; a step takes a multiple of it
    # Input frames output frame t depends on: frames t * block - receptive_field + 1 ..
    # t * block (the first frame of its block), before any look-ahead.
    receptive_field: int

    def __post_init__(self):
        checks.require_number("InputSpec.hop_s", self.hop_s, above=0)
        checks.require_int("InputSpec.block", self.block, at_least=1)
        checks.require_int("InputSpec.receptive_field", self.receptive_field, at_least=1)


@dataclasses.dataclass(frozen=True)
class StreamingSpec:
    """What a streaming model declares: its inputs and its output clock and latency."""

    inputs: Mapping[str, InputSpec]
    output_latency: int = 0  # output frames between a position's input and its output

    def __post_init__(self):
        if not self.inputs:
            raise ValueError("StreamingSpec.inputs: expected at least one input")
        hops = {name: _seconds(s.hop_s * s.block) for name, s in self.inputs.items()}
        if len(set(hops.values())) != 1:
            raise ValueError(f"StreamingSpec.inputs: output hops differ across inputs: {hops} s")
        checks.require_int("StreamingSpec.output_latency", self.output_latency, at_least=0)

    @property
    def output_hop_s(self) -> float:
        """Seconds per output frame."""
        spec = next(iter(self.inputs.values()))
        return _seconds(spec.hop_s * spec.block)

    @property
    def latency_s(self) -> float:
        """Look-ahead: the seconds of input after a position before its output exists."""
        return _seconds(self.output_latency * self.output_hop_s)

    def output_frames(self, frames: Mapping[str, int]) -> int:
        """Output frames of whole inputs of `frames[name]` input frames (the shortest)."""
        return min(-(-frames[name] // spec.block) for name, spec in self.inputs.items())

    def receptive_field_s(self, name: str) -> float:
        """The receptive field of input `name` in seconds."""
        spec = self.inputs[name]
        return _seconds(spec.receptive_field * spec.hop_s)


def input_spec(layer, hop_s: float) -> InputSpec:
    """The InputSpec of a bound, causal sequence-layers layer fed frames of `hop_s` seconds
    (block from its output ratio, receptive field from its own `receptive_field`)."""
    ratio = fractions.Fraction(layer.output_ratio)
    if ratio.numerator != 1:
        raise ValueError(f"{type(layer).__name__}: output ratio {ratio}, expected 1 / integer")
    past, future = layer.receptive_field
    if future != 0 or layer.output_latency != 0:
        raise ValueError(
            f"{type(layer).__name__}: receptive field {(past, future)}, output latency "
            f"{layer.output_latency}; expected a causal layer (look-ahead belongs to the model)"
        )
    return InputSpec(hop_s=hop_s, block=ratio.denominator, receptive_field=int(1 - past))


def spec_of(net) -> StreamingSpec:
    """A protocol module's StreamingSpec (no parameters needed)."""
    return net.bind({}).streaming_spec()


def all_valid(inputs: Mapping[str, jax.Array], mask=None) -> dict[str, jax.Array]:
    """`mask` with every missing entry (or all, when None) True on every frame."""
    mask = {} if mask is None else mask
    return {
        name: jnp.ones(np.shape(value)[:2], bool) if mask.get(name) is None else mask[name]
        for name, value in inputs.items()
    }


class BlockRunner:
    """Runs a protocol step function over blocks of `block_outputs` output frames.

    step(inputs, mask, state, *extras) -> (outputs, out_mask, state) and
    initial_state(batch_size) -> state are plain functions (parameters bound);
    `for_model` binds a protocol module's. `step` is jitted; `run` streams whole inputs
    as one `lax.scan` inside `jit`.
    """

    def __init__(
        self,
        step: Callable,
        initial_state: Callable[[int], object],
        spec: StreamingSpec,
        block_outputs: int = 1,
    ):
        checks.require_int("block_outputs", block_outputs, at_least=1)
        self.spec, self.block_outputs = spec, block_outputs
        self._step, self._initial_state = step, initial_state
        self.step = jax.jit(step)
        self._scan = jax.jit(self._scan_blocks)

    @classmethod
    def for_model(cls, net, params, block_outputs: int = 1) -> BlockRunner:
        """A runner of a protocol module `net` with parameters `params`."""

        def step(inputs, mask, state, *extras):
            return net.apply(params, inputs, mask, state, *extras, method=net.step)

        def initial_state(batch_size: int):
            return net.apply(params, batch_size, method=net.initial_state)

        return cls(step, initial_state, spec_of(net), block_outputs)

    @property
    def block_frames(self) -> dict[str, int]:
        """Input frames of each input per block."""
        return {name: self.block_outputs * s.block for name, s in self.spec.inputs.items()}

    def initial_state(self, batch_size: int):
        """The state before a stream's first block."""
        return self._initial_state(batch_size)

    def _scan_blocks(self, blocks, block_masks, extras):
        """blocks / block_masks: name -> [N, B, block_frames, ...] -> outputs [B, N * n, ...]."""

        def one(state, block):
            outputs, out_mask, state = self._step(*block, state, *extras)
            return state, (outputs, out_mask)

        batch = next(iter(block_masks.values())).shape[1]
        _, (outputs, out_mask) = jax.lax.scan(
            one, self._initial_state(batch), (blocks, block_masks)
        )
        return jax.tree_util.tree_map(_merge_blocks, (outputs, out_mask))

    def run(self, inputs: Mapping, mask: Mapping | None = None, *extras):
        """Whole streams (inputs name -> [B, T_name, F], mask name -> bool [B, T_name]) ->
        (outputs [B, To, ...], out_mask [B, To]) computed block by block, aligned as the
        whole-sequence call: To = `spec.output_frames`; the end of each stream is padded
        with masked zero frames to whole blocks plus `output_latency` output frames (the
        look-ahead's flush), and the first `output_latency` outputs are dropped."""
        check_inputs(self.spec, inputs, mask)
        inputs = {name: inputs[name] for name in self.spec.inputs}
        mask = all_valid(inputs, mask)
        frames = {name: np.shape(value)[1] for name, value in inputs.items()}
        outputs = self.spec.output_frames(frames)
        latency = self.spec.output_latency
        blocks = max(1, -(-(outputs + latency) // self.block_outputs))
        split_inputs, split_masks = {}, {}
        for name, size in self.block_frames.items():
            split_inputs[name] = _blocks(np.asarray(inputs[name], np.float32), blocks, size)
            split_masks[name] = _blocks(np.asarray(mask[name], bool), blocks, size)
        streamed, out_mask = self._scan(split_inputs, split_masks, extras)
        keep = slice(latency, latency + outputs)
        return jax.tree_util.tree_map(lambda v: v[:, keep], (streamed, out_mask))


def check_inputs(spec: StreamingSpec, inputs: Mapping, mask: Mapping | None = None) -> None:
    """Host-side checks of the spec's inputs (others are ignored): [B, T, F] arrays of one
    batch size, masks [B, T], finite values. Errors name the input and the shape."""
    if set(spec.inputs) - set(inputs):
        raise ValueError(f"inputs: expected {sorted(spec.inputs)}, got {sorted(inputs)}")
    batches = set()
    for name in spec.inputs:
        value = inputs[name]
        shape = np.shape(value)
        if len(shape) != 3:
            raise ValueError(f"inputs[{name!r}]: shape {shape}, expected [batch, frames, features]")
        batches.add(shape[0])
        if mask is not None and mask.get(name) is not None and np.shape(mask[name]) != shape[:2]:
            raise ValueError(f"mask[{name!r}]: shape {np.shape(mask[name])}, expected {shape[:2]}")
        values = np.asarray(value)
        if not np.all(np.isfinite(values)):
            first = np.argwhere(~np.isfinite(values))[0].tolist()
            raise ValueError(
                f"inputs[{name!r}]: shape {shape} holds non-finite values (first at {first}); "
                "expected finite features"
            )
    if len(batches) > 1:
        sizes = {name: np.shape(inputs[name])[0] for name in spec.inputs}
        raise ValueError(f"inputs: batch sizes differ: {sizes}")


def _blocks(array: np.ndarray, blocks: int, frames: int) -> np.ndarray:
    """[B, T, ...] -> [blocks, B, frames, ...], zero-padded (or cut) at the end."""
    wanted = blocks * frames
    pad = [(0, 0), (0, max(0, wanted - array.shape[1]))] + [(0, 0)] * (array.ndim - 2)
    array = np.pad(array, pad)[:, :wanted]
    array = array.reshape(array.shape[0], blocks, frames, *array.shape[2:])
    return np.swapaxes(array, 0, 1)


def _merge_blocks(values):
    """[N, B, n, ...] -> [B, N * n, ...]."""
    values = jnp.moveaxis(values, 0, 1)
    return values.reshape(values.shape[0], -1, *values.shape[3:])


def partition(rng: np.random.Generator, total: int, largest: int = 5) -> list[int]:
    """Random block sizes of 1..`largest` output frames summing to `total`."""
    sizes = []
    while sum(sizes) < total:
        sizes.append(int(rng.integers(1, largest + 1)))
    sizes[-1] -= sum(sizes) - total
    return sizes


def check_contract(
    net, params, inputs, mask=None, *extras, partitions: int = 3, atol: float = 1e-5, seed=0
) -> float:
    """Checks the streaming contract of protocol module `net` on one batch: `partitions`
    random partitions into blocks of 1-5 output frames, stepped one block at a time, and
    `BlockRunner.run`, each against the whole-sequence call. Raises AssertionError
    naming the partition and output; returns the largest difference seen."""
    spec = spec_of(net)
    whole, whole_mask = net.apply(params, inputs, mask, *extras)
    whole_mask = np.asarray(whole_mask)
    mask = all_valid(inputs, mask)
    outputs = whole_mask.shape[1]
    total = outputs + spec.output_latency
    frames = {name: total * s.block for name, s in spec.inputs.items()}
    padded = {n: _blocks(np.asarray(inputs[n]), 1, size)[0] for n, size in frames.items()}
    padded_mask = {n: _blocks(np.asarray(mask[n]), 1, size)[0] for n, size in frames.items()}
    step = jax.jit(lambda i, m, s: net.apply(params, i, m, s, *extras, method=net.step))
    worst = 0.0
    for trial in range(partitions):
        sizes = partition(np.random.default_rng([seed, trial]), total)
        state = net.apply(params, whole_mask.shape[0], method=net.initial_state)
        pieces, start = [], 0
        for size in sizes:
            cut = {
                n: slice(start * s.block, (start + size) * s.block) for n, s in spec.inputs.items()
            }
            out = step(
                {n: v[:, cut[n]] for n, v in padded.items()},
                {n: m[:, cut[n]] for n, m in padded_mask.items()},
                state,
            )
            pieces.append(out[:2])
            state = out[2]
            start += size
        streamed = jax.tree_util.tree_map(
            lambda *v: np.concatenate(v, axis=1)[:, spec.output_latency :], *pieces
        )
        worst = max(worst, _compare(streamed, (whole, whole_mask), f"blocks {sizes}", atol))
    for block_outputs in (1, 4):
        runner = BlockRunner.for_model(net, params, block_outputs)
        streamed = runner.run(inputs, mask, *extras)
        worst = max(worst, _compare(streamed, (whole, whole_mask), f"run({block_outputs})", atol))
    return worst


def _compare(streamed, whole, where: str, atol: float) -> float:
    (outputs, out_mask), (expected, expected_mask) = streamed, whole
    np.testing.assert_array_equal(np.asarray(out_mask), expected_mask, err_msg=f"{where}: mask")
    worst = 0.0
    for name, value in expected.items():
        got, want = np.asarray(outputs[name]), np.asarray(value)
        if got.shape != want.shape:
            raise AssertionError(f"{where}: {name} shape {got.shape}, expected {want.shape}")
        diff = np.abs(got - want)[expected_mask]
        worst = max(worst, float(diff.max(initial=0.0)))
        if worst > atol:
            raise AssertionError(f"{where}: {name} differs by {worst:.3g} > {atol}")
    return worst
