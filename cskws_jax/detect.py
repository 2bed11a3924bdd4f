r"""Keyword detection with a trained AF-KWS bundle, streamed block by block.

    python -m cskws_jax.detect BUNDLE AUDIO... [--format table|jsonl|csv] [--block-ms 200]
        [--realtime] [--refractory-s S] [--min-score P] [--fa-per-hour B] [--keep-going]
        [--quiet]
    arecord -q -f S16_LE -r 16000 -c 1 -t raw | python -m cskws_jax.detect BUNDLE -

AUDIO is any mix of files (WAV, FLAC, OGG; any sample rate and channel count: mixed to
mono and resampled to the bundle's rate, 16 kHz) and folders (searched recursively for
those suffixes), or `-`: raw 16-bit little-endian PCM at 16 kHz mono on standard input,
e.g. a microphone pipe. Each input is one stream: the samples go through
`speechkit.frontend.FeatureStream` (the bundle's causal log-mel front end, computed as
the samples arrive) and `cskws_jax.streaming.StreamDetector`, one block of `--block-ms` of
audio at a time, and each detection is printed when the detector decides it: keyword,
start and end (s), score, and `emitted`, the seconds of audio consumed at the decision
(`StreamDetector.latency_s` after the keyword's centre, plus the wait for the block's
end). Every decided peak is printed (no `max_detections` cut); without a refractory
window they are the detections of `StreamDetector.detect` on the same features.
`--refractory-s` drops a detection of a keyword whose centre is within that many seconds
of the last printed detection of the same keyword (first come, first kept).

`--fa-per-hour B` runs the bundle at one of its stored operating points
(`cskws_jax.train.DecodeConfig.operating_points`, chosen by
`cskws_jax.operating_points.choose` on labelled data, e.g. the test split by
`experiments.cskws`): a detection of keyword k is printed only when its score >= that
point's threshold for k (before the refractory window), which held B false alarms per hour
of audio, all keywords together, on the data it was chosen on (new audio may give more).
A budget the bundle does not store is an error listing those it does.

Bad input stops the run with an error that names the file (missing, empty, unreadable,
silent, too short, non-finite samples; a bundle of another task or a broken one); with
`--keep-going` a bad file is skipped, listed at the end, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jax
import numpy as np

from cskws_jax import bundle
from cskws_jax.streaming import StreamDetector
from speechkit import audio_io, frontend
from speechkit.bundle import BundleError

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")
STDIN = "-"
STDIN_RATE = 16_000  # Hz: raw PCM on standard input is 16-bit little-endian mono at this rate
FORMATS = ("table", "jsonl", "csv")
FIELDS = ("file", "keyword", "label", "start", "end", "score", "emitted")
SILENCE = 1 / 32768  # peak below one 16-bit step: silent


class InputError(ValueError):
    """An input that cannot be used; the message names it."""


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


# ------------------------------------------------------------------------ front end


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
            real = len(self._buffer)
            block = np.zeros((self.block, self.width), np.float32)
            block[:real] = self._buffer
            self._buffer = self._buffer[real:]
            found += self._step(block, np.arange(self.block) < real)
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


# ---------------------------------------------------------------------------- inputs


def audio_inputs(paths) -> Iterator[str | InputError]:
    """Each path as given, a folder as its audio files (sorted, recursive), `-` as is;
    a folder without audio files as an InputError (yielded, not raised)."""
    for path in paths:
        folder = Path(path)
        if path == STDIN or not folder.is_dir():
            yield path
            continue
        found = sorted(
            str(p) for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES
        )
        if not found:
            yield InputError(f"{path}: a folder without audio files ({', '.join(AUDIO_SUFFIXES)})")
        yield from found


def read_samples(path: str, features: frontend.FeatureConfig) -> np.ndarray:
    """A file's samples, mono float32 [n] at the front end's rate, checked for use."""
    samples, _ = audio_io.read_audio(
        path, target_rate=features.sample_rate, channels=None, mix_to_mono=True
    )
    check_samples(path, samples, features)
    return samples


def check_samples(name: str, samples: np.ndarray, features: frontend.FeatureConfig) -> None:
    """Enough samples for one feature window, not silent (InputError naming `name`)."""
    if len(samples) < features.window_samples:
        raise InputError(
            f"{name}: too short: {len(samples)} samples at {features.sample_rate} Hz, expected "
            f"at least one {features.window_ms:g} ms window ({features.window_samples})"
        )
    if np.max(np.abs(samples)) < SILENCE:
        raise InputError(f"{name}: silent (every sample below one 16-bit step)")


def file_chunks(samples: np.ndarray, size: int, rate: int, realtime: bool) -> Iterator:
    """The samples in chunks of `size`; with `realtime`, each one when it would have
    arrived from a live source (paced by the wall clock)."""
    started = time.monotonic()
    for begin in range(0, len(samples), size):
        chunk = samples[begin : begin + size]
        if realtime:
            time.sleep(max(0.0, started + (begin + len(chunk)) / rate - time.monotonic()))
        yield chunk


def stdin_chunks(stream, size: int) -> Iterator[np.ndarray]:
    """Raw 16-bit little-endian PCM from a binary stream, as float32 chunks of up to
    `size` samples, each as soon as it is complete (a trailing odd byte is dropped)."""
    while True:
        data = stream.read(2 * size)
        if not data:
            return
        while len(data) < 2 * size:  # a pipe may return less than asked
            more = stream.read(2 * size - len(data))
            if not more:
                break
            data += more
        data = data[: len(data) // 2 * 2]
        if data:
            yield np.frombuffer(data, "<i2").astype(np.float32) / 32768


# --------------------------------------------------------------------------- output


class Output:
    """Writes detections to a text stream as a table, JSON lines or CSV, a line as soon
    as a detection is decided (the stream is flushed)."""

    def __init__(self, form: str, stream):
        self.form, self.stream = form, stream
        self._csv = csv.writer(stream, lineterminator="\n") if form == "csv" else None

    def header(self) -> None:
        if self.form == "table":
            self._line(f"{'keyword':<16} {'start':>8} {'end':>8} {'score':>6} {'emitted':>8}  file")
        elif self.form == "csv":
            self._csv.writerow(FIELDS)
            self.stream.flush()

    def write(self, name: str, detection: Detection) -> None:
        row = {"file": name, **dataclasses.asdict(detection)}
        for key in ("start", "end", "score", "emitted"):
            row[key] = round(row[key], 6)
        if self.form == "jsonl":
            self._line(json.dumps({key: row[key] for key in FIELDS}))
        elif self.form == "csv":
            self._csv.writerow([row[key] for key in FIELDS])
            self.stream.flush()
        else:
            d = detection
            self._line(
                f"{d.keyword:<16} {d.start:>8.2f} {d.end:>8.2f} {d.score:>6.3f} {d.emitted:>8.2f}"
                f"  {name}"
            )

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


# ------------------------------------------------------------------------------- run


def detect_stream(
    chunks, detector: StreamDetector, info, refractory_s: float, emit, thresholds=None
) -> int:
    """Streams sample chunks through the front end and the detector, calling `emit`
    with each detection as it is decided (those below their keyword's `thresholds`, when
    given, dropped); returns the number of detections."""
    frontend_stream = frontend.FeatureStream(info.features, detector.block_frames["audio"])
    stream = KeywordStream(detector, info.labels, refractory_s, thresholds)
    count = 0
    for chunk in chunks:
        for detection in stream.push(frontend_stream.push(chunk)):
            emit(detection)
            count += 1
    for detection in stream.close():
        emit(detection)
        count += 1
    return count


class _Checked:
    """Chunks passed through, their length and peak recorded (for the checks of a
    stream whose end is not known in advance)."""

    def __init__(self, chunks):
        self.chunks, self.samples, self.peak = chunks, 0, 0.0

    def __iter__(self):
        for chunk in self.chunks:
            self.samples += len(chunk)
            self.peak = max(self.peak, float(np.max(np.abs(chunk), initial=0.0)))
            yield chunk


def run_input(name: str, detector, info, args, output: Output) -> tuple[int, float]:
    """Detections of one input, printed as they come -> (count, seconds of audio)."""
    rate = info.features.sample_rate
    size = detector.block_frames["audio"] * info.features.hop_samples
    emit = lambda detection: output.write(name, detection)  # noqa: E731
    thresholds = operating_thresholds(info, args.fa_per_hour)
    if name != STDIN:
        samples = read_samples(name, info.features)
        chunks = file_chunks(samples, size, rate, args.realtime)
        count = detect_stream(chunks, detector, info, args.refractory_s, emit, thresholds)
        return count, len(samples) / rate
    if rate != STDIN_RATE:
        raise InputError(f"{STDIN}: raw PCM is read at {STDIN_RATE} Hz; the bundle wants {rate} Hz")
    checked = _Checked(stdin_chunks(sys.stdin.buffer, size))
    count = detect_stream(checked, detector, info, args.refractory_s, emit, thresholds)
    if checked.samples == 0:
        raise InputError(f"{STDIN}: holds no samples")
    if checked.peak < SILENCE:
        raise InputError(f"{STDIN}: silent (every sample zero)")
    return count, checked.samples / rate


def operating_thresholds(info, fa_per_hour: float | None) -> tuple[float, ...] | None:
    """The per-keyword thresholds of the bundle's operating point for `--fa-per-hour`
    (None without it); an InputError listing the stored budgets when it has none."""
    if fa_per_hour is None:
        return None
    try:
        return info.decoding.operating_point(fa_per_hour).thresholds
    except ValueError:
        stored = [f"{point.fa_per_hour:g}" for point in info.decoding.operating_points]
        raise InputError(
            f"--fa-per-hour: {info.path} has no operating point for {fa_per_hour:g} false "
            "alarms per hour; " + (f"it stores {', '.join(stored)}" if stored else "it stores none")
        ) from None


def block_outputs(block_ms: float, hop_s: float) -> int:
    """Output frames per block for `--block-ms` (a whole number of output hops)."""
    count = block_ms / (hop_s * 1000)
    if count < 1 or not math.isclose(count, round(count), abs_tol=1e-6):
        raise InputError(
            f"--block-ms: {block_ms:g} ms is not a whole number of the model's {hop_s * 1000:g} ms "
            "output hops"
        )
    return round(count)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="python -m cskws_jax.detect",
        description="Detect keywords in audio with a trained AF-KWS bundle, streamed block\n"
        "by block; each detection is printed when the detector decides it.",
        epilog="Example: python -m cskws_jax.detect out/cskws/afkws/bundle calls/ --format jsonl\n"
        "Microphone: arecord -q -f S16_LE -r 16000 -c 1 -t raw | python -m cskws_jax.detect "
        "BUNDLE -\nExit status: 0 when every input was used, 1 when one was bad (with "
        "--keep-going: skipped), 2 for a bad bundle or bad arguments.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument("bundle", help="bundle folder (saved by cskws_jax.bundle.save)")
    parse.add_argument(
        "audio",
        nargs="+",
        help="audio files (wav, flac, ogg; any rate and channels), folders (searched "
        "recursively), or - for raw 16-bit little-endian 16 kHz mono PCM on stdin",
    )
    parse.add_argument("--format", choices=FORMATS, default="table", help="output format")
    parse.add_argument(
        "--block-ms", type=float, default=200.0, help="audio per detector step (default 200 ms)"
    )
    parse.add_argument(
        "--realtime", action="store_true", help="feed files at the pace of a live stream"
    )
    parse.add_argument(
        "--refractory-s",
        type=float,
        default=0.0,
        help="drop a keyword's detection within this many seconds of its last one (default 0: "
        "keep all)",
    )
    parse.add_argument(
        "--min-score", type=float, default=None, help="peak threshold (default: the bundle's)"
    )
    parse.add_argument(
        "--fa-per-hour",
        type=float,
        default=None,
        metavar="B",
        help="keep a detection only when its score reaches its keyword's threshold at the "
        "bundle's operating point for B false alarms per hour (all keywords together)",
    )
    parse.add_argument(
        "--keep-going", action="store_true", help="skip bad inputs (listed at the end)"
    )
    parse.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parse


def main(argv=None) -> int:
    """The command line (see the module docstring) -> the exit status."""
    args = parser().parse_args(argv)
    try:
        net, params, info = bundle.load(args.bundle)
        steps = block_outputs(args.block_ms, info.features.hop_s * net.config.output_stride)
        operating_thresholds(info, args.fa_per_hour)  # a budget it lacks: before any audio
    except (BundleError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    min_score = info.decoding.min_score if args.min_score is None else args.min_score
    detector = StreamDetector(net, params, steps, info.decoding.radius, min_score)
    output = Output(args.format, sys.stdout)
    output.header()
    try:
        skipped = run_inputs(list(audio_inputs(args.audio)), detector, info, args, output)
    except (audio_io.AudioFileError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if skipped:
        print(f"skipped {len(skipped)} input(s):", file=sys.stderr)
        for reason in skipped:
            print(f"  {reason}", file=sys.stderr)
    return 1 if skipped else 0


def run_inputs(inputs: list, detector, info, args, output: Output) -> list[str]:
    """Runs every input in turn, with progress on stderr when there are several.
    Returns what was wrong with the bad ones; without `--keep-going` the first bad
    one's error is raised."""
    skipped = []
    for number, item in enumerate(inputs, start=1):
        started = time.perf_counter()
        try:
            if isinstance(item, InputError):
                raise item
            count, seconds = run_input(item, detector, info, args, output)
        except (audio_io.AudioFileError, InputError) as err:
            if not args.keep_going:
                raise
            skipped.append(str(err))
            continue
        if len(inputs) > 1 and not args.quiet:
            print(
                f"[{number}/{len(inputs)}] {item}: {count} detection(s) in {seconds:.1f} s of "
                f"audio ({time.perf_counter() - started:.1f} s)",
                file=sys.stderr,
            )
    return skipped


def _main_in_pipe() -> int:
    """`main`, ending quietly when the reader of standard output goes away (`| head`)."""
    try:
        return main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(_main_in_pipe())
