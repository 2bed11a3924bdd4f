r"""Your own keywords: a synthetic corpus of the words you type, AF-KWS trained on it,
operating points, and a bundle with a model card.

Run (any field can be overridden, e.g. --config.train.steps=3000):

    python -m experiments.own_keywords --config=experiments/configs/own_keywords.py:quick \
        --config.keywords="weather,tomorrow,morning" --workdir=/tmp/my-keywords
    # starting from a trained AF-KWS bundle (its layers; the class head resized to your
    # words, keeping the columns of words it already knew):
    python -m experiments.own_keywords --config=experiments/configs/own_keywords.py:quick \
        --config.keywords="weather,tomorrow,morning" --workdir=/tmp/my-keywords-init \
        --config.init=outputs/reproduce/cskws/afkws/bundle

Presets: smoke (seconds, for tests), quick (this machine, minutes), full (accelerator
scale). Everything is experiments/configs/cskws.py's preset (model, augmentation, loss,
decoding, optimiser, training, evaluation; `config.dataset` is set by the runner) with:
`keywords` (comma- or space-separated words of pocketsphinx's pronouncing dictionary,
`cskws_jax.keywords.check_keywords`; class order), `size` (the synthetic_kws size of the
corpus: smoke, quick, medium or full), `engine_set` (`cskws_jax.datasets.render.
KWS_ENGINE_SETS`: which synthesisers speak train / test, and which one alone speaks the
held-out split) and `models` ("afkws"; "afkws_no_unknown" and "sliding_window" too if
you want the comparison). With `init`, the model's architecture is the bundle's.
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
