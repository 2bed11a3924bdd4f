"""MultiQT model bundles: a trained tracker saved as data, and loaded back checked.

    bundle.save("out/multimodal/bundle-fold0", net, params, labels.classes("questions"),
                DecodeConfig(causal_text=True), "synthetic_calls/questions-quick")
    net, params, info = bundle.load("out/multimodal/bundle-fold0")
    info.labels, info.features, info.decoding      # class names, front end, DecodeConfig

The format (a folder of bundle.json and params.npz, nothing executable) and its
checks are `speechkit.bundle`'s. The task parts: the model config is a
`multiqt_jax.model.MultiQTConfig`, the labels the class names in output order
(`multiqt_jax.labels`, background first; `num_classes` of them), the features the audio
front end (`multiqt_jax.datasets.features.FEATURES` for the project's corpora), and the
decoding settings a `DecodeConfig`. `load` refuses a bundle of another task and
parameters whose shapes differ from what the config's model has.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import jax
import jax.numpy as jnp

from multiqt_jax import model
from multiqt_jax.datasets.features import FEATURES
from speechkit import bundle as bundle_lib
from speechkit.frontend import FeatureConfig

TASK = "multiqt"


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
    """How a bundle's model is used: each 40 ms output frame's label is the argmax of its
    logits; the text input must be made as in training, from each recognised word's
    emission on (`causal_text`, see `multiqt_jax.input_pipeline.PipelineConfig`) or at
    its recognised times (offline)."""

    causal_text: bool = True


def save(
    path: str | os.PathLike,
    net: model.MultiQT,
    params,
    classes,
    decode_config: DecodeConfig | None = None,
    corpus: str = "",
    features: FeatureConfig = FEATURES,
) -> Path:
    """Writes `net`'s config and `params` (the variables `net.init` gives, one fold's)
    as a bundle folder at `path`; `classes` name the outputs in order
    (`net.config.num_classes` of them). Returns the folder."""
    return TASK_FORMAT.save(path, net, params, classes, decode_config, corpus, features)


def load(path: str | os.PathLike) -> tuple[model.MultiQT, dict, bundle_lib.Bundle]:
    """(net, params, info) of a bundle folder; a `speechkit.bundle.BundleError` naming
    the file and the field for anything missing or inconsistent."""
    return TASK_FORMAT.load(path)


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
    TASK, model.MultiQT, model.MultiQTConfig, DecodeConfig, expected_params, _check_parts
)
