"""An export folder streamed by both backends on one CPU core: jax (the StableHLO step,
compiled by XLA, and jax's log-mel front end) against onnx (the ONNX front end and step
in onnxruntime, one thread).

    python -m benchmarks.export_backends --json benchmarks/results/export_backends.json

The process pins itself to one core before jax starts. For each model (default configs,
random weights: speed does not depend on the values; AF-KWS runs its detector, the step
and peak decoding, as `cskws_jax.detect` does; MultiQT reads audio and text), it saves a
bundle, exports it (`python -m <task>.export`, 200 ms blocks) and streams `--seconds` of
audio through what `cskws_jax.detect` / `multiqt_jax.track` run for each backend, block
by block: the front end on the block's samples, then the step. It reports per backend
the real-time factor (compute seconds per second of audio), per-block latency (median,
p99; after two warm-up blocks), max |onnx - jax| of the step's outputs over the stream,
and the size of each module file.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import common

BLOCK_OUTPUTS = 5  # x 40 ms = 200 ms, the command lines' default block
_log = common.logger("export_backends")


def _audio(seconds: float, rng) -> np.ndarray:
    samples = int(seconds * 16000)
    tone = np.sin(2 * np.pi * 220 * np.arange(samples) / 16000)
    return (0.1 * rng.normal(size=samples) + 0.2 * tone).astype(np.float32)


def _summary(times: list[float], audio_s: float, block_s: float) -> dict:
    kept = np.asarray(times[2:])  # after two warm-up blocks
    return {
        "rtf": float(kept.sum() / (block_s * len(kept))),
        "block_ms_median": float(np.median(kept) * 1000),
        "block_ms_p99": float(np.percentile(kept, 99) * 1000),
        "blocks": len(kept),
        "audio_seconds": audio_s,
    }


def _max_difference(a, b) -> float:
    import jax

    pairs = zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    return max(
        float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
        for x, y in pairs
    )


def _sizes(folder: Path) -> dict:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.suffix != ".json"}


def bench_afkws(root: Path, seconds: float, rng) -> dict:
    """Front end plus detector (step and peak decoding), both backends, one stream."""
    import jax

    from cskws_jax import bundle, detect, export, model
    from speechkit import frontend

    net = model.AfKws(model.AfKwsConfig(num_keywords=20))
    params = net.init(jax.random.key(0), {"audio": np.zeros((1, 20, 64), np.float32)})
    bundle.save(root / "afkws", net, params, tuple(f"kw{i}" for i in range(20)))
    export.main([str(root / "afkws"), str(root / "afkws-export")])
    audio = _audio(seconds, rng)
    found, times = {}, {}
    for backend in ("jax", "onnx"):
        detector, info = detect.load(root / "afkws-export", None, None, backend)
        samples = detector.block_frames["audio"] * info.features.hop_samples
        if backend == "onnx":
            features = detector.feature_stream(info.features)
        else:
            features = frontend.FeatureStream(info.features, detector.block_frames["audio"])
        state, outputs, times[backend] = detector.initial_state(1), [], []
        for begin in range(0, len(audio) - samples + 1, samples):
            started = time.perf_counter()
            block = features.push(audio[begin : begin + samples])
            mask = np.ones((1, len(block)), bool)
            decided, _, state = detector.step({"audio": block[None]}, {"audio": mask}, state)
            decided = jax.tree_util.tree_map(np.asarray, decided)  # wait for the values
            times[backend].append(time.perf_counter() - started)
            outputs.append(decided)
        found[backend] = outputs
        _log(f"afkws {backend}: {len(outputs)} blocks")
    block_s = samples / 16000
    return {
        "config": "AfKwsConfig(num_keywords=20)",
        "block_ms": block_s * 1000,
        "backends": {name: _summary(t, seconds, block_s) for name, t in times.items()},
        "max_abs_difference": _max_difference(
            [{k: v for k, v in d.items() if k != "peak"} for d in found["onnx"]],
            [{k: v for k, v in d.items() if k != "peak"} for d in found["jax"]],
        ),
        "peaks_differing": int(
            sum(np.sum(a["peak"] != b["peak"]) for a, b in zip(*found.values(), strict=True))
        ),
        "file_bytes": _sizes(root / "afkws-export"),
    }


def bench_multiqt(root: Path, seconds: float, rng) -> dict:
    """Front end plus step of the multimodal model, both backends, one stream."""
    import jax

    from multiqt_jax import bundle, export, labels, model, track

    config = model.MultiQTConfig(num_classes=len(labels.QUESTION_CLASSES))
    net = model.MultiQT(config)
    inputs = {"audio": np.zeros((1, 40, 40), np.float32), "text": np.zeros((1, 20, 29))}
    params = net.init(jax.random.key(0), inputs)
    bundle.save(root / "multiqt", net, params, labels.classes("questions"))
    export.main([str(root / "multiqt"), str(root / "multiqt-export")])
    audio = _audio(seconds, rng)
    text = rng.random((1, int(seconds * 50), config.text_symbols)).astype(np.float32)
    present = np.ones((1, 2), bool)
    found, times = {}, {}
    for backend in ("jax", "onnx"):
        tracker = track.load(root / "multiqt-export", None, backend)
        features = tracker.feature_stream()
        samples = tracker.audio_block * tracker.info.features.hop_samples
        text_block = tracker.block_frames["text"]
        state, outputs, times[backend] = tracker.initial_state(), [], []
        for index, begin in enumerate(range(0, len(audio) - samples + 1, samples)):
            started = time.perf_counter()
            block = {
                "audio": features.push(audio[begin : begin + samples])[None],
                "text": text[:, index * text_block : (index + 1) * text_block],
            }
            mask = {name: np.ones(value.shape[:2], bool) for name, value in block.items()}
            out, _, state = tracker.step(block, mask, present, state)
            out = jax.tree_util.tree_map(np.asarray, out)
            times[backend].append(time.perf_counter() - started)
            outputs.append(out)
        found[backend] = outputs
        _log(f"multiqt {backend}: {len(outputs)} blocks")
    block_s = samples / 16000
    return {
        "config": "MultiQTConfig(questions, audio and text)",
        "block_ms": block_s * 1000,
        "backends": {name: _summary(t, seconds, block_s) for name, t in times.items()},
        "max_abs_difference": _max_difference(found["onnx"], found["jax"]),
        "file_bytes": _sizes(root / "multiqt-export"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="benchmarks/results/export_backends.json")
    parser.add_argument("--seconds", type=float, default=60.0, help="audio streamed per model")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):  # before jax's thread pools
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import onnxruntime

    from speechkit import files

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as root:
        payload = {
            "machine": common.machine(),
            "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "onnxruntime": onnxruntime.__version__,
            "stream_seconds": args.seconds,
            "afkws": bench_afkws(Path(root), args.seconds, rng),
            "multiqt": bench_multiqt(Path(root), args.seconds, rng),
        }
    files.write_json(args.json, payload)
    for name in ("afkws", "multiqt"):
        for backend, row in payload[name]["backends"].items():
            _log(
                f"{name} {backend}: RTF {row['rtf']:.4f}, block {row['block_ms_median']:.2f} ms "
                f"median, {row['block_ms_p99']:.2f} ms p99"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
