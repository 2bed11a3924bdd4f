"""Run a MultiQT model over a stream, block by block, with `lax.scan` inside `jit`.

    runner = StreamRunner(net, params, block_outputs=5)       # 5 x 40 ms = 200 ms blocks
    logits = runner.logits(audio, text)                       # [B, To, C], as net.apply
    labels = runner.labels(audio, text)                       # int32 [B, To]

For live use, `state = runner.initial_state(batch_size)` then, per arriving block,
`logits, state = runner.step(audio_block, text_block, state)` (optionally with
`present`, bool [B, 2], after `state`; `runner.step` is the jitted `MultiQT.step`).
Blocks hold `block_outputs * audio_block` audio frames (10 ms) and `block_outputs *
text_block` text frames (20 ms) (`model.streaming_spec`); in `logits` a stream is
zero-padded at its end to whole blocks, which cannot change earlier outputs (the model
is causal), and trimmed again.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from multiqt_jax import model as model_lib


class StreamRunner:
    """Jitted streaming of one model (`net`, `params`) in blocks of `block_outputs`."""

    def __init__(self, net: model_lib.MultiQT, params, block_outputs: int = 1):
        if block_outputs < 1:
            raise ValueError(f"block_outputs: expected >= 1, got {block_outputs}")
        self.net, self.params, self.block_outputs = net, params, block_outputs
        self.spec = model_lib.streaming_spec(net.config)
        self.step = jax.jit(functools.partial(net.apply, params, method=net.step))
        self._scan = jax.jit(self._scan_blocks)

    @property
    def audio_frames(self) -> int:
        """Audio frames (10 ms) per block."""
        return self.block_outputs * self.spec.audio_block

    @property
    def text_frames(self) -> int:
        """Text frames (20 ms) per block."""
        return self.block_outputs * self.spec.text_block

    def initial_state(self, batch_size: int):
        """The state before a stream's first block (`MultiQT.initial_state`)."""
        return self.net.apply(self.params, batch_size, method=self.net.initial_state)

    def _scan_blocks(self, audio_blocks, text_blocks, present):
        """audio_blocks [N, B, audio_frames, F], text_blocks [N, B, text_frames, V]."""

        def one_block(state, blocks):
            logits, state = self.net.apply(
                self.params, *blocks, state, present, method=self.net.step
            )
            return state, logits

        state = self.initial_state(audio_blocks.shape[1])
        _, logits = jax.lax.scan(one_block, state, (audio_blocks, text_blocks))
        blocks, batch, outputs, classes = logits.shape
        return jnp.transpose(logits, (1, 0, 2, 3)).reshape(batch, blocks * outputs, classes)

    def logits(self, audio, text, present=None) -> jax.Array:
        """float32 [B, To, C] for a whole stream (audio [B, Ta, F], text [B, Ts, V]),
        computed block by block; To as in `MultiQT.__call__`."""
        config = self.net.config
        model_lib.check_inputs(config, audio, text)
        audio, text = np.asarray(audio, np.float32), np.asarray(text, np.float32)
        frames = {"audio": -(-audio.shape[1] // self.spec.audio_block)}
        frames["text"] = -(-text.shape[1] // self.spec.text_block)
        outputs = min(frames[name] for name in config.modalities)
        blocks = max(1, -(-outputs // self.block_outputs))
        audio_blocks = _blocks(audio, blocks, self.audio_frames)
        text_blocks = _blocks(text, blocks, self.text_frames)
        present = jnp.ones((audio.shape[0], 2), bool) if present is None else present
        return self._scan(audio_blocks, text_blocks, present)[:, :outputs]

    def labels(self, audio, text, present=None) -> jax.Array:
        """int32 [B, To]: the most probable class per output frame."""
        return jnp.argmax(self.logits(audio, text, present), axis=-1).astype(jnp.int32)


def _blocks(array: np.ndarray, blocks: int, frames: int) -> np.ndarray:
    """[B, T, F] -> [blocks, B, frames, F], zero-padded (or cut) at the end."""
    batch, length, width = array.shape
    wanted = blocks * frames
    array = np.pad(array, ((0, 0), (0, max(0, wanted - length)), (0, 0)))[:, :wanted]
    return array.reshape(batch, blocks, frames, width).transpose(1, 0, 2, 3)
