r"""Leave-one-engine-out keyword spotting (`experiments.engine_transfer`).

    python -m experiments.engine_transfer --config=experiments/configs/engine_transfer.py:quick \
        --workdir=outputs/engine-transfer --config.data_dir=outputs/tensorflow_datasets
    python -m experiments.engine_transfer --config=experiments/configs/engine_transfer.py:quick \
        --workdir=/tmp/et --config.engines=pip --config.cskws.model.normalise=cmn

Presets: smoke (tests), quick, full: the corpus size and `cskws`, the CS-KWS experiment's
own config of the same preset (any field can be overridden, e.g.
--config.cskws.train.steps=3000; `dataset` is set per cell). `engines`: "festival" (espeak-ng,
Piper and Festival, each held out once; Festival must be installed), "pip" (espeak-ng
and Piper) or "auto" (festival where installed, else pip).
"""

import ml_collections

from experiments.common import check_preset
from experiments.configs import cskws


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    check_preset(preset)
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.engines = "auto"
    config.cskws = cskws.get_config(preset)
    config.cskws.models = "afkws"
    return config
