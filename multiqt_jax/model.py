"""MultiQT: a multimodal streaming question tracker (Havtorn et al. 2020), in flax.linen.

Causal Conv1D encoders over audio (40 log-mel, 10 ms) and text (29 character columns,
20 ms) meet on one 40 ms output clock, are fused (`concat`, `sum`, `gated`, `tensor`)
and classified per frame. `modalities` gives audio-only and text-only models;
`modality_dropout` and `present` drop or mark a missing modality. `MultiQT.step` streams
by `speechkit.streaming`'s protocol, equal to the whole call.

    net = model.MultiQT(model.MultiQTConfig(num_classes=4))
    inputs = {"audio": jnp.zeros((1, 400, 40)), "text": jnp.zeros((1, 200, 29))}
    params = net.init(jax.random.key(0), inputs)
    outputs, mask = net.apply(params, inputs)   # outputs["logits"] [1, 100, 4]

Specification (clock, fusion, streaming, precision): docs/models.md#multiqt.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import sequence_layers.jax as sl

from multiqt_jax.config import (  # noqa: F401 (model's names)
    AUDIO_HOP_S,
    FUSIONS,
    MODALITIES,
    TEXT_HOP_S,
    MultiQTConfig,
)
from speechkit import accelerator, streaming
from speechkit.optim import parameter_count


def streaming_spec(config: MultiQTConfig) -> streaming.StreamingSpec:
    """The streaming spec of a config's model (`MultiQT.streaming_spec`)."""
    return streaming.spec_of(MultiQT(config))


def _encoder(config: MultiQTConfig, modality: str) -> sl.Serial.Config:
    """f_a or f_s: causal (dilated, strided) Conv1D + ReLU layers."""
    channels, kernels, strides, dilations = (
        getattr(config, f"{modality}_{part}")
        for part in ("channels", "kernels", "strides", "dilations")
    )
    return sl.Serial.Config(
        [
            sl.Conv1D.Config(
                filters=width,
                kernel_size=kernel,
                strides=stride,
                dilation_rate=dilation,
                padding="causal",
                activation=jax.nn.relu,
                precision=config.lax_precision,
                name=f"conv{i}",
            )
            for i, (width, kernel, stride, dilation) in enumerate(
                zip(channels, kernels, strides, dilations, strict=True)
            )
        ],
        name=f"{modality}_encoder",
    )


class MultiQT(nn.Module):
    """See the module docstring: a `speechkit.streaming` protocol module whose outputs
    are {"logits" [B, To, num_classes]} and their mask [B, To]."""

    config: MultiQTConfig

    def setup(self):
        config = self.config
        if "audio" in config.modalities:
            self.audio_encoder = _encoder(config, "audio").make()
        if "text" in config.modalities:
            self.text_encoder = _encoder(config, "text").make()
        dense = functools.partial(nn.Dense, precision=config.lax_precision)
        if len(config.modalities) == 2 and config.fusion != "concat":
            self.audio_projection = dense(config.fusion_size, name="audio_projection")
            self.text_projection = dense(config.fusion_size, name="text_projection")
            if config.fusion == "gated":
                self.gate = dense(config.fusion_size, name="gate")
        self.hidden = [dense(width, name=f"g{i}") for i, width in enumerate(config.dense)]
        self.classifier = dense(config.num_classes, name="h")
        self.dropout = nn.Dropout(config.dropout)

    # -- the streaming protocol (speechkit.streaming) ----------------------------------

    def streaming_spec(self) -> streaming.StreamingSpec:
        """Block sizes and receptive fields from the encoders' own layers; causal."""
        hops = {"audio": AUDIO_HOP_S, "text": TEXT_HOP_S}
        encoders = {name: getattr(self, f"{name}_encoder") for name in self.config.modalities}
        return streaming.StreamingSpec(
            {name: streaming.input_spec(layer, hops[name]) for name, layer in encoders.items()}
        )

    @accelerator.at_config_precision
    def __call__(self, inputs, mask=None, present=None, *, training: bool = False):
        """inputs: "audio" float [B, Ta, 40] (10 ms) and / or "text" float [B, Ts, V]
        (20 ms), as `MultiQTConfig.modalities`; mask: the same names -> bool [B, T] (default
        all real); present bool [B, 2] (audio, text available; default all). Returns
        ({"logits": float32 [B, To, num_classes]}, mask bool [B, To]), To = min(Ta / audio
        stride, Ts / text stride) (rounded up); the two may differ by one output frame."""
        check_shapes(self.config, inputs)
        mask = mask or {}
        encodings = {
            name: self._encoder(name).layer(
                _sequence(inputs[name], mask.get(name)), training=training
            )
            for name in self.config.modalities
        }
        frames = min(e.values.shape[1] for e in encodings.values())
        values = {name: e.values[:, :frames] for name, e in encodings.items()}
        out_mask = jnp.stack([e.mask[:, :frames] for e in encodings.values()]).all(axis=0)
        present = self._present(present, _batch(inputs), training)
        logits = self._head(self._fuse(values, present), training)
        return {"logits": jnp.where(out_mask[..., None], logits, 0.0)}, out_mask

    def initial_state(self, batch_size: int):
        """The state before the first block: zeros in every causal convolution buffer."""
        widths = {"audio": self.config.audio_features, "text": self.config.text_symbols}
        return {
            name: self._encoder(name).get_initial_state(
                batch_size, sl.ChannelSpec((widths[name],), jnp.float32), training=False
            )
            for name in self.config.modalities
        }

    @accelerator.at_config_precision
    def step(self, inputs, mask, state, present=None):
        """One block: "audio" [B, n * audio_block, 40] and / or "text" [B, n * text_block,
        V] (mask: the same names -> bool, None: all real) -> ({"logits" [B, n,
        num_classes]}, mask bool [B, n], new state). Inference only (no dropout)."""
        check_shapes(self.config, inputs)
        mask = mask or {}
        values, masks, new_state = {}, [], {}
        for name in self.config.modalities:
            out, new_state[name] = self._encoder(name).step(
                _sequence(inputs[name], mask.get(name)), state[name], training=False
            )
            values[name] = out.values
            masks.append(out.mask)
        out_mask = jnp.stack(masks).all(axis=0)
        present = self._present(present, _batch(inputs), training=False)
        logits = self._head(self._fuse(values, present), training=False)
        return {"logits": jnp.where(out_mask[..., None], logits, 0.0)}, out_mask, new_state

    # -- pieces ---------------------------------------------------------------------------

    def _encoder(self, name: str):
        return getattr(self, f"{name}_encoder")

    def _present(self, present, batch: int, training: bool):
        """bool [B, 2]: which modalities each example has (after modality dropout)."""
        present = jnp.ones((batch, 2), bool) if present is None else jnp.asarray(present, bool)
        if present.shape != (batch, 2):
            raise ValueError(
                f"present: expected bool [{batch}, 2] (audio, text), got {present.shape}"
            )
        probability = self.config.modality_dropout
        if training and probability > 0 and len(self.config.modalities) == 2:
            draw = jax.random.uniform(self.make_rng("dropout"), (batch,))
            keep_audio = draw >= probability / 2
            keep_text = (draw < probability / 2) | (draw >= probability)
            present = present & jnp.stack([keep_audio, keep_text], axis=1)
        return present

    def _fuse(self, values: dict, present):
        config = self.config
        scaled = {
            name: value * present[:, MODALITIES.index(name), None, None].astype(value.dtype)
            for name, value in values.items()
        }
        if len(scaled) == 1:
            return next(iter(scaled.values()))
        audio, text = scaled["audio"], scaled["text"]
        if config.fusion == "concat":
            return jnp.concatenate([audio, text], axis=-1)
        audio, text = self.audio_projection(audio), self.text_projection(text)
        if config.fusion == "sum":
            return audio + text
        if config.fusion == "gated":
            gate = jax.nn.sigmoid(self.gate(jnp.concatenate([audio, text], axis=-1)))
            return gate * audio + (1 - gate) * text
        ones = jnp.ones(audio.shape[:-1] + (1,), audio.dtype)
        outer = jnp.einsum(
            "btf,btg->btfg",
            jnp.concatenate([audio, ones], -1),
            jnp.concatenate([text, ones], -1),
            precision=config.lax_precision,
        )
        return outer.reshape(outer.shape[:2] + (-1,))

    def _head(self, fused, training: bool):
        hidden = fused
        for layer in self.hidden:
            hidden = self.dropout(jax.nn.relu(layer(hidden)), deterministic=not training)
        return self.classifier(hidden).astype(jnp.float32)


def _sequence(values, mask) -> sl.Sequence:
    values = jnp.asarray(values, jnp.float32)
    mask = jnp.ones(values.shape[:2], bool) if mask is None else jnp.asarray(mask, bool)
    return sl.Sequence(values, mask)


def _batch(inputs) -> int:
    return np.shape(next(iter(inputs.values())))[0]


def check_shapes(config: MultiQTConfig, inputs) -> None:
    """Trace-time checks (shapes are static): the config's modalities, widths and
    agreeing lengths."""
    if not isinstance(inputs, dict) or set(config.modalities) - set(inputs):
        given = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(f"inputs: expected a dict with {list(config.modalities)}, got {given}")
    expected = {"audio": config.audio_features, "text": config.text_symbols}
    for name in config.modalities:
        shape = np.shape(inputs[name])
        if len(shape) != 3 or shape[2] != expected[name]:
            raise ValueError(
                f"inputs[{name!r}]: shape {shape}, expected [batch, frames, {expected[name]}]"
            )
    if len(config.modalities) == 2:
        audio, text = np.shape(inputs["audio"]), np.shape(inputs["text"])
        audio_out = -(-audio[1] // config.audio_stride)
        text_out = -(-text[1] // config.text_stride)
        if abs(audio_out - text_out) > 1 or audio[0] != text[0]:
            raise ValueError(
                f"audio {audio} and text {text} disagree: {audio_out} and {text_out} output "
                f"frames (audio / {config.audio_stride}, text / {config.text_stride}); "
                "expected the same batch and at most one apart"
            )


def describe(config: MultiQTConfig, params) -> str:
    """One line for the start of a run: size, output rate, receptive fields."""
    spec = streaming_spec(config)
    fields = " / ".join(f"{spec.receptive_field_s(name):.2f} s {name}" for name in spec.inputs)
    return (
        f"MultiQT {'+'.join(config.modalities)} ({config.fusion} fusion): "
        f"{parameter_count(params):,} parameters, one output every "
        f"{spec.output_hop_s * 1000:.0f} ms ({1 / spec.output_hop_s:.0f} Hz), receptive field "
        f"{fields}, latency {spec.output_latency}, {config.precision} precision"
    )
