"""Recogniser bundles: a trained CTC recogniser saved as data, and loaded back checked.

    bundle.save("out/recogniser/bundle", net, params, corpus="recogniser_speech/quick")
    net, params, info = bundle.load("out/recogniser/bundle")
    info.labels     # the printable symbol of every output ("_" blank, " " space)

The format (a folder of bundle.json and params.npz, nothing executable) and its checks
are `speechkit.bundle`'s. The task parts: the model config is a
`ctc_jax.model.CtcConfig`, the labels the symbols in output order
(`ctc_jax.symbols`; `num_symbols` of them), the features the audio front end
(40 log-mel at 10 ms, MultiQT's), the decoding settings a `DecodingConfig`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import jax
import jax.numpy as jnp

from ctc_jax import model, symbols
from speechkit import bundle as bundle_lib
from speechkit.frontend import FeatureConfig

TASK = "ctc_recogniser"
FEATURES = FeatureConfig(window_ms=20.0, hop_ms=10.0, num_mels=40)  # MultiQT's front end
# The recogniser that ships with the toolkit: a bundle folder with its MODEL_CARD.md (its
# training command and time, data and scores).
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "quick")


@dataclasses.dataclass(frozen=True)
class DecodingConfig:
    """How the recogniser's outputs are read: greedy causal decoding
    (`ctc_jax.decode`), the only kind so far."""

    method: str = "greedy"

    def __post_init__(self):
        if self.method != "greedy":
            raise ValueError(f"DecodingConfig.method: expected 'greedy', got {self.method!r}")


def labels(config: model.CtcConfig) -> list[str]:
    """The printable symbol of each of the config's outputs."""
    return [symbols.character(i) for i in range(config.num_symbols)]


def save(
    path: str | os.PathLike,
    net: model.CtcRecogniser,
    params,
    corpus: str = "",
    features: FeatureConfig = FEATURES,
) -> Path:
    """Writes `net`'s config and `params` as a bundle folder at `path`; returns it."""
    return TASK_FORMAT.save(path, net, params, labels(net.config), None, corpus, features)


def load(path: str | os.PathLike) -> tuple[model.CtcRecogniser, dict, bundle_lib.Bundle]:
    """(net, params, info) of a bundle folder; a `speechkit.bundle.BundleError` naming
    the file and the field for anything missing or inconsistent."""
    return TASK_FORMAT.load(path)


def expected_params(config: model.CtcConfig):
    """The parameter tree of `CtcRecogniser(config)`: `jax.ShapeDtypeStruct` leaves."""
    net = model.CtcRecogniser(config)
    audio = jax.ShapeDtypeStruct((1, 4 * config.stride, config.features), jnp.float32)
    return jax.eval_shape(lambda x: net.init(jax.random.key(0), {"audio": x}), audio)


def _check_parts(config: model.CtcConfig, features: FeatureConfig, names, where: str):
    """The symbols and the front end fit the model config."""
    if list(names) != labels(config):
        raise bundle_lib.BundleError(
            f"{where}: labels: expected the {config.num_symbols} symbols of "
            f"ctc_jax.symbols in order, got {len(names)} others"
        )
    if features.num_mels != config.features:
        raise bundle_lib.BundleError(
            f"{where}: features.num_mels: {features.num_mels}, model_config.features is "
            f"{config.features}"
        )
    if round(features.hop_s, 6) != model.AUDIO_HOP_S:
        raise bundle_lib.BundleError(
            f"{where}: features.hop_ms: {features.hop_ms}, the recogniser reads 10 ms frames"
        )


TASK_FORMAT = bundle_lib.TaskFormat.of(
    bundle_lib.TaskFields(TASK, model.CtcConfig, DecodingConfig, _check_parts),
    model.CtcRecogniser,
    expected_params,
)
