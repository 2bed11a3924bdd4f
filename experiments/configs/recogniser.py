r"""The streaming character CTC recogniser: trained on `recogniser_speech`, scored on calls.

Run (any field can be overridden, e.g. --config.train.steps=500):

    python -m experiments.recogniser --config=experiments/configs/recogniser.py:quick \
        --workdir=/tmp/recogniser --config.data_dir=DIR

Presets: smoke (the whole pipeline in about a minute, for tests), quick (this machine's
recogniser), full (accelerator scale). The sections (`model`, `masks`, `optimizer`,
`pipeline`, `evals`, `beam`, `word_lm`, `score_bundle`) and what they build:
docs/experiments.md#recogniser-runner.
"""

import ml_collections

from ctc_jax import beam, input_pipeline, model
from experiments.common import check_preset
from experiments.configs import section
from speechkit import augment, lm, optim


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    check_preset(preset)
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.dataset = f"recogniser_speech/{preset}"
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.build_missing = True  # build recogniser_speech/<size> if absent
    config.seed = 0
    config.score_bundle = ""  # a trained bundle: score it, no training

    calls = f"synthetic_calls/questions-{preset}"
    config.evals = ml_collections.ConfigDict()
    config.evals.calls = ml_collections.ConfigDict(
        {"split": "train", "dataset": calls, "optional": True}
    )
    config.evals.heldout_calls = ml_collections.ConfigDict(
        {"split": "heldout", "dataset": calls, "optional": True}
    )

    config.model = section(model.CtcConfig)
    if preset == "full":
        config.model = section(
            model.CtcConfig,
            channels=model.FULL.channels,
            kernels=model.FULL.kernels,
            dilations=model.FULL.dilations,
        )
    if preset == "smoke":
        config.model.channels = 32
        config.model.kernels = (3, 3, 3)
        config.model.dilations = (1, 2, 4)
    config.masks = section(
        augment.MaskConfig, freq_masks=2, max_freq_width=6, time_masks=2, max_time_width=20
    )
    config.optimizer = section(
        optim.OptimizerConfig,
        leave_out=("total_steps",),
        learning_rate=2e-3,
        warmup_steps={"smoke": 5, "quick": 300, "full": 2000}[preset],
    )
    config.pipeline = section(input_pipeline.PipelineConfig, leave_out=("batch_size", "num_epochs"))
    if preset == "smoke":  # one length bucket: one compiled train step
        config.pipeline.pad_multiple = 1400

    config.train = ml_collections.ConfigDict()
    config.train.steps = {"smoke": 30, "quick": 3000, "full": 100_000}[preset]
    config.train.batch_size = {"smoke": 4, "quick": 16, "full": 64}[preset]
    config.train.log_every = {"smoke": 10, "quick": 100, "full": 500}[preset]
    config.train.checkpoint_every = {"smoke": 15, "quick": 250, "full": 5000}[preset]
    config.train.keep_checkpoints = 2

    config.eval = ml_collections.ConfigDict()
    config.eval.batch_size = 8
    config.eval.rtf_seconds = 30.0  # audio streamed in 100 ms blocks to time the step

    config.beam = section(beam.BeamConfig)
    config.word_lm = ml_collections.ConfigDict(
        {"order": 3, "discount": 0.5, "unknown_log10": lm.UNKNOWN_LOG10}
    )
    return config
