r"""The AF-KWS engine-transfer levers, screened (`experiments.kws_levers`).

    python -m experiments.kws_levers --config=experiments/configs/kws_levers.py:quick \
        --workdir=outputs/kws-levers --config.data_dir=outputs/tensorflow_datasets
    python -m experiments.kws_levers --config=experiments/configs/kws_levers.py:quick \
        --workdir=/tmp/levers --config.levers=base,cmn

Every lever is a CS-KWS run (`config.cskws`, the experiment's own config of the preset,
AF-KWS only) with the dotted fields of `CATALOGUE[<lever>]` below set, scored on the
in-engine test split and on the development half of the held-out engine's split
("heldout[:50%]"); the other half is left for the final check of the chosen setting.
`levers` names the levers run, in order. Rows named "*_nounk" train AF-KWS without the
unknown class (the paper's claim that it helps is then not what is measured).
"""

import ml_collections

from experiments.common import check_preset
from experiments.configs import cskws

CMN = {"model.normalise": "cmn"}
VTLP = {"augment.vtlp": (0.9, 1.1)}
NO_UNKNOWN = {"models": "afkws_no_unknown"}
DEFAULTS = {**CMN, **VTLP, "loss.unknown_weight": 0.1}  # what the screen chose
BIG = {  # the full preset's detector
    "model.stem_channels": 64,
    "model.stages": ((64, 2, 1, 1), (96, 2, 2, 1), (128, 1, 2, 2), (128, 1, 1, 4)),
    "model.head_channels": 64,
}
BIG_3000 = {**BIG, "train.steps": 3000}  # ... for twice the quick preset's steps
MEDIUM = {"dataset": "synthetic_kws/medium"}  # four times quick's training utterances
FESTIVAL = "synthetic_kws/quick-festival"
CATALOGUE = {
    "base": {},
    "seed1": {"seed": 1},
    "cmn": CMN,
    "cmvn": {"model.normalise": "cmvn"},
    "pcen": {"model.normalise": "pcen"},
    "vtlp": {"augment.vtlp": (0.8, 1.2)},
    "eq": {"augment.eq_db": 6.0},
    "masks": {"augment.freq_masks": 2, "augment.time_masks": 2},
    "cmn_seed1": {**CMN, "seed": 1},
    "cmn_fast": {**CMN, "model.normalise_time_s": 0.5},
    "cmn_eq": {**CMN, "augment.eq_db": 6.0},
    "cmn_noise": {**CMN, "augment.noise_probability": 1.0, "augment.snr_db": (0.0, 20.0)},
    "cmn_big": {**CMN, **BIG},
    "cmn_3000": {**CMN, "train.steps": 3000},
    "cmn_nounk": {**CMN, **NO_UNKNOWN},
    "cmn_uw01": {**CMN, "loss.unknown_weight": 0.1},
    "cmn_kwcount": {**CMN, "loss.count": "keywords"},
    "cmn_kwcount_uw03": {**CMN, "loss.count": "keywords", "loss.unknown_weight": 0.3},
    "cmn_vtlp": {**CMN, **VTLP},
    "cmn_vtlp_uw003": {**CMN, **VTLP, "loss.unknown_weight": 0.03},
    "cmn_vtlp_uw01": {**CMN, **VTLP, "loss.unknown_weight": 0.1},
    "cmn_vtlp_uw03": {**CMN, **VTLP, "loss.unknown_weight": 0.3},
    "cmn_vtlp_env20_uw01": {**CMN, **VTLP, "model.envelope": 20, "loss.unknown_weight": 0.1},
    "cmn_vtlp_nounk": {**CMN, **VTLP, **NO_UNKNOWN},
    "cmn_vtlp_nounk_seed1": {**CMN, **VTLP, **NO_UNKNOWN, "seed": 1},
    "cmn_vtlp15_nounk": {**CMN, "augment.vtlp": (0.85, 1.15), **NO_UNKNOWN},
    "cmn_vtlp_eq_nounk": {**CMN, **VTLP, "augment.eq_db": 6.0, **NO_UNKNOWN},
    "cmn_vtlp_env20_nounk": {**CMN, **VTLP, "model.envelope": 20, **NO_UNKNOWN},
    "cmn_vtlp_env30_nounk": {**CMN, **VTLP, "model.envelope": 30, **NO_UNKNOWN},
    "cmn_vtlp_nounk_3000": {**CMN, **VTLP, **NO_UNKNOWN, "train.steps": 3000},
    "cmn_vtlp_nounk_750": {**CMN, **VTLP, **NO_UNKNOWN, "train.steps": 750},
    "cmn_vtlp_uw01_750": {**CMN, **VTLP, "loss.unknown_weight": 0.1, "train.steps": 750},
    "cmn_vtlp_uw01_wd": {**CMN, **VTLP, "loss.unknown_weight": 0.1, "optimizer.weight_decay": 1e-2},
    "cmn_vtlp_uw01_seed1": {**CMN, **VTLP, "loss.unknown_weight": 0.1, "seed": 1},
    "cmn_vtlp_uw01_wd_seed1": {
        **CMN,
        **VTLP,
        "loss.unknown_weight": 0.1,
        "optimizer.weight_decay": 1e-2,
        "seed": 1,
    },
    "cmn_vtlp_nounk_wd": {**CMN, **VTLP, **NO_UNKNOWN, "optimizer.weight_decay": 1e-2},
    # decoding: detections down to a score of 0.01 instead of 0.05
    "cmn_vtlp_uw01_floor": {**CMN, **VTLP, "loss.unknown_weight": 0.1, "decode.min_score": 0.01},
    "cmn_vtlp_nounk_floor": {**CMN, **VTLP, **NO_UNKNOWN, "decode.min_score": 0.01},
    # 2-D convolutions over (time, band) before the stem, on the chosen defaults
    "defaults_freq8": {**DEFAULTS, "model.frequency_stem": (8, 8)},
    "defaults_freq8_seed1": {**DEFAULTS, "model.frequency_stem": (8, 8), "seed": 1},
    # data, size and training time, on the chosen defaults: the larger detector for twice
    # the steps; four times the training utterances (synthetic_kws/medium) with the quick
    # detector, for the same and twice the steps, and with the larger one
    "defaults_big_3000": {**DEFAULTS, **BIG_3000},
    "defaults_big_3000_seed1": {**DEFAULTS, **BIG_3000, "seed": 1},
    "medium_defaults": {**DEFAULTS, **MEDIUM},
    "medium_defaults_3000": {**DEFAULTS, "train.steps": 3000, **MEDIUM},
    "medium_defaults_big_3000": {**DEFAULTS, **BIG_3000, **MEDIUM},
    "medium_defaults_big_3000_seed1": {**DEFAULTS, **BIG_3000, **MEDIUM, "seed": 1},
    "medium_big_3000_nounk": {**CMN, **VTLP, **BIG_3000, **MEDIUM, **NO_UNKNOWN},
    "medium_big_3000_nounk_seed1": {**CMN, **VTLP, **BIG_3000, **MEDIUM, **NO_UNKNOWN, "seed": 1},
    "medium_nounk": {**CMN, **VTLP, **MEDIUM, **NO_UNKNOWN},
    # Festival's voices join espeak-ng in train and test (its packages must be installed)
    "festival": {"dataset": FESTIVAL},
    "festival_nounk": {"dataset": FESTIVAL, **NO_UNKNOWN},
    "festival_cmn_vtlp_uw01": {"dataset": FESTIVAL, **CMN, **VTLP, "loss.unknown_weight": 0.1},
    "festival_cmn_vtlp_nounk": {"dataset": FESTIVAL, **CMN, **VTLP, **NO_UNKNOWN},
}


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    check_preset(preset)
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.cskws = cskws.get_config(preset)
    config.cskws.models = "afkws"
    # The levers start from the preset as it was before they were chosen: no input
    # normalisation, no VTLP, the unknown class at full weight.
    config.cskws.model.normalise = "none"
    config.cskws.augment.vtlp = (1.0, 1.0)
    config.cskws.loss.unknown_weight = 1.0
    config.cskws.evals.heldout.split = "heldout[:50%]"  # the development half
    config.levers = ",".join(CATALOGUE)
    return config
