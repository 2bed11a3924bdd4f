r"""The main job: build the corpora, run both experiments, write the report.

    python -m experiments.reproduce --config=experiments/configs/reproduce.py:quick \
        --workdir=outputs/reproduce
    make demo                                  # the same, quick preset

Overrides reach the sub-experiments: --config.multiqt.train.steps=100,
--config.cskws.models=afkws,sliding_window, --config.data_dir=/data/tfds.
`config.size` and `config.engine_set` name the corpora of both
(synthetic_calls/<task>-SIZE and synthetic_kws/SIZE; with --config.engine_set=festival,
the `-festival` configs that add Debian's Festival as a training synthesiser): the job
sets config.multiqt.size / engine_set and config.cskws.dataset from them.
"""

import ml_collections

from experiments.configs import cskws, multiqt


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.size = preset  # smoke, quick or full: both corpora
    config.engine_set = "pip"  # speechkit.tts.ENGINE_SETS: "pip" or "festival"
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.multiqt = multiqt.get_config(preset)
    # The text the MultiQT models read: the causal 20 ms character posteriors of the
    # shipped CTC character recogniser (ctc_jax: the paper's input), not the
    # corpus's pocketsphinx words (experiments.multiqt's default, which the studies compare).
    config.multiqt.text_recogniser = "ctc_posteriors"
    # MultiQT runs once per task, each with config.multiqt (its `task` set): "questions"
    # in WORKDIR/multiqt, "symptoms" in WORKDIR/multiqt-symptoms.
    config.multiqt_tasks = "questions,symptoms"
    config.cskws = cskws.get_config(preset)
    # CS-KWS trains in a second process while MultiQT trains here (machines with 2 or more
    # cores): same numbers, the stages' seconds overlap, KWS's RTF shares the cores.
    config.kws_beside_multiqt = True
    # Where `make studies` writes (WORKDIR/../studies by default): the report links its
    # studies.md and lists its verdicts when they exist.
    config.studies_dir = ""
    return config
