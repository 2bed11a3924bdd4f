"""AF-KWS model bundles: a trained detector saved as data, and loaded back checked.

    bundle.save("out/afkws/bundle", net, params, keywords, PeakDecodingConfig(),
                "synthetic_kws/quick")
    net, params, info = bundle.load("out/afkws/bundle")
    info.labels, info.features, info.decoding      # keywords, front end, PeakDecodingConfig

The format (bundle.json and params.npz, nothing executable) and its checks are
`speechkit.bundle`'s; this module is the task part: a `cskws_jax.config.AfKwsConfig`, the
keywords in class order, the log-mel front end and a `cskws_jax.config.PeakDecodingConfig`
with its operating points (`cskws_jax.config.OperatingPoint`). `python -m cskws_jax.detect`
runs a bundle on audio files. Specification (fields, checks, what `load` refuses, older
bundles): docs/architecture.md#data-contracts ("Model bundles"), docs/speechkit.md#bundle.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp

from cskws_jax import config, model
from cskws_jax.datasets.features import FEATURES
from speechkit import bundle as bundle_lib
from speechkit.frontend import FeatureConfig

TASK = config.TASK
check_operating_points = config.check_operating_points


def save(
    path: str | os.PathLike,
    net: model.AfKws,
    params,
    keywords,
    decode_config: config.PeakDecodingConfig | None = None,
    corpus: str = "",
    features: FeatureConfig = FEATURES,
) -> Path:
    """Writes `net`'s config and `params` (the variables `net.init` gives, e.g.
    `TrainState.params`) as a bundle folder at `path`; `keywords` name the classes in
    order (`net.config.num_keywords` of them). Returns the folder."""
    if decode_config is not None:
        check_operating_points(
            decode_config, len(keywords), f"{Path(path) / bundle_lib.MANIFEST} (to save)"
        )
    return TASK_FORMAT.save(path, net, params, keywords, decode_config, corpus, features)


def load(path: str | os.PathLike) -> tuple[model.AfKws, dict, bundle_lib.Bundle]:
    """(net, params, info) of a bundle folder; a `speechkit.bundle.BundleError` naming
    the file and the field for anything missing or inconsistent."""
    net, params, info = TASK_FORMAT.load(path)
    where = str(Path(info.path) / bundle_lib.MANIFEST)
    check_operating_points(info.decoding, len(info.labels), where)
    return net, params, info


def expected_params(model_config: config.AfKwsConfig):
    """The parameter tree of `AfKws(config)`: `jax.ShapeDtypeStruct` leaves, nothing
    computed."""
    net = model.AfKws(model_config)
    frames = 4 * model_config.output_stride
    audio = jax.ShapeDtypeStruct((1, frames, model_config.features), jnp.float32)
    return jax.eval_shape(lambda x: net.init(jax.random.key(0), {"audio": x}), audio)


TASK_FORMAT = bundle_lib.TaskFormat.of(config.TASK_FIELDS, model.AfKws, expected_params)
