"""The experiment configs state no dataclass default again: every section that maps onto a
dataclass holds its defaults (`experiments.configs.section`), and only the choices listed
here (a task's or a preset's) differ from them; each section builds its dataclass."""

from __future__ import annotations

import dataclasses

import pytest

from cskws_jax import baselines as kws_baselines
from cskws_jax import losses as kws_losses
from cskws_jax import model as kws_model
from cskws_jax import train as kws_train
from experiments import common
from experiments.configs import cskws, multiqt, section
from multiqt_jax import baselines as calls_baselines
from multiqt_jax import decode as calls_decode
from multiqt_jax import model as calls_model
from speechkit import augment, optim

PRESETS = ("smoke", "quick", "full")
SECTIONS = {
    "cskws": (
        cskws,
        {
            "model": kws_model.AfKwsConfig,
            "augment": kws_train.AugmentConfig,
            "loss": kws_losses.LossConfig,
            "decode": kws_train.PeakDecodingConfig,
            "optimizer": optim.OptimizerConfig,
            "window": kws_baselines.WindowConfig,
        },
    ),
    "multiqt": (
        multiqt,
        {
            "model": calls_model.MultiQTConfig,
            "augment": augment.MaskConfig,
            "optimizer": optim.OptimizerConfig,
            "smoothing": calls_decode.SmoothingConfig,
            "baselines": calls_baselines.BaselineConfig,
        },
    ),
}
# What the runner sets that has no default.
RUNNER_SETS = {calls_model.MultiQTConfig: {"num_classes": 7}}
# (experiment, preset) -> the fields set on purpose away from their dataclass's default.
CPU_KWS = {"model.stem_channels", "model.stages", "model.head_channels", "model.delay"}
CPU_CALLS = {"model.audio_channels", "model.text_channels", "model.dense"}
OPTIMIZER = {"optimizer.learning_rate", "optimizer.warmup_steps"}
KWS = OPTIMIZER | {"model.normalise", "augment.vtlp", "loss.unknown_weight"}
CALLS = OPTIMIZER | {"augment.freq_masks", "augment.max_freq_width", "augment.time_masks"}
CHOSEN = {
    ("cskws", "smoke"): KWS | CPU_KWS,
    ("cskws", "quick"): KWS | CPU_KWS,
    ("cskws", "full"): KWS,
    ("multiqt", "smoke"): CALLS | CPU_CALLS | {"baselines.n_estimators", "baselines.epochs"},
    ("multiqt", "quick"): CALLS | CPU_CALLS,
    ("multiqt", "full"): CALLS | {"baselines.n_estimators", "baselines.epochs"},
}


def _plain(value):
    if dataclasses.is_dataclass(value):
        return dataclasses.astuple(value)
    if isinstance(value, tuple | list):
        return tuple(_plain(item) for item in value)
    return value


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("experiment", sorted(SECTIONS))
def test_only_the_chosen_fields_differ_from_their_dataclass_defaults(experiment, preset):
    module, sections = SECTIONS[experiment]
    config = module.get_config(preset)
    differ = set()
    for name, cls in sections.items():
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        for field, value in config[name].to_dict().items():
            if _plain(value) != _plain(defaults[field]):
                differ.add(f"{name}.{field}")
        common.build(cls, config[name], name, **RUNNER_SETS.get(cls, {}))  # all fields of cls
    assert differ == CHOSEN[(experiment, preset)]


def test_a_section_states_the_defaults_and_the_given_values():
    made = section(calls_baselines.BaselineConfig, leave_out=("seed",), epochs=3)
    assert "seed" not in made and made.epochs == 3 and made.min_window_s is None
    made.min_window_s = 1.0  # a None default stays settable (a typed placeholder)
    built = common.build(calls_baselines.BaselineConfig, made, "baselines")
    assert built == calls_baselines.BaselineConfig(epochs=3, min_window_s=1.0)
    stages = section(kws_model.AfKwsConfig, leave_out=("num_keywords",)).stages
    assert stages == tuple(dataclasses.astuple(s) for s in kws_model.AfKwsConfig().stages)
    with pytest.raises(ValueError, match=r"\['epoch'\] are not fields of BaselineConfig"):
        section(calls_baselines.BaselineConfig, epoch=3)
