r"""MultiQT 5-fold cross-validation: multimodal, audio-only and text-only MultiQT and the
paper's random-forest and feed-forward baselines.

Run (any field can be overridden, e.g. --config.num_folds=3 --config.train.steps=50):

    python -m experiments.multiqt --config=experiments/configs/multiqt.py:quick \
        --workdir=/tmp/multiqt
    python -m experiments.multiqt --config=experiments/configs/multiqt.py:quick \
        --workdir=/tmp/multiqt-offline --config.text_stream=offline \
        --config.models=multimodal,text        # reference: text at its recognised times

Presets: smoke (the whole pipeline in under a minute, for tests), quick (the main job),
full (accelerator scale). The sections and the dataclasses they build:
docs/experiments.md#configs.
"""

import ml_collections

from experiments.common import check_preset
from experiments.configs import section
from multiqt_jax import baselines, decode, model
from speechkit import augment, optim


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
    check_preset(preset)
    config = ml_collections.ConfigDict()
    config.preset = preset
    config.task = "questions"  # or "symptoms"
    config.size = {"smoke": "smoke", "quick": "quick", "full": "full"}[preset]
    config.data_dir = ""  # default: ~/tensorflow_datasets
    # Synthesisers of the corpus (speechkit.tts.ENGINE_SETS): "pip" (espeak-ng and Piper)
    # or "festival" (Festival joins for training; corpus synthetic_calls/<task>-<size>-festival)
    config.engine_set = "pip"
    # How far the corpus's speech varies (speechkit.tts.VARIATIONS): "plain", "speakers"
    # (the speaker stage) or "varied" (and varied scripts); corpus ...-<variation>
    config.variation = "plain"
    # Only the calls these engines spoke train and are scored (comma-separated; "": all)
    config.engines = ""
    config.build_missing = True  # build synthetic_calls/<task>-<size> if absent
    config.num_folds = 5
    config.folds = ""  # the folds trained and scored, e.g. "0"; "": all of num_folds
    config.seed = 0
    config.models = "multimodal,audio,text,rf,fnn"  # comma-separated, run in this order
    # The models' text input: "causal" (each word from the time the streaming recogniser
    # emitted it) or "offline" (at its recognised times; a non-causal reference row).
    config.text_stream = "causal"
    # The studies' alterations of the text (multiqt_jax.input_pipeline.TextOptions): the
    # words ("recognised", or "spoken": the true transcript at its true times), their
    # emission lag (s, causal only) and a share of them replaced by other words.
    config.text_words = "recognised"
    # Another recogniser's words instead of the corpus's (recognised words only): a name
    # of multiqt_jax.datasets.render.RECOGNISER_VARIANTS, or "ctc": the causal character
    # recogniser of ctc_jax, the bundle folder `ctc_bundle`, or "ctc_posteriors":
    # its 20 ms character posteriors (the paper's input); "" is the corpus's own.
    config.text_recogniser = ""
    # The recogniser of text_recogniser="ctc*": a bundle folder, or "" for the shipped one
    # (ctc_jax.bundle.SHIPPED; a workdir's recorded config then holds no path).
    config.ctc_bundle = ""
    config.text_lag_s = 0.0
    config.text_substitution_rate = 0.0
    config.train_fraction = 1.0  # share of each fold's training calls (a study)
    config.num_devices = 0  # 0: all
    # How a device runs its folds (experiments.folds.FORMS): "sequential", "vmap", "unroll",
    # "scan"; auto: sequential on CPU, vmap elsewhere.
    config.fold_form = "auto"

    # What every trained model is also scored on (`experiments.scoring.evals`): name -> a split of
    # a corpus ("" = this run's). "heldout": the split spoken only by a synthesiser never
    # heard in training (skipped where the corpus has none).
    config.evals = ml_collections.ConfigDict()
    config.evals.heldout = ml_collections.ConfigDict(
        {"split": "heldout", "dataset": "", "optional": True}
    )

    # The dataclass sections hold every field at its dataclass's default (stated there
    # only, `experiments.configs.section`) unless set here. MultiQTConfig's num_classes and
    # modalities are set by the runner from the task and the model name, its
    # modality_dropout for the multimodal model only; `precision` "highest" (exact float32:
    # streamed == offline on GPU/TPU) or "high" / "default" (TF32 / bfloat16: faster
    # accelerator training; see MultiQTConfig.precision).
    config.model = section(
        model.MultiQTConfig,
        leave_out=("num_classes", "modalities", "audio_features", "text_symbols"),
    )

    # SpecAugment-style masks on the audio features in training (speechkit.augment.MaskConfig,
    # off by default): bands of up to 6 of the 40 mel bins, runs of up to 20 frames (0.2
    # s). On questions-quick they trade in-engine for held-out-engine TIMESTEP F1
    # (multimodal 0.646 -> 0.567 and 0.323 -> 0.363); 0 masks turn them off.
    config.augment = section(augment.MaskConfig, freq_masks=2, max_freq_width=6, time_masks=2)

    config.optimizer = section(  # MultiQT's rate; total_steps = train.steps
        optim.OptimizerConfig,
        leave_out=("total_steps",),
        learning_rate=2e-3,
        warmup_steps={"smoke": 5, "quick": 30, "full": 500}[preset],
    )

    config.train = ml_collections.ConfigDict()
    config.train.steps = {"smoke": 30, "quick": 300, "full": 20_000}[preset]
    config.train.batch_size = {"smoke": 2, "quick": 4, "full": 32}[preset]
    config.train.class_weight_power = 0.5  # 0: unweighted cross-entropy
    config.train.pad_multiple = 500  # frames; bounds the number of compiled shapes
    config.train.log_every = {"smoke": 10, "quick": 50, "full": 200}[preset]
    config.train.checkpoint_every = {"smoke": 10, "quick": 100, "full": 2000}[preset]
    config.train.keep_checkpoints = 2
    # (low, high) dB: feature-domain noise in every training call's audio (a study's
    # noise-matched training, speechkit.augment.mix_noise); (): off.
    config.train.noise_snr_db = ()

    # Every model is also scored after this causal minimum-duration rule on its labels:
    # a class must hold min_frames 40 ms frames before the output switches to it; every
    # switch shows up (min_frames - 1) * 40 ms late. 1: off (smoothed = raw).
    # (SmoothingConfig.min_frames; the runner smooths labels, so no probability thresholds)
    config.smoothing = section(decode.SmoothingConfig, leave_out=("background", "enter", "exit"))

    config.baselines = section(  # -> BaselineConfig (seed = config.seed)
        baselines.BaselineConfig,
        leave_out=("seed",),
        n_estimators={"smoke": 10, "quick": 100, "full": 300}[preset],
        epochs={"smoke": 20, "quick": 100, "full": 200}[preset],
    )
    if preset == "quick":  # CPU-sized: ~0.4 s per 5-fold step on 2 cores
        config.model.audio_channels = (32, 32, 64, 64, 64)
        config.model.text_channels = (32, 64, 64, 64)
        config.model.dense = (64,)
    if preset == "smoke":
        config.model.audio_channels = (16, 16, 16, 16, 16)
        config.model.text_channels = (16, 16, 16, 16)
        config.model.dense = (32,)
    return config
