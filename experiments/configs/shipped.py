r"""The models that ship with the toolkit, each rebuilt by one command.

    python -m experiments.ship --config=experiments/configs/shipped.py:afkws-top20 \
        --workdir=/tmp/ship --config.data_dir=/tmp/ship/data
    python -m experiments.ship --config=experiments/configs/shipped.py:multiqt-questions \
        --workdir=/tmp/ship-mq --config.data_dir=/tmp/ship/data

`config.runner` names the experiment that trains and scores it (`experiments.cskws` or
`experiments.multiqt`); the other fields are that experiment's.

`afkws-top20`: AF-KWS on the 20 embedded keywords (`cskws_jax.keywords`), the quick
preset's CPU-sized detector (experiments/configs/cskws.py) trained 4x longer on
`synthetic_kws/large-all-speakers` (2,560 training utterances that espeak-ng, Festival
and Piper speak in turn, through the speaker stage; Festival needs `make voices`). Every
engine trains it, so the same recipe is trained again without each engine for the
card's leave-one-engine-out figures (`config.leave_one_out`). The run chooses operating
points on `dev`, the first 800 test utterances (about 1.1 hours), and measures them on
`final`, the other 1,600; the shipped points are then chosen again on ten hours and
measured on ten others
(`python -m experiments.measure_points --bundle=afkws-top20 --ship`).

`multiqt-questions` (multimodal: audio and the causal 20 ms character posteriors of the
shipped CTC recogniser, `ctc_jax`) and `multiqt-questions-audio` (audio only):
MultiQT on the questions task, the quick preset's CPU-sized network trained 10x longer
with batches twice as large on `synthetic_calls/questions-full` (1,000 calls):
cross-validation fold 0's model (`config.folds`), trained on the other four folds' 800
calls and scored on fold 0's 200 and on the held-out engine's 200 calls (Piper).

Every model card also records the model's score on a smoke corpus
(`config.smoke_check`, its test split for AF-KWS, its calls for MultiQT), which the tests
rebuild and score again.
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
