"""AF-KWS decoding: heads -> padded detections (the detection format of
`metrics.detection_scores`). Pure jnp, jittable.

A detection is a local maximum of a keyword's centre probability (sigmoid of the
heatmap logits) over a window of 2 * `radius` + 1 frames (1-D max-pool suppression;
ties: every frame equal to the window's maximum is a peak), with probability >=
`min_score`. Its centre is (frame + offset) * hop_s seconds and its extent centre +/-
length * hop_s / 2. The unknown class never becomes a detection. The `max_detections`
best peaks per example are kept (ties: lower frame, then lower class, first), padded with
`valid` False.

`peaks` is the per-frame part; `cskws_jax.streaming.StreamDetector` applies the same
rule frame by frame as heads arrive, and its collected decisions
(`cskws_jax.streaming.collect`) equal `decode` on the same audio.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def peaks(probability, mask, *, num_keywords: int, radius: int = 1, min_score: float = 0.1):
    """bool [B, T, num_keywords]: keyword peaks. probability float [B, T, C]; mask bool
    [B, T] (masked frames are never peaks and never suppress)."""
    keyword = jnp.where(mask[..., None], probability[..., :num_keywords], -jnp.inf)
    window_max = jax.lax.reduce_window(
        keyword, -jnp.inf, jax.lax.max, (1, 2 * radius + 1, 1), (1, 1, 1), "SAME"
    )
    return (keyword >= window_max) & (keyword >= min_score) & mask[..., None]


def positions(outputs, hop_s: float) -> tuple[jax.Array, jax.Array]:
    """(start, end) float32 [B, T] seconds of the keyword each output frame would place:
    centre (frame + offset) * hop_s, extent centre -/+ length * hop_s / 2."""
    frames = jnp.arange(outputs["offset"].shape[1], dtype=jnp.float32)
    centre = (frames + outputs["offset"]) * hop_s
    half = outputs["length"] * hop_s / 2
    return centre - half, centre + half


def best_peaks(is_peak, score, fields: dict, max_detections: int):
    """The `max_detections` best peaks per example, padded. is_peak bool [B, P, K], score
    float [B, P, K], fields: name -> float [B, P] per-position values (at least "start"
    and "end"). Order: score descending, then position, then class (a stable sort, so
    the same on every backend). Returns (detections, the other fields [B, D]); invalid
    slots hold zeros."""
    batch, positions, keywords = is_peak.shape
    scores = jnp.where(is_peak, score, -1.0).reshape(batch, -1)
    order = jnp.broadcast_to(jnp.arange(positions * keywords), scores.shape)
    _, flat = jax.lax.sort((-scores, order), dimension=1, num_keys=2)
    flat = flat[:, :max_detections]
    best = jnp.take_along_axis(scores, flat, axis=1)
    valid = jnp.take_along_axis(is_peak.reshape(batch, -1), flat, axis=1)
    position, label = flat // keywords, flat % keywords
    gathered = {k: jnp.take_along_axis(v, position, axis=1) for k, v in fields.items()}
    gathered = {k: jnp.where(valid, v, 0.0) for k, v in gathered.items()}
    detections = {
        "start": gathered.pop("start"),
        "end": gathered.pop("end"),
        "score": jnp.where(valid, best, 0.0),
        "label": jnp.where(valid, label, 0).astype(jnp.int32),
        "valid": valid,
    }
    pad = max_detections - flat.shape[1]
    if pad:
        detections = {
            k: jnp.pad(v, ((0, 0), (0, pad)), constant_values=False if k == "valid" else 0)
            for k, v in detections.items()
        }
        gathered = {k: jnp.pad(v, ((0, 0), (0, pad))) for k, v in gathered.items()}
    return detections, gathered


def decode(
    heads,
    mask,
    *,
    num_keywords: int,
    hop_s: float,
    max_detections: int = 64,
    radius: int = 1,
    min_score: float = 0.1,
):
    """Model heads (heatmap logits [B, T, C], length and offset [B, T]) and their mask
    bool [B, T] -> detections {start, end, score float32 [B, D]; label int32 [B, D];
    valid bool [B, D]} with D = max_detections (seconds; see the module docstring)."""
    probability = jax.nn.sigmoid(heads["heatmap"])
    is_peak = peaks(
        probability, mask, num_keywords=num_keywords, radius=radius, min_score=min_score
    )
    start, end = positions(heads, hop_s)
    detections, _ = best_peaks(
        is_peak, probability[..., :num_keywords], {"start": start, "end": end}, max_detections
    )
    return detections
