"""One ONNX graph from raw samples to a task's decisions: the front end and a step.

    signature = onnx_stream.signature(features, block_frames, step_signature)
    stream = onnx_stream.function(features, block_frames, step)   # lowered as stream.onnx
    results = stream(audio=block, samples=n, state=state, **extras)

A stream module takes one block of samples, audio float32 [b, samples_per_block] at the
front end's rate, with `samples` int32 [b], how many of them are real (all but the last
block of a stream: samples_per_block; the blocks that flush a stream: 0), and its state:
the `context_samples` before the block (the front end's window reaches back that far),
then the step's state. It computes the block's log-mel frames (`speechkit.frontend`) as
`frontend.FeatureStream` does, masks the frames past the real samples, runs the task's
step on them and returns the step's results with the state after the block. The state
before a stream's first block is all zeros. Spec: docs/usage.md, "ONNX without the
toolkit".
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from speechkit import frontend, onnx_export

NAME = "stream"
_STEP_INPUTS = ("block", "mask", "state")  # the step's arguments the stream makes


def framing(config: frontend.FeatureConfig, block_frames: int) -> tuple[int, int, int]:
    """(samples per block, context samples, frames to drop) of a block of `block_frames`
    frames: the front end module's input is the context and then the block, and its
    first `frames to drop` frames are the context's (`frontend.FeatureStream`)."""
    stream = frontend.FeatureStream(config, block_frames)
    return stream.chunk, stream.context, stream.context // config.hop_samples


def signature(
    config: frontend.FeatureConfig, block_frames: int, step: onnx_export.Signature
) -> onnx_export.Signature:
    """The stream module of `step` (a `Signature` taking block [b, frames, F], mask
    [b, frames] and state, and returning new_state last): audio [b, samples per block],
    samples [b], the step's other arguments, and state [context, *the step's] ->
    the step's results, new_state [context, *the step's]."""
    batch, _ = onnx_export.sizes()
    samples, context, _ = framing(config, block_frames)
    history = jax.ShapeDtypeStruct((batch, context), np.float32)
    extras = {k: v for k, v in step.arguments.items() if k not in _STEP_INPUTS}
    results = dict(step.results)
    new_state = [history, *results.pop("new_state")]
    return onnx_export.Signature(
        {
            "audio": jax.ShapeDtypeStruct((batch, samples), np.float32),
            "samples": jax.ShapeDtypeStruct((batch,), np.int32),
            **extras,
            "state": [history, *step.arguments["state"]],
        },
        {**results, "new_state": new_state},
    )


def function(config: frontend.FeatureConfig, block_frames: int, step: Callable) -> Callable:
    """The stream of `step(block, mask, state, **extras) -> (*results, new_state)`:
    (audio, samples, state, **extras) -> (*results, new_state), as `signature` says."""
    samples_per_block, context, skip = framing(config, block_frames)
    hop = config.hop_samples

    def stream(audio, samples, state, **extras):
        history, step_state = state[0], list(state[1:])
        real = jnp.clip(samples, 0, samples_per_block) // hop * hop  # whole hops only
        joined = jnp.concatenate([history, audio], axis=1)
        ends = context + real
        joined = jnp.where(jnp.arange(joined.shape[1])[None] < ends[:, None], joined, 0.0)
        features, _ = frontend.log_mel(joined, ends, config)
        mask = jnp.arange(block_frames)[None] < (real // hop)[:, None]
        block = jnp.where(mask[..., None], _frames(features, skip, block_frames), 0.0)
        *results, new_state = step(block, mask, step_state, **extras)
        return (*results, [_last_samples(joined, real, context, hop), *new_state])

    return stream


def _frames(array, start: int, size: int):
    """array[:, start : start + size] as a gather of fixed indices: a slice lowers with
    ends computed from the symbolic batch, whose size ONNX shape inference cannot find."""
    return jnp.take(array, np.arange(start, start + size), axis=1)


def _last_samples(joined, real, context: int, hop: int):
    """float32 [b, context]: joined[i, real[i] : real[i] + context], the context before
    the next block; real is whole hops, so a sum of fixed slices (a gather along one
    axis per stream is not in the ONNX lowering)."""
    slices = range(0, joined.shape[1] - context + 1, hop)
    return sum(
        jnp.where((real == start)[:, None], _frames(joined, start, context), 0.0)
        for start in slices
    )


def lower(
    config: frontend.FeatureConfig,
    block_frames: int,
    step: Callable,
    step_signature: onnx_export.Signature,
):
    """The stream module of `step` as ONNX (`onnx.ModelProto`)."""
    return onnx_export.lower_module(
        function(config, block_frames, step),
        signature(config, block_frames, step_signature),
        NAME,
    )
