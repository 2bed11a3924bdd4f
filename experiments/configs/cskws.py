r"""CS-KWS: AF-KWS, AF-KWS without the unknown class, and the sliding-window classifier.

Run (any field can be overridden, e.g. --config.train.steps=500):

    python -m experiments.cskws --config=experiments/configs/cskws.py:quick \
        --workdir=/tmp/cskws
    python -m experiments.cskws --config=experiments/configs/cskws.py:quick \
        --workdir=/tmp/libritop20 --config.dataset=libritop20/top20 \
        --config.data_dir=/data/tfds

Presets: smoke (the whole pipeline in under a minute, for tests), quick (the main job),
full (accelerator scale). The sections and the dataclasses they build:
docs/experiments.md#cs-kws-runner.
"""

import ml_collections

from cskws_jax import baselines, losses, model, train
from experiments.common import check_preset
from experiments.configs import section
from speechkit import optim


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    check_preset(preset)
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.dataset = f"synthetic_kws/{preset}"  # or libritop20/<config> (built by you)
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.build_missing = True  # build synthetic_kws/<size> if absent
    # Only the records these engines spoke train and test (comma-separated; "": all), as
    # the leave-one-engine-out matrix trains on a corpus all engines speak
    config.engines = ""
    config.models = "afkws,afkws_no_unknown,sliding_window"  # comma-separated
    config.seed = 0
    # A trained AF-KWS bundle folder the AF-KWS models start from ("" = from scratch):
    # its layers, and its class columns of the keywords both have (experiments.cskws.
    # warm_start); config.model must match its architecture.
    config.init = ""

    # What every trained model is also scored on (`experiments.scoring.evals`): name -> a split of
    # a corpus ("" = this run's). "heldout": the split spoken only by a synthesiser never
    # heard in training (skipped where the corpus has none).
    config.evals = ml_collections.ConfigDict()
    config.evals.heldout = ml_collections.ConfigDict(
        {"split": "heldout", "dataset": "", "optional": True}
    )

    # The dataclass sections hold every field at its dataclass's default (stated there
    # only, `experiments.configs.section`) unless set here. The model's `delay` is its
    # look-ahead in 40 ms output frames; `precision` "highest" (exact float32: streamed ==
    # offline on GPU/TPU) or "high" / "default" (TF32 / bfloat16: faster accelerator
    # training; see AfKwsConfig.precision).
    #
    # The input normalisation, VTLP and the unknown class's weight below were chosen on the
    # first half of the held-out engine's split (docs/experiments.md#af-kws-on-
    # synthesisers-it-never-heard; experiments.kws_levers): causal per-band mean
    # normalisation ("cmn") and VTLP factors 0.9-1.1 lift in-engine and held-out mAP, and
    # the unknown class costs held-out mAP less at a tenth of the weight.
    config.model = section(
        model.AfKwsConfig,
        leave_out=("num_keywords", "unknown_class", "features"),
        normalise="cmn",
    )
    # SpecAugment-style masks (AugmentConfig: bands of up to 8 of the 64 mel bins, runs of
    # up to 0.2 s) are off: at the quick preset two of each cost AF-KWS in-engine and
    # held-out mAP (rechecked with the fixed noise level, lever "masks" of
    # experiments.kws_levers: 0.375 -> 0.277 in-engine, 0.104 -> 0.080 on the development
    # half); e.g. --config.augment.freq_masks=2 --config.augment.time_masks=2 turns them on.
    config.augment = section(train.AugmentConfig, vtlp=(0.9, 1.1))
    config.loss = section(losses.LossConfig, unknown_weight=0.1)
    config.decode = section(train.PeakDecodingConfig, leave_out=("operating_points",))
    config.optimizer = section(  # AF-KWS's rate; total_steps = train.steps
        optim.OptimizerConfig,
        leave_out=("total_steps",),
        learning_rate=3e-3,
        warmup_steps={"smoke": 5, "quick": 100, "full": 1000}[preset],
    )
    config.window = section(baselines.WindowConfig)

    config.train = ml_collections.ConfigDict()
    config.train.steps = {"smoke": 40, "quick": 1500, "full": 50_000}[preset]
    config.train.batch_size = {"smoke": 4, "quick": 16, "full": 64}[preset]
    config.train.crop_s = 4.0
    config.train.fraction = 1.0  # share of the training utterances used (a study)
    config.train.log_every = {"smoke": 10, "quick": 100, "full": 500}[preset]
    config.train.checkpoint_every = {"smoke": 20, "quick": 500, "full": 5000}[preset]
    config.train.keep_checkpoints = 2

    config.eval = ml_collections.ConfigDict()
    config.eval.batch_size = 16
    # False-alarm budgets (per hour, all keywords together) of the operating points each
    # model gets from its test detections (cskws_jax.operating_points: an equal share
    # per keyword), stored in the AF-KWS bundles for `cskws_jax.detect --fa-per-hour`.
    config.eval.fa_budgets = (1.0, 5.0, 25.0)
    # The evaluation of config.evals to choose them on instead of the test split ("": the
    # test split; e.g. a development slice, experiments/configs/shipped.py).
    config.eval.choose_on = ""
    # The evaluation whose measures of the chosen thresholds the bundle stores with them
    # (cskws_jax.config.Measured; detect reports them): "" for none, e.g. "final".
    config.eval.measure_on = ""
    # Resamples of the test utterances behind the 95 % intervals of mAP, AP@0.05, FRR@5
    # and FRR@25 (experiments.scoring.evaluators.detection.bootstrap_intervals; about 10 s per
    # model at the quick size on CPU, mostly compilation).
    config.eval.bootstrap_resamples = {"smoke": 20, "quick": 200, "full": 200}[preset]
    if preset in ("smoke", "quick"):  # CPU-sized detector
        config.model.stem_channels = 32
        config.model.stages = ((32, 2, 1, 1), (48, 2, 1, 1), (64, 1, 1, 2), (64, 1, 1, 4))
        config.model.head_channels = 32
        config.model.delay = 6
    return config
