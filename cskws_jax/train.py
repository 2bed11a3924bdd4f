"""AF-KWS training and detection pieces, as pure functions.

    net = model.AfKws(model.AfKwsConfig(num_keywords=20))
    state = create_train_state(net, OptimizerConfig(), jax.random.key(0), batch)
    step = jax.jit(functools.partial(train_step, net, AugmentConfig()))
    state, stats = step(state, batch, jax.random.key(1))     # stats: loss and its parts
    detect_batch = jax.jit(functools.partial(detect, net, state.params))
    found = detect_batch(test_batch)         # the detection format of metrics.detection_scores
    truth = ground_truth(test_batch)

Training batches are `cskws_jax.input_pipeline` crops (keywords 0..K-1 and the unknown
class K); evaluation batches are whole utterances without the unknown class
(`input_pipeline.PipelineConfig(unknown_class=False)`);
`experiments.scoring.evaluators.detection` scores a whole test set. Augmentation
(`AugmentConfig`, on the log-mel features): docs/models.md#af-kws.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from cskws_jax import decode, losses, model, targets
from cskws_jax.config import OperatingPoint, PeakDecodingConfig  # noqa: F401 (train's names)
from cskws_jax.datasets.features import FEATURES
from speechkit import augment as augment_lib
from speechkit import checks
from speechkit.optim import OptimizerConfig, TrainState


@dataclasses.dataclass(frozen=True)
class AugmentConfig:
    """Feature-level augmentation of every training crop: gain, a speaker's vocal tract
    (VTLP: frequencies x a factor drawn from `vtlp`; (1, 1): none), a random equaliser
    (a smooth curve within +-`eq_db`; 0: none), noise at an SNR, then SpecAugment-style
    masks (bands of mel bins and runs of frames set to the crop's mean log-mel; 0 masks:
    none). `speechkit.augment` has the parts."""

    gain_db: tuple[float, float] = (-6.0, 6.0)
    vtlp: tuple[float, float] = (1.0, 1.0)
    eq_db: float = 0.0
    noise_probability: float = 0.5
    snr_db: tuple[float, float] = (5.0, 30.0)
    freq_masks: int = 0  # masked bands per crop
    max_freq_width: int = 8  # mel bins, each band's width drawn from [0, this]
    time_masks: int = 0  # masked runs per crop
    max_time_width: int = 20  # frames (10 ms), each run's width drawn from [0, this]

    def __post_init__(self):
        self.masks  # noqa: B018 - checks the mask fields
        checks.require_interval("AugmentConfig.gain_db", self.gain_db)
        checks.require_interval("AugmentConfig.snr_db", self.snr_db)
        checks.require_interval("AugmentConfig.vtlp", self.vtlp)
        checks.require_number("AugmentConfig.vtlp[0]", self.vtlp[0], above=0)
        checks.require_number("AugmentConfig.eq_db", self.eq_db, at_least=0)
        checks.require_number(
            "AugmentConfig.noise_probability", self.noise_probability, at_least=0, at_most=1
        )

    @property
    def masks(self) -> augment_lib.MaskConfig:
        return augment_lib.MaskConfig(
            self.freq_masks, self.max_freq_width, self.time_masks, self.max_time_width
        )


def augment(features, mask, rng, config: AugmentConfig):
    """features float [B, T, F] log-mel, mask bool [B, T] -> augmented features."""
    batch = features.shape[0]
    gain_key, noise_key, snr_key, pick_key = jax.random.split(rng, 4)
    gain_db = jax.random.uniform(
        gain_key, (batch, 1, 1), minval=config.gain_db[0], maxval=config.gain_db[1]
    )
    features = features + gain_db * jnp.log(10.0) / 10  # energy x 10^(dB / 10)
    # The speaker and equaliser draw from keys of their own, so configs without them keep
    # their numbers.
    if tuple(config.vtlp) != (1.0, 1.0):
        warp = jax.random.uniform(
            jax.random.fold_in(rng, 2), (batch,), minval=config.vtlp[0], maxval=config.vtlp[1]
        )
        features = augment_lib.warp_mel_bands(features, warp, FEATURES)
    if config.eq_db:
        features = augment_lib.random_eq(features, jax.random.fold_in(rng, 3), config.eq_db)
    snr_db = jax.random.uniform(
        snr_key, (batch, 1, 1), minval=config.snr_db[0], maxval=config.snr_db[1]
    )
    noisy = augment_lib.mix_noise(features, mask, noise_key, snr_db)
    use_noise = jax.random.uniform(pick_key, (batch, 1, 1)) < config.noise_probability
    features = jnp.where(use_noise, noisy, features)
    # Masks draw from a key of their own, so configs without them keep their numbers.
    features = augment_lib.spec_augment(features, mask, jax.random.fold_in(rng, 1), config.masks)
    return jnp.where(mask[..., None], features, 0.0)


def create_train_state(net, config: OptimizerConfig, rng, batch) -> TrainState:
    return TrainState.create(net.init(rng, {"audio": batch["audio"][:1]}), config)


def _targets(net, batch, num_frames: int):
    return targets.batch_targets(
        batch,
        num_frames=num_frames,
        num_classes=net.config.num_classes,
        hop_s=model.streaming_spec(net.config).output_hop_s,
    )


def train_step(
    net,
    augment_config: AugmentConfig | None,
    state: TrainState,
    batch,
    rng,
    loss_config: losses.LossConfig | None = None,
):
    """One optimiser step -> (new state, {"loss", "heatmap", "length", "offset"})."""
    mask = batch["audio_mask"] & batch["example_mask"][:, None]
    features = batch["audio"]
    if augment_config is not None:
        features = augment(features, mask, rng, augment_config)

    def loss_fn(params):
        heads, out_mask = net.apply(params, {"audio": features}, {"audio": mask})
        total, parts = losses.detection_loss(
            heads,
            out_mask,
            _targets(net, batch, out_mask.shape[1]),
            loss_config or losses.LossConfig(),
            net.config.num_keywords,
        )
        return total, parts

    (loss, parts), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    return state.apply_gradients(grads), {"loss": loss, **parts}


def detect(net, params, batch, config: PeakDecodingConfig = PeakDecodingConfig()):
    """Detections (the format of `metrics.detection_scores`) for a batch of whole
    utterances."""
    mask = batch["audio_mask"] & batch["example_mask"][:, None]
    heads, out_mask = net.apply(params, {"audio": batch["audio"]}, {"audio": mask})
    return decode.decode(
        heads,
        out_mask,
        num_keywords=net.config.num_keywords,
        hop_s=model.streaming_spec(net.config).output_hop_s,
        max_detections=config.max_detections,
        radius=config.radius,
        min_score=config.min_score,
    )


def ground_truth(batch) -> dict[str, np.ndarray]:
    """The keyword events of an evaluation batch (filler rows invalid)."""
    return {
        "start": np.asarray(batch["start"]),
        "end": np.asarray(batch["end"]),
        "label": np.asarray(batch["label"]),
        "valid": np.asarray(batch["valid"]) & np.asarray(batch["example_mask"])[:, None],
    }
