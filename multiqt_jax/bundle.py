"""MultiQT model bundles: a trained tracker saved as data, and loaded back checked.

    bundle.save("out/multimodal/bundle-fold0", net, params, labels.classes("questions"),
                TrackingConfig(causal_text=True, smoothing=SmoothingConfig(min_frames=3)),
                "synthetic_calls/questions-quick")
    net, params, info = bundle.load("out/multimodal/bundle-fold0")
    info.labels, info.features, info.decoding      # class names, front end, TrackingConfig

The format (bundle.json and params.npz, nothing executable) and its checks are
`speechkit.bundle`'s; this module is the task part: a `multiqt_jax.model.MultiQTConfig`,
the class names in output order (`multiqt_jax.labels`, background first), the audio front
end and a `TrackingConfig` (the text input and the label smoothing,
`multiqt_jax.decode.SmoothingConfig`, that `python -m multiqt_jax.track` applies).
Specification (fields, checks, what `load` refuses, older bundles):
docs/architecture.md#data-contracts ("Model bundles"), docs/speechkit.md#bundle.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp

from multiqt_jax import config, model
from multiqt_jax.datasets.features import FEATURES
from speechkit import bundle as bundle_lib
from speechkit.frontend import FeatureConfig

TASK = config.TASK
check_tracking = config.check_tracking
TrackingConfig = config.TrackingConfig


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


def expected_params(model_config: config.MultiQTConfig):
    """The parameter tree of `MultiQT(config)`: `jax.ShapeDtypeStruct` leaves, nothing
    computed."""
    net = model.MultiQT(model_config)
    widths = {"audio": model_config.audio_features, "text": model_config.text_symbols}
    strides = {"audio": model_config.audio_stride, "text": model_config.text_stride}
    inputs = {
        name: jax.ShapeDtypeStruct((1, 4 * strides[name], widths[name]), jnp.float32)
        for name in model_config.modalities
    }
    return jax.eval_shape(lambda x: net.init(jax.random.key(0), x), inputs)


TASK_FORMAT = bundle_lib.TaskFormat.of(config.TASK_FIELDS, model.MultiQT, expected_params)
