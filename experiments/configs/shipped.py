r"""The models that ship with the toolkit, each rebuilt by one command.

    python -m experiments.ship --config=experiments/configs/shipped.py:afkws-top20 \
        --workdir=/tmp/ship --config.data_dir=/tmp/ship/data
    python -m experiments.ship --config=experiments/configs/shipped.py:multiqt-questions \
        --workdir=/tmp/ship-mq --config.data_dir=/tmp/ship/data

`config.runner` names the experiment that trains and scores it (`experiments.cskws` or
`experiments.multiqt`); the other fields are that experiment's. Presets: `afkws-top20`,
`multiqt-questions`, `multiqt-questions-audio`.

Specification (each model's corpus, training and scoring): docs/experiments.md#shipping-a-model.
"""

import ml_collections

from experiments.configs import cskws, multiqt

MODELS = ("afkws-top20", "multiqt-questions", "multiqt-questions-audio")


def get_config(name: str = "afkws-top20") -> ml_collections.ConfigDict:
    if name not in MODELS:
        raise ValueError(f"shipped.py: expected one of {MODELS}, got {name!r}")
    config = kws_config() if name == "afkws-top20" else calls_config(name)
    config.preset = name
    config.name = name
    config.ship_to = ""  # default: <the task package>/models/<name>
    return config


def kws_config() -> ml_collections.ConfigDict:
    config = cskws.get_config("quick")
    config.runner = "cskws"
    config.models = "afkws"
    config.dataset = "synthetic_kws/large-all-speakers"
    config.leave_one_out = True  # every engine trains it: the recipe without each, for the card
    config.train.steps = 6000
    config.train.log_every = 500
    config.train.checkpoint_every = 1000
    config.evals.dev = ml_collections.ConfigDict({"split": "test[:800]", "dataset": ""})
    config.evals.final = ml_collections.ConfigDict({"split": "test[800:]", "dataset": ""})
    config.eval.choose_on = "dev"
    config.eval.measure_on = "final"  # what detect reports of the point it runs
    config.smoke_check = "synthetic_kws/smoke"  # its test split, scored again by the tests
    return config


def calls_config(name: str) -> ml_collections.ConfigDict:
    config = multiqt.get_config("quick")
    config.runner = "multiqt"
    config.task = "questions"
    config.size = "full"
    config.folds = "0"
    config.models = "audio" if name.endswith("-audio") else "multimodal"
    config.text_recogniser = "" if config.models == "audio" else "ctc_posteriors"
    config.train.steps = 3000
    config.train.batch_size = 8
    config.optimizer.warmup_steps = 100
    config.train.log_every = 250
    config.train.checkpoint_every = 500
    config.smoke_check = "synthetic_calls/questions-smoke"  # its calls, scored again by the tests
    return config
