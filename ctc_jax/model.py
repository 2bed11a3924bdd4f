"""A causal character CTC recogniser over MultiQT's front end, in flax.linen.

40 log-mel frames (10 ms) -> a causal strided Conv1D stem (20 ms, the text stream's own
rate) -> residual causal dilated depthwise-separable blocks -> logits over the 30
`ctc_jax.symbols`. Nothing looks ahead; the default is sized for a 2-core CPU, `FULL`
for an accelerator. `CtcRecogniser.step` streams by `speechkit.streaming`'s protocol,
equal to the whole call.

    net = model.CtcRecogniser(model.CtcConfig(channels=32, kernels=(3, 3), dilations=(1, 2)))
    params = net.init(jax.random.key(0), {"audio": jnp.zeros((1, 100, 40))})
    outputs, mask = net.apply(params, {"audio": jnp.zeros((1, 100, 40))})  # logits [1, 50, 30]

Specification (layers, streaming, precision): docs/models.md#the-character-recogniser.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import sequence_layers.jax as sl

from ctc_jax import symbols
from speechkit import accelerator, checks, streaming
from speechkit.optim import parameter_count

AUDIO_HOP_S = 0.01  # the log-mel frame period of the input


@dataclasses.dataclass(frozen=True)
class CtcConfig:
    """Every size of the recogniser; hashable (a static argument of jit)."""

    features: int = 40  # log-mel bands of the input (MultiQT's front end)
    num_symbols: int = symbols.NUM_SYMBOLS
    stride: int = 2  # 10 ms frames per output frame
    stem_kernel: int = 5  # 10 ms frames
    channels: int = 256
    # one residual block per entry; kernels and dilations in output (20 ms) frames.
    # Receptive field: 1 + sum((k - 1) * d) output frames (+ the stem): 3.6 s here.
    kernels: tuple[int, ...] = (5,) * 12
    dilations: tuple[int, ...] = (1, 2, 4, 8) * 3
    dropout: float = 0.1
    precision: str = "highest"

    def __post_init__(self):
        field = "CtcConfig.{}".format
        accelerator.check_precision(self.precision, field("precision"))
        for name in ("features", "num_symbols", "stride", "stem_kernel", "channels"):
            checks.require_int(field(name), getattr(self, name), at_least=1)
        checks.require_int(field("num_symbols"), self.num_symbols, at_least=2)
        kernels = checks.require_ints(field("kernels"), self.kernels, at_least=1)
        dilations = checks.require_ints(field("dilations"), self.dilations, at_least=1)
        if len(kernels) != len(dilations):
            raise ValueError(
                f"{field('kernels')} / {field('dilations')}: expected equal lengths, got "
                f"{len(kernels)} and {len(dilations)}"
            )
        checks.require_number(field("dropout"), self.dropout, at_least=0, below=1)
        hop = AUDIO_HOP_S * self.stride
        checks.require_context(field("stride"), self.stride, AUDIO_HOP_S, "the output hop")
        frames = 1
        for i, (kernel, dilation) in enumerate(zip(kernels, dilations, strict=True)):
            frames += (kernel - 1) * dilation
            blame = f"{'kernels' if kernel >= dilation else 'dilations'}[{i}]"
            checks.require_context(field(blame), frames, hop, "the receptive field")
        checks.require_parameter_memory(field, self.parameter_parts())

    def parameter_parts(self) -> dict[str, tuple[int, int]]:
        """(arrays, scalars) of the parameters by the field that sizes them, in closed
        form (equal to `CtcRecogniser(config).init`'s; tests/ctc_jax/test_model.py)."""
        width = self.channels
        blocks = len(self.kernels)
        depthwise = sum(kernel * width + width for kernel in self.kernels)
        return {
            "stem_kernel": (2, self.stem_kernel * self.features * width + width),
            "kernels": (6 * blocks, depthwise + blocks * (width * width + 3 * width)),
            "num_symbols": (4, 2 * width + (width + 1) * self.num_symbols),
        }

    @property
    def lax_precision(self) -> jax.lax.Precision | None:
        return accelerator.lax_precision(self.precision)

    @property
    def output_hop_s(self) -> float:
        return round(AUDIO_HOP_S * self.stride, 6)


# An accelerator's recogniser: ~5x the work per frame of the default, 7.5 s of context.
FULL = CtcConfig(channels=512, kernels=(5,) * 16, dilations=(1, 2, 4, 8, 16) * 3 + (1,))


def streaming_spec(config: CtcConfig) -> streaming.StreamingSpec:
    """The streaming spec of a config's recogniser (`CtcRecogniser.streaming_spec`)."""
    return streaming.spec_of(CtcRecogniser(config))


class ShiftedDepthwiseConv1D(sl.DepthwiseConv1D):
    """sequence-layers' `DepthwiseConv1D` (stride 1, depth multiplier 1) computed as a sum
    of `kernel_size` shifted, scaled copies of its input instead of a grouped convolution:
    the same parameters, padding, receptive field and streaming state (the base class's),
    and on XLA:CPU about 10x faster, forward and backward (0.009 against 0.097 s for a
    [16, 400, 256] block here). Elementwise only, so it is exact float32 at any precision
    setting."""

    @dataclasses.dataclass(frozen=True)
    class Config(sl.DepthwiseConv1D.Config):
        def __post_init__(self):
            super().__post_init__()
            if self.strides != 1 or self.depth_multiplier != 1:
                raise ValueError(
                    "ShiftedDepthwiseConv1D: expected strides 1 and depth_multiplier 1, got "
                    f"{self.strides} and {self.depth_multiplier}"
                )

        def make(self) -> ShiftedDepthwiseConv1D:
            return ShiftedDepthwiseConv1D(self, name=self.name)

    @nn.compact
    def _layer(self, x, padding, training: bool):
        del training
        config, channels = self.config, x.shape[-1]
        kernel = self.param(
            "kernel", config.kernel_init, (config.kernel_size, 1, channels), config.param_dtype
        )
        bias = self.param("bias", config.bias_init, (channels,), config.param_dtype)
        ((left, right),) = padding
        x = jnp.pad(x, ((0, 0), (left, right), (0, 0)))
        step = config.dilation_rate
        frames = x.shape[1] - (config.kernel_size - 1) * step
        taps = [
            x[:, k * step : k * step + frames] * kernel[k, 0] for k in range(config.kernel_size)
        ]
        return sum(taps[1:], taps[0]) + bias


def _encoder(config: CtcConfig) -> sl.Serial.Config:
    precision = config.lax_precision
    layers = [
        sl.Conv1D.Config(
            filters=config.channels,
            kernel_size=config.stem_kernel,
            strides=config.stride,
            padding="causal",
            activation=jax.nn.relu,
            precision=precision,
            name="stem",
        )
    ]
    for i, (kernel, dilation) in enumerate(zip(config.kernels, config.dilations, strict=True)):
        block = [
            ShiftedDepthwiseConv1D.Config(
                kernel_size=kernel, dilation_rate=dilation, padding="causal", name="depthwise"
            ),
            sl.Dense.Config(config.channels, precision=precision, name="pointwise"),
            sl.LayerNormalization.Config(name="norm"),
            sl.Relu.Config(),
            sl.Dropout.Config(config.dropout),
        ]
        layers.append(sl.Residual.Config(block, name=f"block{i}"))
    layers.append(sl.LayerNormalization.Config(name="final_norm"))
    layers.append(sl.Dense.Config(config.num_symbols, precision=precision, name="symbols"))
    return sl.Serial.Config(layers, name="encoder")


class CtcRecogniser(nn.Module):
    """See the module docstring: a `speechkit.streaming` protocol module whose outputs
    are {"logits" float32 [B, To, num_symbols]} and their mask [B, To]."""

    config: CtcConfig

    def setup(self):
        self.encoder = _encoder(self.config).make()

    def streaming_spec(self) -> streaming.StreamingSpec:
        """Block size and receptive field from the layers themselves; causal."""
        return streaming.StreamingSpec({"audio": streaming.input_spec(self.encoder, AUDIO_HOP_S)})

    @accelerator.at_config_precision
    def __call__(self, inputs, mask=None, *, training: bool = False):
        """inputs {"audio": float [B, Ta, features]}, mask {"audio": bool [B, Ta]} (None:
        all real) -> ({"logits": float32 [B, ceil(Ta / stride), num_symbols]}, bool mask)."""
        audio = self._audio(inputs, mask)
        out = self.encoder.layer(audio, training=training)
        return self._outputs(out)

    def initial_state(self, batch_size: int):
        """The state before the first block: zeros in every causal convolution buffer."""
        spec = sl.ChannelSpec((self.config.features,), jnp.float32)
        return self.encoder.get_initial_state(batch_size, spec, training=False)

    @accelerator.at_config_precision
    def step(self, inputs, mask, state):
        """One block {"audio": [B, n * stride, features]} -> ({"logits" [B, n,
        num_symbols]}, mask bool [B, n], new state). Inference only (no dropout)."""
        out, state = self.encoder.step(self._audio(inputs, mask), state, training=False)
        outputs, out_mask = self._outputs(out)
        return outputs, out_mask, state

    def _audio(self, inputs, mask) -> sl.Sequence:
        if not isinstance(inputs, dict) or "audio" not in inputs:
            given = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"inputs: expected a dict with 'audio', got {given}")
        shape = np.shape(inputs["audio"])
        if len(shape) != 3 or shape[2] != self.config.features:
            raise ValueError(
                f"inputs['audio']: shape {shape}, expected [batch, frames, {self.config.features}]"
            )
        values = jnp.asarray(inputs["audio"], jnp.float32)
        frame_mask = (mask or {}).get("audio")
        if frame_mask is None:
            frame_mask = jnp.ones(shape[:2], bool)
        return sl.Sequence(values, jnp.asarray(frame_mask, bool))

    def _outputs(self, out: sl.Sequence):
        logits = jnp.where(out.mask[..., None], out.values, 0.0).astype(jnp.float32)
        return {"logits": logits}, out.mask


def describe(config: CtcConfig, params) -> str:
    """One line for the start of a run: size, output rate, receptive field."""
    spec = streaming_spec(config)
    return (
        f"CTC recogniser: {parameter_count(params):,} parameters, one output every "
        f"{spec.output_hop_s * 1000:.0f} ms over {config.num_symbols} symbols, receptive "
        f"field {spec.receptive_field_s('audio'):.2f} s, latency {spec.output_latency}, "
        f"{config.precision} precision"
    )
