r"""The studies (`experiments.studies`): modality, noise, data size, smoothing and latency
for MultiQT; unknown class, look-ahead, noise and latency for AF-KWS.

    python -m experiments.studies --config=experiments/configs/studies.py:quick \
        --workdir=outputs/studies --config.data_dir=outputs/tensorflow_datasets
    python -m experiments.studies --config=experiments/configs/studies.py:quick \
        --workdir=/tmp/studies --config.studies=noise,smoothing \
        --config.sweeps.snr_db="(10.0, 0.0)"
    python -m experiments.studies --config=experiments/configs/studies.py:quick \
        --workdir=outputs/studies-scale --config.data_dir=outputs/tensorflow_datasets \
        --config.studies=unknown_class --config.sweeps.kws_fraction="(1.0,)" \
        --config.sweeps.kws_steps="(1500, 6000)" \
        --config.sweeps.kws_datasets="('synthetic_kws/medium',)"

Presets: smoke (every study on the smoke corpora, for tests), quick (35 min measured on 2
CPU cores after the main job, in two processes; docs/results.md: two points each on the
substitution, lag and data-size axes, two worse recognisers), full (every point). `multiqt` and
`cskws` are the experiments' own configs of the same preset (any field can be
overridden, e.g. --config.multiqt.train.steps=100); their base variants run models
multimodal, audio, text and afkws, afkws_no_unknown.
`sweeps` holds the swept values of every study.
"""

import ml_collections

from experiments.common import check_preset
from experiments.configs import cskws, multiqt


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    check_preset(preset)
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.studies = (
        "asr_quality,text_lag,noise,data_size,missing_modality,smoothing,"
        "unknown_class,lookahead,kws_noise"
    )
    config.multiqt = multiqt.get_config(preset)
    config.cskws = cskws.get_config(preset)
    # The variants' intervals (only the AF-KWS unknown-class study reads them).
    config.cskws.eval.bootstrap_resamples = {"smoke": 10, "quick": 100, "full": 200}[preset]
    # The AF-KWS studies, and the variants of text_lag, noise, data_size and
    # missing_modality, run in a second process while the other MultiQT studies run here
    # (2 or more cores; the same numbers).
    config.second_process = True

    config.sweeps = ml_collections.ConfigDict()
    config.sweeps.substitution_rate = (0.0, 0.25, 0.5)  # of the oracle transcript's words
    # other recognisers on the same audio: pocketsphinx variants
    # (multiqt_jax.datasets.render.RECOGNISER_VARIANTS), "ctc", the CTC recogniser
    # `multiqt.ctc_bundle` ("": the shipped one, ctc_jax.bundle.SHIPPED), and
    # "ctc_posteriors", its character posteriors (WER: of its greedy words)
    config.sweeps.recognisers = (
        "narrowband",
        "small_beam",
        "unigram_lm",
        "ctc",
        "ctc_posteriors",
    )
    config.sweeps.text_lag_s = (0.0, 0.5, 1.0, 2.0)  # 0: the base variant
    config.sweeps.snr_db = (20.0, 10.0, 5.0, 0.0)  # test-time noise (plus clean)
    config.sweeps.matched_snr_db = (0.0, 20.0)  # noise-trained variants' range
    config.sweeps.train_fraction = (0.1, 0.25, 0.5, 1.0)  # 1: the base variant
    config.sweeps.smoothing_frames = (1, 3, 5, 9, 15)  # 1: raw labels
    config.sweeps.kws_fraction = (0.5, 1.0)
    # unknown_class also on these corpora (e.g. ("synthetic_kws/medium",): quick's test
    # audio under 4x its training utterances; built if missing, ~15 min here)
    config.sweeps.kws_datasets = ()
    config.sweeps.kws_steps = {"smoke": (20, 40), "quick": (750, 1500), "full": (25_000, 50_000)}[
        preset
    ]
    config.sweeps.delay = (0, 2, 4, 8)  # output frames of look-ahead (40 ms each)
    if preset == "quick":  # within 40 minutes on 2 CPU cores
        config.sweeps.substitution_rate = (0.0, 0.5)
        config.sweeps.recognisers = ("narrowband", "unigram_lm", "ctc", "ctc_posteriors")
        config.sweeps.text_lag_s = (0.0, 2.0)
        config.sweeps.train_fraction = (0.25, 1.0)
    if preset == "smoke":
        config.sweeps.substitution_rate = (0.0,)
        config.sweeps.recognisers = ("small_beam",)
        config.sweeps.text_lag_s = (0.0, 1.0)
        config.sweeps.snr_db = (0.0,)
        config.sweeps.train_fraction = (0.5, 1.0)
        config.sweeps.smoothing_frames = (1, 3)
        config.sweeps.kws_fraction = (0.5, 1.0)
        config.sweeps.delay = (0, 6)
    return config
