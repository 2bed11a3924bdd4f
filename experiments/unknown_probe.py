r"""What AF-KWS's classes say at the true keywords: per keyword occurrence, the peak
probability of its own class, of the best other keyword and of the unknown class within
`radius` output frames of its centre; on each split asked for.

    python -m experiments.unknown_probe outputs/reproduce/cskws/afkws/bundle \
        --dataset=synthetic_kws/quick --splits=test,heldout \
        --data_dir=outputs/tensorflow_datasets

Prints one JSON object per split: the keywords probed, the median own-class peak and the
share above 0.3, the share where another keyword peaks higher, the median unknown-class
peak and the share where it beats the own class (null without an unknown class), and the
shares of all valid output frames where the unknown class or any keyword exceeds 0.3.
"""

from __future__ import annotations

import argparse
import json

import jax
import numpy as np

THRESHOLD = 0.3


def keyword_peaks(probs, mask, events, *, num_keywords: int, hop_s: float, radius: int = 2):
    """probs float [B, To, C] class probabilities (C = num_keywords + 1 with the unknown
    class), mask bool [B, To], events {start, end (s), label, valid} [B, G] -> {"own",
    "other", "unknown"}: float [n] peaks over each valid keyword's window of centre +-
    `radius` frames ("unknown" NaN without an unknown class)."""
    probs, mask = np.asarray(probs), np.asarray(mask)
    own, other, unknown = [], [], []
    for b in range(probs.shape[0]):
        length = int(mask[b].sum())
        for start, end, label, valid in zip(
            *(np.asarray(events[k])[b] for k in ("start", "end", "label", "valid")), strict=True
        ):
            centre = int((start + end) / 2 / hop_s)
            if not valid or not 0 <= centre < length:
                continue
            window = probs[b, max(centre - radius, 0) : min(centre + radius + 1, length)]
            keywords = window[:, :num_keywords]
            own.append(keywords[:, label].max())
            other.append(np.delete(keywords, label, axis=1).max())
            has_unknown = probs.shape[-1] > num_keywords
            unknown.append(window[:, num_keywords].max() if has_unknown else np.nan)
    return {
        k: np.array(v, np.float64)
        for k, v in (("own", own), ("other", other), ("unknown", unknown))
    }


def summary(peaks: dict, frame_shares: dict) -> dict:
    """The printed figures of one split from `keyword_peaks` and the frame shares."""
    own, unknown = peaks["own"], peaks["unknown"]
    has_unknown = bool(np.isfinite(unknown).any())
    return {
        "keywords": int(own.size),
        "own_median": float(np.median(own)),
        "own_above": float(np.mean(own > THRESHOLD)),
        "other_keyword_higher": float(np.mean(peaks["other"] > own)),
        "unknown_median": float(np.median(unknown)) if has_unknown else None,
        "unknown_higher": float(np.mean(unknown > own)) if has_unknown else None,
        **frame_shares,
    }


def probe(bundle_dir: str, source, batch_size: int = 16) -> dict:
    """`summary` of a bundle's model on every utterance of `source`."""
    from cskws_jax import bundle, model
    from experiments.scoring import keywords as scoring

    net, params, _ = bundle.load(bundle_dir)
    num_keywords = net.config.num_keywords
    hop_s = model.streaming_spec(net.config).output_hop_s

    @jax.jit
    def heads(batch):
        mask = batch["audio_mask"] & batch["example_mask"][:, None]
        out, out_mask = net.apply(params, {"audio": batch["audio"]}, {"audio": mask})
        return jax.nn.sigmoid(out["heatmap"]), out_mask

    parts, frames, unknown_frames, keyword_frames = [], 0, 0, 0
    for batch in scoring.evaluation_batches(
        source, num_keywords=num_keywords, batch_size=batch_size
    ):
        probs, mask = (np.asarray(a) for a in heads(batch))
        events = {k: batch[k] for k in ("start", "end", "label")}
        events["valid"] = np.asarray(batch["valid"]) & np.asarray(batch["example_mask"])[:, None]
        parts.append(keyword_peaks(probs, mask, events, num_keywords=num_keywords, hop_s=hop_s))
        frames += int(mask.sum())
        keyword_frames += int(((probs[..., :num_keywords].max(-1) > THRESHOLD) & mask).sum())
        if probs.shape[-1] > num_keywords:
            unknown_frames += int(((probs[..., num_keywords] > THRESHOLD) & mask).sum())
    peaks = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    shares = {
        "unknown_frames_above": unknown_frames / max(frames, 1),
        "keyword_frames_above": keyword_frames / max(frames, 1),
    }
    return summary(peaks, shares)


def main(argv=None) -> int:
    from speechkit import prepared

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", help="an AF-KWS bundle folder")
    parser.add_argument("--dataset", default="synthetic_kws/quick")
    parser.add_argument(
        "--splits", default="test,heldout", help="comma-separated (TFDS slices too)"
    )
    parser.add_argument("--data_dir", default=None)
    args = parser.parse_args(argv)
    found = {}
    for split in (s.strip() for s in args.splits.split(",") if s.strip()):
        source = prepared.data_source(args.dataset, split=split, data_dir=args.data_dir)
        found[split] = probe(args.bundle, source)
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
