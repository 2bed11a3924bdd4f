"""AF-KWS: an anchor-free (CenterNet-style, 1-D) keyword detector, in flax.linen.

A causal Conv1D backbone over 64 log-mel frames (10 ms) with three per-frame heads at
`output_stride`: "heatmap" (centre logits per keyword, plus the *unknown* class),
"length" and "offset". Output frame t describes position t - `delay`, a bounded
look-ahead; `AfKws.step` streams by `speechkit.streaming`'s protocol, equal to the whole
call. Detections come from `cskws_jax.decode`.

    net = model.AfKws(model.AfKwsConfig(num_keywords=20))
    features = jnp.zeros((1, 400, 64))
    params = net.init(jax.random.key(0), {"audio": features})
    heads, mask = net.apply(params, {"audio": features})   # heatmap [1, 100, 21]

Specification (layers, heads, look-ahead, streaming, precision): docs/models.md#af-kws.
"""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import sequence_layers.jax as sl

from cskws_jax.config import FREQUENCY_KERNEL, AfKwsConfig, Stage  # noqa: F401 (model.Stage)
from cskws_jax.datasets.features import FEATURES
from speechkit import accelerator, frontend, streaming
from speechkit import bundle as bundle_lib
from speechkit import normalise as normalise_lib
from speechkit.optim import parameter_count

HEATMAP_PRIOR = 0.1  # initial centre probability (CenterNet's bias init)


def streaming_spec(config: AfKwsConfig) -> streaming.StreamingSpec:
    """The streaming spec of a config's model (`AfKws.streaming_spec`)."""
    return streaming.spec_of(AfKws(config))


def _conv(channels, kernel, stride=1, dilation=1, activation=None, name=None, precision=None):
    return sl.Conv1D.Config(
        filters=channels,
        kernel_size=kernel,
        strides=stride,
        dilation_rate=dilation,
        padding="causal",
        activation=activation,
        precision=precision,
        name=name,
    )


def _backbone(config: AfKwsConfig) -> sl.Serial.Config:
    conv = functools.partial(_conv, precision=config.lax_precision)
    layers = _frequency_stem(config)
    layers.append(conv(config.stem_channels, config.kernel, activation=jax.nn.relu, name="stem"))
    width = config.stem_channels
    for s, stage in enumerate(config.stages):
        for b in range(stage.blocks):
            stride = stage.stride if b == 0 else 1
            shortcut = None
            if stride != 1 or width != stage.channels:
                shortcut = [conv(stage.channels, 1, stride, name="shortcut")]
            layers.append(
                sl.Residual.Config(
                    [
                        conv(stage.channels, config.kernel, stride, 1, jax.nn.relu, "conv_a"),
                        conv(stage.channels, config.kernel, 1, stage.dilation, None, "conv_b"),
                    ],
                    shortcut_layers=shortcut,
                    name=f"stage{s}_block{b}",
                )
            )
            layers.append(sl.Relu.Config())
            width = stage.channels
    layers.append(conv(config.head_channels, 3, activation=jax.nn.relu, name="head_conv"))
    return sl.Serial.Config(layers, name="backbone")


def _frequency_stem(config: AfKwsConfig) -> list:
    """[B, T, F] -> [B, T, ceil(F / 2^L) x filters]: L 2-D convolutions, causal in time."""
    if not config.frequency_stem:
        return []
    layers = [sl.ExpandDims.Config(-1)]
    for i, filters in enumerate(config.frequency_stem):
        layers.append(
            sl.Conv2D.Config(
                filters=filters,
                kernel_size=FREQUENCY_KERNEL,
                strides=(1, 2),
                time_padding="causal",
                spatial_padding="same",
                activation=jax.nn.relu,
                precision=config.lax_precision,
                name=f"frequency{i}",
            )
        )
    return [*layers, sl.Flatten.Config()]


class AfKws(nn.Module):
    config: AfKwsConfig

    def setup(self):
        self.backbone = _backbone(self.config).make()
        prior = math.log(HEATMAP_PRIOR / (1 - HEATMAP_PRIOR))
        dense = functools.partial(nn.Dense, precision=self.config.lax_precision)
        self.heatmap_head = dense(
            self.config.num_classes, bias_init=nn.initializers.constant(prior), name="heatmap"
        )
        self.regression_head = dense(2, name="length_offset")

    def _heads(self, hidden) -> dict[str, jax.Array]:
        length_offset = self.regression_head(hidden)
        return {
            "heatmap": self.heatmap_head(hidden).astype(jnp.float32),
            "length": jax.nn.softplus(length_offset[..., 0]).astype(jnp.float32),
            "offset": jax.nn.sigmoid(length_offset[..., 1]).astype(jnp.float32),
        }

    def streaming_spec(self) -> streaming.StreamingSpec:
        """Block size and receptive field from the backbone's layers; latency `delay`."""
        audio = streaming.input_spec(self.backbone, FEATURES.hop_s)
        return streaming.StreamingSpec({"audio": audio}, output_latency=self.config.delay)

    @accelerator.at_config_precision
    def __call__(self, inputs, mask=None):
        """inputs {"audio": float [B, T, F] log-mel at 10 ms}, mask {"audio": bool [B, T]}
        (default all real) -> (heads, mask bool [B, To]), To = ceil(T / output_stride),
        aligned to positions 0..To-1; heads are zero where the mask is False."""
        features, frame_mask = _audio(self.config, inputs, mask)
        flush = self.config.delay * self.config.output_stride
        start = self._normalise_state(features.shape[0])
        features, _ = self._normalised(features, frame_mask, start)
        padded = _all_valid(jnp.pad(features, ((0, 0), (0, flush), (0, 0))))
        hidden = self.backbone.layer(padded, training=False)
        frames = -(-features.shape[1] // self.config.output_stride)
        values = hidden.values[:, self.config.delay : self.config.delay + frames]
        out_mask = frame_mask[:, :: self.config.output_stride][:, :frames]
        return _masked(self._heads(values), out_mask), out_mask

    def initial_state(self, batch_size: int):
        """Zeros in every convolution buffer, and `delay` masked positions in flight."""
        spec = sl.ChannelSpec((self.config.features,), jnp.float32)
        state = {
            "backbone": self.backbone.get_initial_state(batch_size, spec, training=False),
            "mask_fifo": jnp.zeros((batch_size, self.config.delay), bool),
        }
        if self.config.normalise != "none":
            state["normalise"] = self._normalise_state(batch_size)
        return state

    def _normalise_state(self, batch_size: int) -> dict:
        return normalise_lib.initial_state(
            self.config.normalisation, batch_size, self.config.features
        )

    def _normalised(self, features, frame_mask, state):
        """(the input normalised, zero on invalid frames, and the normaliser's new state).
        Invalid frames become zeros and the backbone sees every frame as valid, so a stream
        that feeds the same zeros (`step` with its mask) computes the same values."""
        if self.config.envelope:
            smooth = frontend.envelope_matrix(self.config.features, self.config.envelope)
            features = jnp.matmul(features, smooth, precision=jax.lax.Precision.HIGHEST)
        features, state = normalise_lib.normalise_features(
            self.config.normalisation, features, frame_mask, state, hop_s=FEATURES.hop_s
        )
        return jnp.where(frame_mask[..., None], features, 0.0), state

    @accelerator.at_config_precision
    def step(self, inputs, mask, state):
        """inputs {"audio": float [B, n * output_stride, F]}, mask {"audio": bool [B, same]}
        (None: all real) -> (heads for n output frames, their mask [B, n], state). Output
        frame i of the stream describes position i - delay; its mask is that position's."""
        block, frame_mask = _audio(self.config, inputs, mask)
        block, normalised = self._normalised(block, frame_mask, state.get("normalise", {}))
        hidden, backbone = self.backbone.step(_all_valid(block), state["backbone"], training=False)
        n = hidden.values.shape[1]
        arrived = jnp.concatenate(
            [state["mask_fifo"], frame_mask[:, :: self.config.output_stride]], axis=1
        )
        out_mask, fifo = arrived[:, :n], arrived[:, n:]
        heads = _masked(self._heads(hidden.values), out_mask)
        new_state = {"backbone": backbone, "mask_fifo": fifo}
        if self.config.normalise != "none":
            new_state["normalise"] = normalised
        return heads, out_mask, new_state


def _audio(config: AfKwsConfig, inputs, mask):
    """The checked "audio" input as float32 [B, T, F] and its frame mask bool [B, T]."""
    if not isinstance(inputs, dict) or "audio" not in inputs:
        given = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(f"inputs: expected a dict with 'audio', got {given}")
    check_features(config, inputs["audio"])
    features = jnp.asarray(inputs["audio"], jnp.float32)
    frame_mask = (mask or {}).get("audio")
    if frame_mask is None:
        return features, jnp.ones(features.shape[:2], bool)
    return features, jnp.asarray(frame_mask, bool)


def _masked(heads: dict, mask) -> dict:
    """Heads with zeros where the mask (bool [B, To]) is False."""
    return {
        k: jnp.where(mask.reshape(mask.shape + (1,) * (v.ndim - 2)), v, 0.0)
        for k, v in heads.items()
    }


def _all_valid(values) -> sl.Sequence:
    return sl.Sequence(values, jnp.ones(values.shape[:2], bool))


def check_features(config: AfKwsConfig, features) -> None:
    shape = np.shape(features)
    if len(shape) != 3 or shape[2] != config.features:
        raise ValueError(f"features: shape {shape}, expected [batch, frames, {config.features}]")


def describe(config: AfKwsConfig, params) -> str:
    spec = streaming_spec(config)
    return (
        f"AF-KWS ({config.num_keywords} keywords"
        f"{' + unknown' if config.unknown_class else ', no unknown class'}): "
        f"{parameter_count(params):,} parameters, output stride {config.output_stride} "
        f"({spec.output_hop_s * 1000:.0f} ms), receptive field "
        f"{spec.receptive_field_s('audio'):.2f} s, look-ahead {spec.latency_s:.2f} s, "
        f"{config.precision} precision"
    )


HEATMAP = "params/heatmap/"  # the class head: kernel [head_channels, C], bias [C]


def warm_start(trained, trained_labels, fresh, labels, trained_unknown: bool, unknown: bool):
    """Parameters for a model of keywords `labels` that start from `trained`, the
    parameters of a model of the same architecture for `trained_labels`.

    Everything but the class head is `trained`'s. The class head's column of a keyword
    both models have is the trained one; a new keyword's column is `fresh`'s (the new
    model's own initialisation: random weights, the prior bias), and so is the unknown
    class's unless both models have one. `trained`: a nested dict of arrays (a bundle's
    parameters); `fresh`: the new model's `AfKws.init` variables, whose tree (boxes
    included) the result keeps. Raises ValueError naming the first parameter that one
    model lacks or whose shape differs (another architecture)."""
    old = bundle_lib.flatten(trained)
    sources = [trained_labels.index(k) if k in trained_labels else None for k in labels]
    if unknown:
        sources.append(len(trained_labels) if trained_unknown else None)

    def merged(path, value):
        name = "/".join(str(key.key) for key in path if isinstance(key, jax.tree_util.DictKey))
        if name not in old:
            raise ValueError(f"warm start: the trained model has no parameter {name}")
        if not name.startswith(HEATMAP):
            if old[name].shape != np.shape(value):
                raise ValueError(
                    f"warm start: {name}: trained shape {old[name].shape}, this model "
                    f"{np.shape(value)} (the architectures differ)"
                )
            return jnp.asarray(old[name], value.dtype)
        column = np.array(value)  # kernel [H, C] or bias [C]: classes on the last axis
        for target, source in enumerate(sources):
            if source is not None:
                column[..., target] = old[name][..., source]
        return jnp.asarray(column)

    missing = set(old) - set(bundle_lib.flatten(fresh))
    if missing:
        raise ValueError(f"warm start: this model has no parameter {sorted(missing)[0]}")
    return jax.tree_util.tree_map_with_path(merged, fresh)
