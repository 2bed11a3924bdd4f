"""MultiQT's configs and checks that need no model code: what a bundle's and an export's
fields are (`TASK_FIELDS`), read by the light install (`multiqt_jax.export.read_folder`).

    config = MultiQTConfig(num_classes=2, modalities=("audio",))
    config.audio_stride, config.text_stride   # 4, 2: one 40 ms output clock
    tracking = TrackingConfig(causal_text=True, smoothing=SmoothingConfig(min_frames=3))

`multiqt_jax.model` and `multiqt_jax.bundle` import them from here.
"""

from __future__ import annotations

import dataclasses
import math

import jax

from multiqt_jax.datasets.features import FEATURES
from multiqt_jax.decode import SmoothingConfig
from speechkit import accelerator, asr, checks, dataclass_json
from speechkit import bundle as bundle_lib
from speechkit.frontend import FeatureConfig

TASK = "multiqt"
MODALITIES = ("audio", "text")
FUSIONS = ("concat", "sum", "gated", "tensor")
AUDIO_HOP_S = FEATURES.hop_s  # the log-mel frame period
TEXT_HOP_S = asr.TEXT_FRAME_S


@dataclasses.dataclass(frozen=True)
class MultiQTConfig:
    """Every size of the model; hashable (a static argument of jit)."""

    num_classes: int
    modalities: tuple[str, ...] = MODALITIES
    audio_features: int = FEATURES.num_mels
    text_symbols: int = asr.NUM_SYMBOLS
    # f_a: receptive field 1.13 s; f_s: 1.14 s (see `streaming_spec`)
    audio_channels: tuple[int, ...] = (64, 64, 128, 128, 128)
    audio_kernels: tuple[int, ...] = (5, 5, 5, 5, 5)
    audio_strides: tuple[int, ...] = (1, 2, 2, 1, 1)
    audio_dilations: tuple[int, ...] = (1, 1, 1, 2, 4)
    text_channels: tuple[int, ...] = (64, 128, 128, 128)
    text_kernels: tuple[int, ...] = (5, 5, 5, 5)
    text_strides: tuple[int, ...] = (1, 2, 1, 1)
    text_dilations: tuple[int, ...] = (1, 1, 2, 4)
    fusion: str = "concat"
    fusion_size: int = 32  # projection width for sum / gated / tensor fusion
    dense: tuple[int, ...] = (128,)  # g: hidden layers
    dropout: float = 0.1
    # probability of dropping one modality per example in training (both modalities only)
    modality_dropout: float = 0.2
    # Matmul / convolution precision everywhere the model is applied: "highest" (float32;
    # stream == offline on GPU/TPU), "high" or "default" (TF32 / bfloat16: faster training).
    precision: str = "highest"

    def __post_init__(self):
        field = "MultiQTConfig.{}".format
        accelerator.check_precision(self.precision, field("precision"))
        checks.require_int(field("num_classes"), self.num_classes, at_least=2)  # background + 1
        checks.require_subset(field("modalities"), self.modalities, MODALITIES)
        checks.require_choice(field("fusion"), self.fusion, FUSIONS)
        for prefix in MODALITIES:  # one entry per encoder layer in each
            lengths = []
            for part in ("channels", "kernels", "strides", "dilations"):
                name = f"{prefix}_{part}"
                sizes = checks.require_ints(field(name), getattr(self, name), at_least=1)
                lengths.append(len(sizes))
            if len(set(lengths)) != 1 or not lengths[0]:
                raise ValueError(
                    f"{field(prefix)}_channels / _kernels / _strides / _dilations: expected "
                    f"equal, non-zero lengths, got {lengths}"
                )
        for name in ("audio_features", "text_symbols", "fusion_size"):
            checks.require_int(field(name), getattr(self, name), at_least=1)
        checks.require_ints(field("dense"), self.dense, at_least=1)
        self._check_context(field)
        if round(self.audio_stride * AUDIO_HOP_S, 6) != round(self.text_stride * TEXT_HOP_S, 6):
            raise ValueError(
                f"{field('audio_strides')} {self.audio_strides} (x 10 ms) and "
                f"{field('text_strides')} {self.text_strides} (x 20 ms) must reach one output hop"
            )
        checks.require_number(field("dropout"), self.dropout, at_least=0, below=1)
        checks.require_number(
            field("modality_dropout"), self.modality_dropout, at_least=0, at_most=1
        )
        checks.require_parameter_memory(field, self.parameter_parts())

    def _check_context(self, field) -> None:
        """Each encoder's output hop and receptive field span at most
        `speechkit.checks.MAX_CONTEXT_S` of its input (exact integer arithmetic, layer by
        layer, so an absurd stride, kernel or dilation is named in microseconds)."""
        for prefix, hop in (("audio", AUDIO_HOP_S), ("text", TEXT_HOP_S)):
            kernels, strides, dilations = (
                getattr(self, f"{prefix}_{part}") for part in ("kernels", "strides", "dilations")
            )
            frames, stride = 1, 1
            layers = zip(kernels, strides, dilations, strict=True)
            for i, (kernel, step, dilation) in enumerate(layers):
                frames += (kernel - 1) * dilation * stride
                stride *= step
                checks.require_context(
                    field(f"{prefix}_strides[{i}]"), stride, hop, f"the {prefix} output hop"
                )
                blame = f"{prefix}_{'kernels' if kernel >= dilation else 'dilations'}[{i}]"
                checks.require_context(
                    field(blame), frames, hop, f"the {prefix} encoder's receptive field"
                )

    def parameter_parts(self) -> dict[str, tuple[int, int]]:
        """(arrays, scalars) of the model's parameters, by the field that sizes them:
        "audio_channels" / "text_channels" (an encoder), "fusion_size" (the projections
        and gate of sum / gated / tensor fusion), "dense[i]" (g's layers) and
        "num_classes" (h). In closed form; the counts are those of `MultiQT(config).init`
        (tests/speechkit/test_bundle_hostile.py)."""
        parts, widths = {}, {}
        for prefix in self.modalities:
            width = self.audio_features if prefix == "audio" else self.text_symbols
            arrays = scalars = 0
            channels = getattr(self, f"{prefix}_channels")
            for out, kernel in zip(channels, getattr(self, f"{prefix}_kernels"), strict=True):
                arrays, scalars = arrays + 2, scalars + kernel * width * out + out
                width = out
            parts[f"{prefix}_channels"], widths[prefix] = (arrays, scalars), width
        if len(widths) == 1:
            width = next(iter(widths.values()))
        elif self.fusion == "concat":
            width = widths["audio"] + widths["text"]
        else:
            size = self.fusion_size
            arrays, scalars = 4, (widths["audio"] + widths["text"] + 2) * size
            if self.fusion == "gated":
                arrays, scalars = arrays + 2, scalars + (2 * size + 1) * size
            parts["fusion_size"] = (arrays, scalars)
            width = (size + 1) ** 2 if self.fusion == "tensor" else size
        for i, out in enumerate(self.dense):
            parts[f"dense[{i}]"] = (2, (width + 1) * out)
            width = out
        parts["num_classes"] = (2, (width + 1) * self.num_classes)
        return parts

    @property
    def audio_stride(self) -> int:
        return math.prod(self.audio_strides)

    @property
    def text_stride(self) -> int:
        return math.prod(self.text_strides)

    @property
    def lax_precision(self) -> jax.lax.Precision | None:
        """The `precision` argument of every layer (None: JAX's default)."""
        return accelerator.lax_precision(self.precision)


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    """How a bundle's model tracks: the text input must be made as in training, from each
    recognised word's emission on (`causal_text`, see
    `multiqt_jax.input_pipeline.PipelineConfig`) or at its recognised times (offline);
    each 40 ms output frame's label is the argmax of its logits, then smoothed by
    `multiqt_jax.decode`'s causal minimum-duration rule as `smoothing` says (the setting
    the model was scored with; `min_frames` 1: raw labels, also for bundles saved before
    it was stored). `text_recogniser` names the recogniser whose words the model was
    trained on: "" the corpus's (pocketsphinx; also for bundles saved before it was
    stored), "ctc" a `ctc_jax` recogniser ("ctc_posteriors": its character
    posteriors), or a pocketsphinx variant's name
    (`multiqt_jax.datasets.render.RECOGNISER_VARIANTS`); `multiqt_jax.track` says when a
    call's words come from another kind."""

    causal_text: bool = True
    smoothing: SmoothingConfig = dataclasses.field(
        default=SmoothingConfig(min_frames=1), metadata={dataclass_json.OPTIONAL: True}
    )
    text_recogniser: str = dataclasses.field(default="", metadata={dataclass_json.OPTIONAL: True})


def check_tracking(tracking: TrackingConfig, num_classes: int, where: str) -> None:
    """The smoothing's background is one of the model's classes."""
    background = tracking.smoothing.background
    if background >= num_classes:
        raise bundle_lib.BundleError(
            f"{where}: decoding.smoothing.background: {background}, labels has "
            f"{num_classes} classes"
        )


def check_parts(config: MultiQTConfig, features: FeatureConfig, classes, where: str):
    """The class names and the front end fit the model config."""
    if len(classes) != config.num_classes:
        raise bundle_lib.BundleError(
            f"{where}: labels: {len(classes)} classes, model_config.num_classes is "
            f"{config.num_classes}"
        )
    if "audio" in config.modalities and features.num_mels != config.audio_features:
        raise bundle_lib.BundleError(
            f"{where}: features.num_mels: {features.num_mels}, model_config.audio_features is "
            f"{config.audio_features}"
        )


TASK_FIELDS = bundle_lib.TaskFields(TASK, MultiQTConfig, TrackingConfig, check_parts)
