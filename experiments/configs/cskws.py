r"""CS-KWS: AF-KWS, AF-KWS without the unknown class, and the sliding-window classifier.

Run (any field can be overridden, e.g. --config.train.steps=500):

    python -m experiments.cskws --config=experiments/configs/cskws.py:quick \
        --workdir=/tmp/cskws
    python -m experiments.cskws --config=experiments/configs/cskws.py:quick \
        --workdir=/tmp/libritop20 --config.dataset=libritop20/top20 \
        --config.data_dir=/data/tfds

Presets: smoke (the whole pipeline in under a minute, for tests), quick (the main job),
full (accelerator scale).
"""

import ml_collections

from experiments.common import check_preset


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    check_preset(preset)
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.dataset = f"synthetic_kws/{preset}"  # or libritop20/<config> (built by you)
    config.data_dir = ""  # default: ~/tensorflow_datasets
    config.build_missing = True  # build synthetic_kws/<size> if absent
    config.models = "afkws,afkws_no_unknown,sliding_window"  # comma-separated
    config.seed = 0

    config.model = ml_collections.ConfigDict()
    config.model.stem_channels = 64
    config.model.stage_channels = (64, 96, 128, 128)
    config.model.stage_strides = (2, 2, 1, 1)
    config.model.stage_blocks = (1, 2, 2, 1)
    config.model.stage_dilations = (1, 1, 2, 4)
    config.model.head_channels = 64
    config.model.delay = 8  # output frames of look-ahead (40 ms each)
    # "highest" (exact float32: streamed == offline on GPU/TPU) or "high" / "default"
    # (TF32 / bfloat16 matmuls: faster accelerator training; see AfKwsConfig.precision).
    config.model.precision = "highest"

    config.window = ml_collections.ConfigDict()
    config.window.window_s = 0.8
    config.window.hop_s = 0.1

    config.train = ml_collections.ConfigDict()
    config.train.steps = {"smoke": 40, "quick": 1500, "full": 50_000}[preset]
    config.train.batch_size = {"smoke": 4, "quick": 16, "full": 64}[preset]
    config.train.crop_s = 4.0
    config.train.learning_rate = 3e-3
    config.train.warmup_steps = {"smoke": 5, "quick": 100, "full": 1000}[preset]
    config.train.log_every = {"smoke": 10, "quick": 100, "full": 500}[preset]
    config.train.checkpoint_every = {"smoke": 20, "quick": 500, "full": 5000}[preset]
    config.train.keep_checkpoints = 2

    config.eval = ml_collections.ConfigDict()
    config.eval.batch_size = 16
    config.eval.max_detections = 64
    config.eval.min_score = 0.05
    if preset in ("smoke", "quick"):  # CPU-sized detector
        config.model.stem_channels = 32
        config.model.stage_channels = (32, 48, 64, 64)
        config.model.stage_blocks = (1, 1, 1, 1)
        config.model.head_channels = 32
        config.model.delay = 6
    return config
