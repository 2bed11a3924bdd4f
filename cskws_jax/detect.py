"""Keyword detection with a trained AF-KWS bundle or its export, streamed block by block.

    python -m cskws_jax.detect MODEL AUDIO... [--format table|jsonl|csv] [--block-ms 200]
        [--realtime] [--refractory-s S] [--min-score P] [--fa-per-hour B | --all-peaks]
        [--keep-going] [--quiet]
    arecord -q -f S16_LE -r 16000 -c 1 -t raw | python -m cskws_jax.detect MODEL -
    python -m cskws_jax.detect --model afkws-top20 AUDIO...   # a model that ships

MODEL is a bundle folder (`cskws_jax.bundle.save`) or an export folder
(`python -m cskws_jax.export`; `--backend onnx` runs its ONNX detector). Each input
streams through `speechkit.frontend.FeatureStream` and `cskws_jax.streaming.StreamDetector`
and every detection prints when it is decided. Exit status 0, 1 a bad input, 2 a bad
model folder or arguments. Inputs, operating points (`--fa-per-hour`) and timing:
docs/usage.md, "Keyword detection"; export folders: docs/usage.md, "Export".
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np

from cskws_jax import export, models
from cskws_jax.streaming import StreamDetector
from speechkit import (
    audio_io,
    compilation,
    export_format,
    files,
    frontend,
    progress,
    stream_cli,
    stream_inputs,
)
from speechkit.bundle import Bundle, BundleError, model_code
from speechkit.stream_cli import Output, block_outputs
from speechkit.stream_inputs import InputError

FIELDS = ("file", "keyword", "label", "start", "end", "score", "emitted")
DEFAULT_BLOCK_MS = 200.0
INPUT_ERRORS = (
    audio_io.AudioFileError,
    InputError,
    BundleError,
)  # BundleError: an ONNX module failing as it runs


@dataclasses.dataclass(frozen=True)
class Detection:
    """A decided keyword peak; times in seconds from the start of its stream."""

    keyword: str
    label: int  # class id: the keyword's index in the bundle's labels
    start: float
    end: float
    score: float  # centre probability
    emitted: float  # audio consumed when the detector decided it

    @property
    def centre(self) -> float:
        return (self.start + self.end) / 2


# --------------------------------------------------------------------------- model


def from_bundle(path, block_ms: float | None, min_score: float | None):
    """(detector, info) of a bundle folder's live model, stepping blocks of `block_ms`
    (None: 200 ms), peaks from `min_score` (None: the bundle's). Needs the model code
    (the full install)."""
    net, params, info = model_code("cskws_jax.bundle", f"{path}: a bundle").load(path)
    hop_s = info.features.hop_s * net.config.output_stride
    outputs = block_outputs(DEFAULT_BLOCK_MS if block_ms is None else block_ms, hop_s)
    min_score = info.decoding.min_score if min_score is None else min_score
    return StreamDetector(net, params, outputs, info.decoding.radius, min_score), info


def from_export(path, block_ms: float | None, min_score: float | None):
    """(detector, info) of an export folder's step; its block is fixed at export time,
    so `block_ms` must be None or that block's length."""
    info, outputs, modules, facts = export.read_folder(path)
    if "step" not in modules:
        raise BundleError(f"{Path(path) / export_format.MANIFEST}: modules: no 'step'")
    exported = modules["step"]
    stream_cli.check_export_block(path, facts.spec.output_hop_s, outputs, block_ms)

    def model_step(inputs, mask, state):
        return exported.call(inputs["audio"], mask["audio"], state)

    min_score = info.decoding.min_score if min_score is None else min_score
    detector = StreamDetector.from_step(
        info.model_config,
        facts.spec,
        model_step,
        lambda batch_size: export.initial_state(exported, batch_size),
        outputs,
        info.decoding.radius,
        min_score,
    )
    return detector, info


def from_onnx(path, block_ms: float | None, min_score: float | None):
    """(detector, info) of an export folder's ONNX modules (`export.OnnxDetector`): its
    block and its peak threshold are fixed at export time, so `block_ms` and `min_score`
    must be None or those."""
    info, outputs, modules, facts = export.read_folder(path, backend="onnx")
    stream_cli.check_export_block(path, facts.spec.output_hop_s, outputs, block_ms)
    if min_score is not None and min_score != info.decoding.min_score:
        raise InputError(
            f"--min-score: {min_score:g}; the ONNX detector in {path} decides peaks from "
            f"{info.decoding.min_score:g} (fixed when exporting; --backend jax takes any)"
        )
    return export.OnnxDetector(info, outputs, modules, facts), info


def load(
    path, block_ms: float | None, min_score: float | None, backend: str = "jax"
) -> tuple[StreamDetector, Bundle]:
    """For an export folder (with export.json) `from_export` (backend "jax") or
    `from_onnx` ("onnx"), else `from_bundle` (a bundle runs with jax only)."""
    if not export_format.is_folder(path):
        stream_cli.require_export(path, backend, "cskws")
        return from_bundle(path, block_ms, min_score)
    if backend == "onnx":
        return from_onnx(path, block_ms, min_score)
    return from_export(path, block_ms, min_score)


# ------------------------------------------------------------------------- detection


class KeywordStream:
    """One stream through a `StreamDetector`: log-mel frames in (any number at a time),
    detections out as they are decided. `close()` ends the stream as
    `cskws_jax.streaming.StreamDetector.detect` does (the last block and the flush
    padded with masked zero frames), so the detections are the same."""

    def __init__(
        self, detector: StreamDetector, keywords, refractory_s: float = 0.0, thresholds=None
    ):
        """`thresholds`: one score threshold per keyword (a detection below its
        keyword's is dropped), or None for none."""
        self.detector, self.keywords, self.refractory_s = detector, tuple(keywords), refractory_s
        self.thresholds = None if thresholds is None else tuple(thresholds)
        self.block = detector.block_frames["audio"]
        self.width = detector.config.features
        self.state = detector.initial_state(1)
        self._buffer = np.zeros((0, self.width), np.float32)
        self.frames = 0  # real frames received
        self.blocks = 0  # blocks stepped
        self._last_centre: dict[int, float] = {}

    def push(self, features: np.ndarray) -> list[Detection]:
        """features float32 [frames, F] -> the detections decided by the blocks they
        complete."""
        self.frames += len(features)
        self._buffer = np.concatenate([self._buffer, features])
        found = []
        while len(self._buffer) >= self.block:
            block, self._buffer = self._buffer[: self.block], self._buffer[self.block :]
            found += self._step(block, np.ones(self.block, bool))
        return found

    def close(self) -> list[Detection]:
        """Ends the stream: the rest of the last block, then masked blocks until every
        real position is decided."""
        stride = self.detector.config.output_stride
        outputs = -(-self.frames // stride)
        total = max(1, -(-(outputs + self.detector.spec.output_latency) // self.block_outputs))
        found = []
        while self.blocks < total:
            block, mask = stream_cli.padded_block(self._buffer, self.block)
            self._buffer = self._buffer[:0]
            found += self._step(block, mask)
        return found

    @property
    def block_outputs(self) -> int:
        return self.detector.block_outputs

    def _step(self, block: np.ndarray, mask: np.ndarray) -> list[Detection]:
        found, decided, self.state = self.detector.step(
            {"audio": block[None]}, {"audio": mask[None]}, self.state
        )
        self.blocks += 1
        found = jax.tree_util.tree_map(lambda v: np.asarray(v[0]), found)
        detections = []
        peaks = found["peak"] & np.asarray(decided[0])[:, None]  # [n, K]
        for position, label in zip(*np.nonzero(peaks), strict=True):
            detection = Detection(
                keyword=self.keywords[label],
                label=int(label),
                start=float(found["start"][position]),
                end=float(found["end"][position]),
                score=float(found["score"][position, label]),
                emitted=float(found["emitted"][position]),
            )
            if self._passes(detection) and self._keep(detection):
                detections.append(detection)
        return detections

    def _passes(self, detection: Detection) -> bool:
        """True at or above its keyword's threshold (always without thresholds)."""
        return self.thresholds is None or detection.score >= self.thresholds[detection.label]

    def _keep(self, detection: Detection) -> bool:
        """False within the refractory window of the last kept detection of its keyword."""
        last = self._last_centre.get(detection.label)
        if last is not None and detection.centre - last < self.refractory_s:
            return False
        self._last_centre[detection.label] = detection.centre
        return True


# --------------------------------------------------------------------------- output


def output(form: str, stream) -> Output:
    """Detections written to `stream` as a table, JSON lines, CSV, an event list or an
    Audacity label track (`speechkit.stream_cli.Output`), a line as soon as
    a detection is decided."""
    return Output(
        form,
        stream,
        FIELDS,
        ("start", "end", "score", "emitted"),
        f"{'keyword':<16} {'start':>8} {'end':>8} {'score':>6} {'emitted':>8}  file",
        lambda name, d: (
            f"{d.keyword:<16} {d.start:>8.2f} {d.end:>8.2f} {d.score:>6.3f} {d.emitted:>8.2f}"
            f"  {name}"
        ),
        event=("start", "end", "keyword"),
    )


# ------------------------------------------------------------------------------- run


def detect_stream(
    chunks, detector: StreamDetector, info, refractory_s: float, emit, thresholds=None
) -> int:
    """Streams sample chunks through the front end and the detector, calling `emit`
    with each detection as it is decided (those below their keyword's `thresholds`, when
    given, dropped); returns the number of detections."""
    stream = KeywordStream(detector, info.labels, refractory_s, thresholds)
    return stream_cli.stream_items(chunks, feature_stream(detector, info), stream, emit)


def feature_stream(detector, info) -> frontend.FeatureStream:
    """The front end over a stream's arriving samples, a block of the detector's at a time:
    an ONNX detector's own module (`export.OnnxDetector.feature_stream`), else jax's."""
    if isinstance(detector, export.OnnxDetector):
        return detector.feature_stream(info.features)
    return frontend.FeatureStream(info.features, detector.block_frames["audio"])


def run_input(name: str, detector, info, args, out: Output, thresholds) -> tuple[int, float]:
    """Detections of one input, printed as they come (those below their keyword's
    `thresholds` dropped; None: none) -> (count, seconds of audio)."""
    rate = info.features.sample_rate
    size = block_samples(detector, info)
    emit = lambda detection: out.write(name, detection)  # noqa: E731
    checked = stream_inputs.input_chunks(name, info.features, size, args)  # block by block
    count = detect_stream(checked, detector, info, args.refractory_s, emit, thresholds)
    checked.check()
    return count, checked.samples / rate


def block_samples(detector, info) -> int:
    """Samples (at the model's rate) of one block the detector steps on."""
    return detector.block_frames["audio"] * info.features.hop_samples


def operating_point(info, fa_per_hour: float | None, all_peaks: bool = False):
    """The bundle's operating point in force: the one for `fa_per_hour`, else (None) its
    default (`PeakDecodingConfig.default_point`, the middle budget); None with
    `all_peaks` or when it stores none. An InputError lists the stored budgets when
    `fa_per_hour` is not one of them."""
    if all_peaks:
        return None
    if fa_per_hour is None:
        return info.decoding.default_point()
    try:
        return info.decoding.operating_point(fa_per_hour)
    except ValueError:
        stored = [f"{point.fa_per_hour:g}" for point in info.decoding.operating_points]
        raise InputError(
            f"--fa-per-hour: {info.path} has no operating point for {fa_per_hour:g} false "
            "alarms per hour; " + (f"it stores {', '.join(stored)}" if stored else "it stores none")
        ) from None


def operating_thresholds(info, fa_per_hour: float | None, all_peaks: bool = False):
    """The per-keyword thresholds of `operating_point` (None: every decided peak)."""
    point = operating_point(info, fa_per_hour, all_peaks)
    return None if point is None else point.thresholds


def describe_point(info, point) -> str:
    """A line for stderr: the operating point in force and what it measured, or that
    every decided peak is printed."""
    if point is None:
        return (
            f"note: every decided peak (score >= {info.decoding.min_score:g}) is printed: "
            "no operating point"
            + (" (--all-peaks)" if info.decoding.operating_points else " stored in the model")
        )
    line = f"note: operating point {point.fa_per_hour:g} false alarms per hour"
    if point.split:
        line += f" (chosen on {point.split}, {point.hours:.2f} h)"
    if point.measured is not None:
        measured = point.measured
        miss = "" if measured.miss_rate is None else f", miss rate {measured.miss_rate:.2f}"
        line += (
            f"; measured {measured.fa_per_hour:.1f} FA/h{miss} on {measured.split} "
            f"({measured.hours:.2f} h)"
        )
    others = [f"{p.fa_per_hour:g}" for p in info.decoding.operating_points if p is not point]
    if others:
        line += f"; --fa-per-hour {' or '.join(others)} for another"
    return line + "; --all-peaks for every peak"


def parser() -> argparse.ArgumentParser:
    prog = stream_cli.command_name("cskws_jax.detect")
    exporter = "stj-export" if prog.startswith("stj-") else "python -m cskws_jax.export"
    parse = stream_cli.stream_parser(
        prog,
        "Detect keywords in audio with a trained AF-KWS bundle or export, streamed\n"
        "block by block; each detection is printed when the detector decides it.",
        f"Example: {prog} --model afkws-top20 calls/ --fa-per-hour 5 --format jsonl\n"
        f"Microphone: {stream_cli.MICROPHONE} | {prog} MODEL -\n"
        f"Exported ({exporter} BUNDLE OUT_DIR): {prog} OUT_DIR AUDIO...",
        "input",
    )
    stream_cli.add_stream_arguments(
        parse,
        "bundle or export folder",
        "audio",
        "detector",
    )
    stream_cli.add_shipped_argument(parse, models.CATALOGUE)
    parse.add_argument(
        "--refractory-s",
        type=stream_cli.number(0),
        default=0.0,
        metavar="S",
        help="drop a keyword's detection within S seconds of its last one (default 0)",
    )
    parse.add_argument(
        "--min-score",
        type=stream_cli.number(0, 1),
        default=None,
        metavar="P",
        help="peak threshold in [0, 1] (default: the model's)",
    )
    point = parse.add_mutually_exclusive_group()
    point.add_argument(
        "--fa-per-hour",
        type=stream_cli.number(0, above=True),
        default=None,
        metavar="B",
        help="the model's operating point for B false alarms per hour (default: its middle)",
    )
    point.add_argument(
        "--all-peaks", action="store_true", help="every decided peak: raw scores, no threshold"
    )
    stream_cli.add_run_arguments(parse, "inputs", "no progress or notes on stderr")
    parse.epilog = shipped_models_text() + parse.epilog
    return parse


def shipped_models_text() -> str:
    """--help's lines on each shipped model: its keywords and operating points."""
    lines = []
    for name in models.names():
        try:
            stored = files.load_json(Path(models.path(name)) / "bundle.json")
            labels, decoding = stored["labels"], stored["decoding"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged shipped model: --model says so when it is run
        budgets = ", ".join(f"{p['fa_per_hour']:g}" for p in decoding.get("operating_points", []))
        text = f"--model {name}: {', '.join(labels)}; operating points (FA/h): {budgets or 'none'}"
        lines += textwrap.wrap(text, 79, subsequent_indent="  ", break_on_hyphens=False)
    return "".join(line + "\n" for line in lines)


def main(argv=None) -> int:
    """The command line (see the module docstring) -> the exit status."""
    listed = stream_cli.listed_devices(argv)
    if listed is not None:
        return listed
    args = parser().parse_intermixed_args(argv)  # files after options too (nargs="*")
    progress.quiet(args.quiet)
    compilation.enable_cache()
    try:
        stream_cli.shipped_model(args, models.CATALOGUE, "audio")
        inputs = stream_cli.stream_inputs_of(args, "audio")
        detector, info = load(args.model, args.block_ms, args.min_score, args.backend)
        point = operating_point(info, args.fa_per_hour, args.all_peaks)  # before any audio
    except (BundleError, InputError) as err:
        stream_cli.print_error(err)
        return 2
    if not args.quiet:
        print(describe_point(info, point), file=sys.stderr)
    thresholds = None if point is None else point.thresholds
    out = output(args.format, sys.stdout)
    out.header()
    return stream_cli.run_all(
        inputs,
        lambda name: run_input(name, detector, info, args, out, thresholds),
        args,
        INPUT_ERRORS,
        "detection(s)",
    )


if __name__ == "__main__":
    sys.exit(stream_cli.main_in_pipe(main))
