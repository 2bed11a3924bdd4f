r"""Your own keywords: a synthetic corpus of the words you type, AF-KWS trained on it,
operating points, and a bundle with a model card.

Run (any field can be overridden, e.g. --config.train.steps=3000):

    python -m experiments.own_keywords --config=experiments/configs/own_keywords.py:quick \
        --config.keywords="weather,tomorrow,morning" --workdir=/tmp/my-keywords
    # starting from a trained AF-KWS bundle (its layers; the class head resized):
    python -m experiments.own_keywords --config=experiments/configs/own_keywords.py:quick \
        --config.keywords="weather,tomorrow,morning" --workdir=/tmp/my-keywords-init \
        --config.init=outputs/reproduce/cskws/afkws/bundle

Presets: smoke (seconds, for tests), quick (this machine, minutes), full (accelerator
scale): experiments/configs/cskws.py's preset with `keywords`, `size`, `engine_set`,
`models` and `init` (docs/experiments.md#own-keywords-runner).
"""

import ml_collections

from experiments.configs import cskws


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    config = cskws.get_config(preset)
    config.keywords = ""  # required: the words to detect, e.g. "weather,tomorrow,morning"
    config.size = preset  # the corpus: synthetic_kws sizes smoke, quick, medium, full
    config.engine_set = "pip"  # espeak-ng trains and tests, Piper held out
    config.models = "afkws"
    config.dataset = ""  # synthetic_kws/<size>[-<engine set>]-kw-<digest>, set by the runner
    return config
