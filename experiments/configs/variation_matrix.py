r"""The leave-one-engine-out matrix of each speech variation (`experiments.variation_matrix`).

    python -m experiments.variation_matrix --config=experiments/configs/variation_matrix.py:quick \
        --workdir=outputs/variation-matrix --config.data_dir=outputs/tensorflow_datasets
    python -m experiments.variation_matrix --config=experiments/configs/variation_matrix.py:quick \
        --workdir=/tmp/vm --config.variations=plain,speakers --config.tasks=kws

Presets: smoke (tests), quick, full: the corpus size and the two experiments' own configs
of the same preset, `cskws` (AF-KWS alone) and `multiqt` (questions, audio-only MultiQT
alone); any field can be overridden (--config.cskws.train.steps=3000). Per cell the
runner sets the corpus, the training engines (`engines`) and the held-out evaluation.
`variations`: some of `speechkit.tts.VARIATIONS`; `tasks`: some of kws, questions.
Festival must be installed (`make voices`): every corpus is spoken by all three engines.
"""

import ml_collections

from experiments.common import check_preset
from experiments.configs import cskws, multiqt


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    check_preset(preset)
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.variations = "plain,speakers,varied"  # rows, in this order
    config.tasks = "kws,questions"
    config.cskws = cskws.get_config(preset)
    config.cskws.models = "afkws"
    config.multiqt = multiqt.get_config(preset)
    config.multiqt.models = "audio"
    return config
