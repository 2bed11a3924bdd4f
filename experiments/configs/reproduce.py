r"""The main job: build the corpora, run both experiments, write the report.

    python -m experiments.reproduce --config=experiments/configs/reproduce.py:quick \
        --workdir=outputs/reproduce
    make demo                                  # the same, quick preset

Overrides reach the sub-experiments: --config.multiqt.train.steps=100,
--config.cskws.models=afkws,sliding_window, --config.data_dir=/data/tfds.
"""

import ml_collections

from experiments.configs import cskws, multiqt


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.multiqt = multiqt.get_config(preset)
    config.cskws = cskws.get_config(preset)
    return config
