r"""The models that ship with the toolkit, each rebuilt by one command.

    python -m experiments.ship --config=experiments/configs/shipped.py:afkws-top20 \
        --workdir=/tmp/ship --config.data_dir=/tmp/ship/data

`afkws-top20`: AF-KWS on the 20 embedded keywords (`cskws_jax.keywords`), the quick
preset's CPU-sized detector (experiments/configs/cskws.py) trained 4x longer on
`synthetic_kws/large` (medium's 2,560 training utterances). Its operating points are
chosen on `dev`, the first 800 test utterances (about 1.1 hours), and measured on
`final`, the other 1,600 (about 2.1 hours), and on the held-out engine's 640 (Piper). The model card
also records its mAP on the test split of `synthetic_kws/smoke` (`config.smoke_check`),
which the tests rebuild and score again.
"""

import ml_collections

from experiments.configs import cskws

MODELS = ("afkws-top20",)


def get_config(name: str = "afkws-top20") -> ml_collections.ConfigDict:
    if name not in MODELS:
        raise ValueError(f"shipped.py: expected one of {MODELS}, got {name!r}")
    config = cskws.get_config("quick")
    config.preset = name
    config.name = name
    config.models = "afkws"
    config.dataset = "synthetic_kws/large"
    config.train.steps = 6000
    config.train.log_every = 500
    config.train.checkpoint_every = 1000
    config.evals.dev = ml_collections.ConfigDict({"split": "test[:800]", "dataset": ""})
    config.evals.final = ml_collections.ConfigDict({"split": "test[800:]", "dataset": ""})
    config.eval.choose_on = "dev"
    config.smoke_check = "synthetic_kws/smoke"  # its test split, scored again by the tests
    config.ship_to = ""  # default: cskws_jax/models/<name>
    return config
