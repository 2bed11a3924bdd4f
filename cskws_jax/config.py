"""AF-KWS's configs and checks that need no model code: what a bundle's and an export's
fields are (`TASK_FIELDS`), read by the light install (`cskws_jax.export.read_folder`).

    config = AfKwsConfig(num_keywords=20)     # every size of the detector
    config.output_stride, config.num_classes  # 4, 21
    decoding = PeakDecodingConfig(radius=1, min_score=0.05)

`cskws_jax.model`, `cskws_jax.train` and `cskws_jax.bundle` import them from here.
"""

from __future__ import annotations

import dataclasses
import math

import jax

from cskws_jax.datasets.features import FEATURES
from speechkit import accelerator, checks, dataclass_json
from speechkit import bundle as bundle_lib
from speechkit import normalise as normalise_lib
from speechkit.frontend import FeatureConfig

TASK = "cskws"
FREQUENCY_KERNEL = (3, 5)  # (frames, mel bands) of each `frequency_stem` convolution


@dataclasses.dataclass(frozen=True)
class Stage:
    channels: int
    stride: int
    blocks: int  # residual blocks, the first one strided
    dilation: int = 1


@dataclasses.dataclass(frozen=True)
class AfKwsConfig:
    """Every size of the detector; hashable (a static argument of jit)."""

    num_keywords: int = 20
    unknown_class: bool = True
    features: int = FEATURES.num_mels  # log-mel bands of the input
    stem_channels: int = 64
    kernel: int = 5
    stages: tuple[Stage, ...] = (
        Stage(64, 2, 1),
        Stage(96, 2, 2),
        Stage(128, 1, 2, dilation=2),
        Stage(128, 1, 1, dilation=4),
    )
    head_channels: int = 64
    delay: int = 8  # output frames of look-ahead (x output_stride x 10 ms)
    # Matmul / convolution precision everywhere the model is applied: "highest" (float32;
    # stream == offline on GPU/TPU), "high" or "default" (TF32 / bfloat16: faster training).
    precision: str = "highest"
    # Causal per-band normalisation of the log-mel input (`speechkit.normalise`: "none",
    # "cmn", "cmvn" or "pcen") and its running means' time constant in seconds.
    normalise: str = dataclasses.field(default="none", metadata={dataclass_json.OPTIONAL: True})
    normalise_time_s: float = dataclasses.field(
        default=2.0, metadata={dataclass_json.OPTIONAL: True}
    )
    # Cepstral smoothing of each input frame before it: keep the first `envelope` DCT
    # coefficients of the bands (`speechkit.frontend.envelope_matrix`; 0: off).
    envelope: int = dataclasses.field(default=0, metadata={dataclass_json.OPTIONAL: True})
    # 2-D convolutions over (time, mel band) before the stem, filters per layer (): none.
    # Each is causal in time (FREQUENCY_KERNEL frames x bands) and halves the bands, so
    # its weights are shared across frequency: a formant pattern moved up or down a few
    # bands (another vocal tract, another synthesiser) meets the same filters.
    frequency_stem: tuple[int, ...] = dataclasses.field(
        default=(), metadata={dataclass_json.OPTIONAL: True}
    )

    def __post_init__(self):
        field = "AfKwsConfig.{}".format
        accelerator.check_precision(self.precision, field("precision"))
        checks.require_choice(field("normalise"), self.normalise, normalise_lib.KINDS)
        checks.require_number(field("normalise_time_s"), self.normalise_time_s, above=0)
        checks.require_int(field("envelope"), self.envelope, at_least=0, at_most=self.features)
        checks.require_int(field("num_keywords"), self.num_keywords, at_least=1)
        for i, filters in enumerate(self.frequency_stem):
            checks.require_int(field(f"frequency_stem[{i}]"), filters, at_least=1)
        for name in ("features", "stem_channels", "kernel", "head_channels"):
            checks.require_int(field(name), getattr(self, name), at_least=1)
        if not self.stages:
            raise ValueError(f"{field('stages')}: expected at least one stage, got {self.stages!r}")
        for i, stage in enumerate(self.stages):
            for part in ("channels", "stride", "blocks", "dilation"):
                checks.require_int(field(f"stages[{i}].{part}"), getattr(stage, part), at_least=1)
        checks.require_int(field("delay"), self.delay, at_least=0)
        self._check_sizes(field)

    def _check_sizes(self, field) -> None:
        """The sizes' upper bounds (`speechkit.checks`): the output hop, the receptive
        field and the look-ahead span at most `speechkit.checks.MAX_CONTEXT_S` of audio,
        and the parameters fit in memory. Exact integer arithmetic, in closed form per
        stage, so absurd sizes (a dilation of 1e6, 1e5 blocks, a delay of 1e9) are named
        in microseconds."""
        hop, kernel = FEATURES.hop_s, self.kernel
        checks.require_context(field("kernel"), kernel, hop, "the stem's kernel")
        # the frequency stem's receptive field, the stem's, then each stage's
        frames = kernel + (FREQUENCY_KERNEL[0] - 1) * len(self.frequency_stem)
        stride = 1
        for i, stage in enumerate(self.stages):
            blocks, dilation = stage.blocks, stage.dilation
            own = checks.receptive_field(
                [(kernel, stage.stride, 1, 1), (kernel, 1, dilation, 1)]
                + [(kernel, 1, 1, blocks - 1), (kernel, 1, dilation, blocks - 1)]
            )
            frames += (own - 1) * stride
            stride *= stage.stride
            checks.require_context(
                field(f"stages[{i}].stride"), stride, hop, f"the output hop after stage {i}"
            )
            sizes = {"kernel": kernel, f"stages[{i}].blocks": blocks}
            sizes[f"stages[{i}].dilation"] = dilation
            checks.require_context(
                field(max(sizes, key=sizes.get)),  # the largest of the sizes it grows with
                frames,
                hop,
                f"the receptive field up to stage {i} (kernel {kernel}, blocks "
                f"{checks.count_text(blocks)}, dilation {checks.count_text(dilation)})",
            )
        frames += 2 * stride  # the head's kernel-3 convolution
        checks.require_context(field("stages"), frames, hop, "the receptive field")
        checks.require_context(
            field("delay"), self.delay * stride, hop, f"the look-ahead (delay x stride {stride})"
        )
        checks.require_parameter_memory(field, self.parameter_parts())

    def parameter_parts(self) -> dict[str, tuple[int, int]]:
        """(arrays, scalars) of the model's parameters, by the field that sizes them:
        "stem_channels" (the stem), "stages[i]" (stage i's blocks and shortcut),
        "head_channels" (the head convolution and the length / offset head) and
        "num_keywords" (the heatmap head). In closed form, so a config of a million
        blocks costs nothing; the counts are those of `AfKws(config).init`
        (tests/speechkit/test_bundle_hostile.py), and a bundle whose arrays do not add up
        to them is refused before its model is built."""
        kernel, width = self.kernel, self.stem_channels
        parts = {}
        if self.frequency_stem:
            taps, previous, scalars = math.prod(FREQUENCY_KERNEL), 1, 0
            for filters in self.frequency_stem:
                scalars += taps * previous * filters + filters
                previous = filters
            parts["frequency_stem"] = (2 * len(self.frequency_stem), scalars)
        parts["stem_channels"] = (2, kernel * self.stem_inputs * width + width)
        for i, stage in enumerate(self.stages):
            channels, blocks = stage.channels, stage.blocks
            conv = kernel * channels * channels + channels
            arrays = 4 * blocks
            scalars = kernel * width * channels + channels + conv + 2 * (blocks - 1) * conv
            if stage.stride != 1 or width != channels:  # the first block's shortcut
                arrays, scalars = arrays + 2, scalars + width * channels + channels
            parts[f"stages[{i}]"] = (arrays, scalars)
            width = channels
        head = self.head_channels
        parts["head_channels"] = (4, 3 * width * head + head + 2 * head + 2)
        parts["num_keywords"] = (2, (head + 1) * self.num_classes)
        return parts

    @property
    def num_classes(self) -> int:
        """Heatmap classes: the keywords, then the unknown class if used."""
        return self.num_keywords + int(self.unknown_class)

    @property
    def stem_inputs(self) -> int:
        """Channels into the stem: the mel bands, or the frequency stem's bands x filters."""
        if not self.frequency_stem:
            return self.features
        bands = self.features
        for _ in self.frequency_stem:
            bands = -(-bands // 2)
        return bands * self.frequency_stem[-1]

    @property
    def normalisation(self) -> normalise_lib.NormaliseConfig:
        return normalise_lib.NormaliseConfig(self.normalise, self.normalise_time_s)

    @property
    def output_stride(self) -> int:
        return math.prod(s.stride for s in self.stages)

    @property
    def lax_precision(self) -> jax.lax.Precision | None:
        """The `precision` argument of every layer (None: JAX's default)."""
        return accelerator.lax_precision(self.precision)


@dataclasses.dataclass(frozen=True)
class Measured:
    """What an operating point's thresholds gave on labelled data other than the data
    they were chosen on (`cskws_jax.operating_points.measure`)."""

    fa_per_hour: float  # false alarms per hour, all keywords together
    miss_rate: float | None  # share of the keywords spoken missed (None: none spoken)
    split: str = ""  # the data, e.g. "synthetic_kws/large:test[800:]"
    hours: float = 0.0  # hours of audio in it

    def __post_init__(self):
        checks.require_number("Measured.fa_per_hour", self.fa_per_hour, at_least=0)
        if self.miss_rate is not None:
            checks.require_number("Measured.miss_rate", self.miss_rate, at_least=0, at_most=1)
        checks.require_number("Measured.hours", self.hours, at_least=0)


@dataclasses.dataclass(frozen=True)
class OperatingPoint:
    """Per-keyword score thresholds that meet a system false-alarm budget on labelled
    data (chosen by `cskws_jax.operating_points.choose`): a detection of keyword k is kept
    when its score >= thresholds[k]. `measured`: what they gave on other data (None: not
    measured, as in bundles saved before it was stored)."""

    fa_per_hour: float  # the budget: false alarms per hour of audio, all keywords together
    thresholds: tuple[float, ...]  # one per keyword, in class order
    split: str = ""  # the data they were chosen on, e.g. "synthetic_kws/quick:test"
    hours: float = 0.0  # hours of audio in that data
    measured: Measured | None = dataclasses.field(
        default=None, metadata={dataclass_json.OPTIONAL: True}
    )
    rule: str = dataclasses.field(  # how they were chosen (cskws_jax.operating_points.RULES)
        default="equal_share", metadata={dataclass_json.OPTIONAL: True}
    )

    def __post_init__(self):
        checks.require_number("OperatingPoint.fa_per_hour", self.fa_per_hour, above=0)
        checks.require_number("OperatingPoint.hours", self.hours, at_least=0)
        if self.measured is not None and not isinstance(self.measured, Measured):
            raise TypeError(
                f"OperatingPoint.measured: expected a Measured or None, got {self.measured!r}"
            )
        if not isinstance(self.thresholds, tuple) or not self.thresholds:
            raise TypeError(
                f"OperatingPoint.thresholds: expected a non-empty tuple of numbers, got "
                f"{self.thresholds!r}"
            )
        for index, value in enumerate(self.thresholds):
            checks.require_number(f"OperatingPoint.thresholds[{index}]", value)


@dataclasses.dataclass(frozen=True)
class PeakDecodingConfig:
    """Peak decoding settings, and the operating points a bundle offers
    (`python -m cskws_jax.detect --fa-per-hour B`; distinct budgets, each with one
    threshold per keyword; () when none were chosen, as in bundles saved before them)."""

    max_detections: int = 64
    radius: int = 1
    min_score: float = 0.05
    operating_points: tuple[OperatingPoint, ...] = dataclasses.field(
        default=(), metadata={dataclass_json.OPTIONAL: True}
    )

    def __post_init__(self):
        checks.require_int("PeakDecodingConfig.max_detections", self.max_detections, at_least=1)
        checks.require_memory(  # what decoding pads each example's detections to
            "PeakDecodingConfig.max_detections",
            20 * self.max_detections,
            "one example's detections (five 4-byte fields each)",
        )
        checks.require_int("PeakDecodingConfig.radius", self.radius, at_least=0)
        checks.require_context(  # an output frame is at least one feature frame (10 ms)
            "PeakDecodingConfig.radius",
            2 * self.radius + 1,
            FEATURES.hop_s,
            "the peak window (2 x radius + 1 output frames, each at least one feature frame)",
        )
        checks.require_number("PeakDecodingConfig.min_score", self.min_score, at_least=0, at_most=1)
        points = self.operating_points
        if not isinstance(points, tuple) or not all(isinstance(p, OperatingPoint) for p in points):
            raise TypeError(
                "PeakDecodingConfig.operating_points: expected a tuple of OperatingPoint, "
                f"got {points!r}"
            )
        budgets = [p.fa_per_hour for p in points]
        for index, point in enumerate(points):
            if budgets.index(point.fa_per_hour) != index:
                raise ValueError(
                    f"PeakDecodingConfig.operating_points[{index}].fa_per_hour: budget "
                    f"{point.fa_per_hour:g} FA/h is stored twice"
                )
            if len(point.thresholds) != len(points[0].thresholds):
                raise ValueError(
                    f"PeakDecodingConfig.operating_points[{index}].thresholds: "
                    f"{len(point.thresholds)} thresholds, operating_points[0] has "
                    f"{len(points[0].thresholds)}"
                )

    def default_point(self) -> OperatingPoint | None:
        """The operating point `cskws_jax.detect` uses without --fa-per-hour: the middle
        budget of those stored (the lower of the two middle ones), None when none are."""
        if not self.operating_points:
            return None
        ordered = sorted(self.operating_points, key=lambda point: point.fa_per_hour)
        return ordered[(len(ordered) - 1) // 2]

    def operating_point(self, fa_per_hour: float) -> OperatingPoint:
        """The stored operating point of budget `fa_per_hour`; a ValueError listing the
        stored budgets when there is none."""
        for point in self.operating_points:
            if math.isclose(point.fa_per_hour, fa_per_hour, rel_tol=1e-9):
                return point
        stored = ", ".join(f"{p.fa_per_hour:g}" for p in self.operating_points)
        raise ValueError(
            f"fa_per_hour: no operating point for {fa_per_hour:g} FA/h; "
            + (f"stored budgets: {stored}" if stored else "none are stored")
        )


def check_operating_points(decoding: PeakDecodingConfig, num_keywords: int, where: str):
    """Each operating point holds one threshold per keyword."""
    for index, point in enumerate(decoding.operating_points):
        if len(point.thresholds) != num_keywords:
            raise bundle_lib.BundleError(
                f"{where}: decoding.operating_points[{index}].thresholds: "
                f"{len(point.thresholds)} thresholds, labels has {num_keywords} keywords"
            )


def check_parts(config: AfKwsConfig, features: FeatureConfig, keywords, where: str):
    """The keywords and the front end fit the model config."""
    if len(keywords) != config.num_keywords:
        raise bundle_lib.BundleError(
            f"{where}: labels: {len(keywords)} keywords, model_config.num_keywords is "
            f"{config.num_keywords}"
        )
    if features.num_mels != config.features:
        raise bundle_lib.BundleError(
            f"{where}: features.num_mels: {features.num_mels}, model_config.features is "
            f"{config.features}"
        )


TASK_FIELDS = bundle_lib.TaskFields(TASK, AfKwsConfig, PeakDecodingConfig, check_parts)
