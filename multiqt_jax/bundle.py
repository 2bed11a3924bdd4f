"""MultiQT model bundles: a trained tracker saved as data, and loaded back checked.

    bundle.save("out/multimodal/bundle-fold0", net, params, labels.classes("questions"),
                TrackingConfig(causal_text=True, smoothing=SmoothingConfig(min_frames=3)),
                "synthetic_calls/questions-quick")
    net, params, info = bundle.load("out/multimodal/bundle-fold0")
    info.labels, info.features, info.decoding      # class names, front end, TrackingConfig

The format (a folder of bundle.json and params.npz, nothing executable) and its
checks are `speechkit.bundle`'s. The task parts: the model config is a
`multiqt_jax.model.MultiQTConfig`, the labels the class names in output order
(`multiqt_jax.labels`, background first; `num_classes` of them), the features the audio
front end (`multiqt_jax.datasets.features.FEATURES` for the project's corpora), and the
decoding settings a `TrackingConfig`: how the text input is made and the label smoothing
(`multiqt_jax.decode.SmoothingConfig`) the model was scored with, which
`python -m multiqt_jax.track` applies. `load` refuses a bundle of another task and
parameters whose shapes differ from what the config's model has; bundles saved before
the smoothing was stored load with none (`min_frames` 1, raw labels, as `track` ran them).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import jax
import jax.numpy as jnp

from multiqt_jax import model
from multiqt_jax.datasets.features import FEATURES
from multiqt_jax.decode import SmoothingConfig
from speechkit import bundle as bundle_lib
from speechkit import dataclass_json
from speechkit.frontend import FeatureConfig

TASK = "multiqt"


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
    stored), "ctc" a `speechkit.ctc` recogniser ("ctc_posteriors": its character
    posteriors), or a pocketsphinx variant's name
    (`multiqt_jax.datasets.render.RECOGNISER_VARIANTS`); `multiqt_jax.track` says when a
    call's words come from another kind."""

    causal_text: bool = True
    smoothing: SmoothingConfig = dataclasses.field(
        default=SmoothingConfig(min_frames=1), metadata={dataclass_json.OPTIONAL: True}
    )
    text_recogniser: str = dataclasses.field(default="", metadata={dataclass_json.OPTIONAL: True})


def save(
    path: str | os.PathLike,
    net: model.MultiQT,
    params,
    classes,
    tracking: TrackingConfig | None = None,
    corpus: str = "",
    features: FeatureConfig = FEATURES,
) -> Path:
    """Writes `net`'s config and `params` (the variables `net.init` gives, one fold's)
    as a bundle folder at `path`; `classes` name the outputs in order
    (`net.config.num_classes` of them); `tracking` None means `TrackingConfig()`.
    Returns the folder."""
    if tracking is not None:
        check_tracking(tracking, len(classes), f"{Path(path) / bundle_lib.MANIFEST} (to save)")
    return TASK_FORMAT.save(path, net, params, classes, tracking, corpus, features)


def load(path: str | os.PathLike) -> tuple[model.MultiQT, dict, bundle_lib.Bundle]:
    """(net, params, info) of a bundle folder; a `speechkit.bundle.BundleError` naming
    the file and the field for anything missing or inconsistent."""
    net, params, info = TASK_FORMAT.load(path)
    check_tracking(info.decoding, len(info.labels), str(Path(info.path) / bundle_lib.MANIFEST))
    return net, params, info


def check_tracking(tracking: TrackingConfig, num_classes: int, where: str) -> None:
    """The smoothing's background is one of the model's classes."""
    background = tracking.smoothing.background
    if background >= num_classes:
        raise bundle_lib.BundleError(
            f"{where}: decoding.smoothing.background: {background}, labels has "
            f"{num_classes} classes"
        )


def expected_params(config: model.MultiQTConfig):
    """The parameter tree of `MultiQT(config)`: `jax.ShapeDtypeStruct` leaves, nothing
    computed."""
    net = model.MultiQT(config)
    widths = {"audio": config.audio_features, "text": config.text_symbols}
    strides = {"audio": config.audio_stride, "text": config.text_stride}
    inputs = {
        name: jax.ShapeDtypeStruct((1, 4 * strides[name], widths[name]), jnp.float32)
        for name in config.modalities
    }
    return jax.eval_shape(lambda x: net.init(jax.random.key(0), x), inputs)


def _check_parts(config: model.MultiQTConfig, features: FeatureConfig, classes, where: str):
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


TASK_FORMAT = bundle_lib.TaskFormat(
    TASK, model.MultiQT, model.MultiQTConfig, TrackingConfig, expected_params, _check_parts
)
