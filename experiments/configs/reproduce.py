r"""The main job: build the corpora, run both experiments, write the report.

    python -m experiments.reproduce --config=experiments/configs/reproduce.py:quick \
        --workdir=outputs/reproduce
    make demo                                  # the same, quick preset

Overrides reach the sub-experiments: --config.multiqt.train.steps=100,
--config.cskws.models=afkws,sliding_window, --config.data_dir=/data/tfds.
`config.size` names the corpora of both (synthetic_calls/<task>-SIZE and
synthetic_kws/SIZE): the job sets config.multiqt.size and config.cskws.dataset from it.
"""

import ml_collections

from experiments.configs import cskws, multiqt


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.size = preset  # smoke, quick or full: both corpora
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.multiqt = multiqt.get_config(preset)
    config.cskws = cskws.get_config(preset)
    return config
