"""Question (or symptom) tracking in calls with a trained MultiQT, streamed block by block.

    python -m multiqt_jax.track (MODEL | --model NAME) CALL... [--format table|jsonl|csv]
        [--block-ms 200] [--realtime] [--asr none|pocketsphinx|ctc | --words FILE.json
        | --posteriors FILE.npy | --no-text] [--smoothing-frames K] [--keep-going] [--quiet]
    arecord -q -f S16_LE -r 16000 -c 1 -t raw | python -m multiqt_jax.track MODEL -

MODEL is a bundle folder (`multiqt_jax.bundle.save`) or an export folder
(`python -m multiqt_jax.export`). Each call streams through
`speechkit.frontend.FeatureStream` and the model's step, one `--block-ms` block at a
time, and each segment (a run of one non-background class) prints when it closes, its
labels smoothed by `multiqt_jax.decode`. Exit status 0, 1 a bad call, 2 a bad model
folder. Text sources, smoothing and times: docs/usage.md, "Question tracking".
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from multiqt_jax import decode, export, models
from multiqt_jax.config import MultiQTConfig
from multiqt_jax.datasets.features import word_fields
from speechkit import (
    asr,
    compilation,
    errors,
    export_format,
    frontend,
    onnx_export,
    progress,
    stream_cli,
    stream_inputs,
    streaming,
)
from speechkit.bundle import FULL_INSTALL, Bundle, BundleError, model_code
from speechkit.stream_cli import Output, block_outputs
from speechkit.stream_inputs import STDIN, InputError

FIELDS = ("file", "label", "class_id", "start", "end", "emitted")
ASR_CHOICES = ("none", "pocketsphinx", "ctc")
BACKGROUND = 0  # class id of the background ("none") class
DEFAULT_BLOCK_MS = 200.0
INPUT_ERRORS = (errors.InvalidInput,)
"""A bad call: its audio (`speechkit.audio_io.AudioFileError`), words or posteriors
(`multiqt_jax.datasets.annotated_calls.AnnotationError`), text
(`speechkit.stream_inputs.InputError`), an ONNX module failing as it runs
(`speechkit.bundle.BundleError`): each a `speechkit.errors.InvalidInput`."""
_smooth = jax.jit(decode.step, static_argnames="config")


@dataclasses.dataclass(frozen=True)
class Segment:
    """A closed run of one class; times in seconds from the start of its call."""

    label: str
    class_id: int  # the label's index in the model's labels
    start: float
    end: float
    emitted: float  # audio consumed when the run closed


# --------------------------------------------------------------------------- model


@dataclasses.dataclass(frozen=True)
class StreamModel:
    """A MultiQT streaming step with what it needs around it.

    step(inputs, mask, present, state) -> ({"logits" [1, n, C]}, out_mask [1, n], state):
    one block of `block_frames[name]` frames of each of `modalities`, present bool [1, 2];
    `initial_state()` the state before a call's first block. Either the live model of a
    bundle (`from_bundle`) or an exported step (`from_export`)."""

    step: Callable
    initial_state: Callable[[], object]
    info: Bundle  # labels, features, decoding, model_config
    block_outputs: int
    spec: streaming.StreamingSpec  # the model's (an export's stored one)
    frontend_module: object = None  # an ONNX front end (`from_onnx`); None: jax's

    def feature_stream(self) -> frontend.FeatureStream:
        """The front end over a call's arriving samples, one block at a time."""
        if self.frontend_module is None:
            return frontend.FeatureStream(self.info.features, self.audio_block)
        return onnx_export.feature_stream(
            self.info.features, self.audio_block, self.frontend_module
        )

    @property
    def config(self) -> MultiQTConfig:
        return self.info.model_config

    @property
    def block_frames(self) -> dict[str, int]:
        """Input frames of each modality per block."""
        return {name: self.block_outputs * s.block for name, s in self.spec.inputs.items()}

    @property
    def audio_block(self) -> int:
        """10 ms audio frames per block (the stream's clock, text-only models too)."""
        return round(self.block_outputs * self.spec.output_hop_s / self.info.features.hop_s)

    @property
    def block_samples(self) -> int:
        """Samples (at the model's rate) of one block."""
        return self.audio_block * self.info.features.hop_samples

    @property
    def reads_text(self) -> bool:
        return "text" in self.config.modalities


def from_bundle(path, block_ms: float | None) -> StreamModel:
    """The live model of a bundle folder, stepping blocks of `block_ms` (None: 200 ms).
    Needs the model code (the full install)."""
    net, params, info = model_code("multiqt_jax.bundle", f"{path}: a bundle").load(path)
    spec = streaming.spec_of(net)
    outputs = block_outputs(DEFAULT_BLOCK_MS if block_ms is None else block_ms, spec.output_hop_s)

    @jax.jit
    def step(inputs, mask, present, state):
        return net.apply(params, inputs, mask, state, present, method=net.step)

    def initial_state():
        return net.apply(params, 1, method=net.initial_state)

    return StreamModel(step, initial_state, info, outputs, spec)


def from_export(path, block_ms: float | None) -> StreamModel:
    """The exported step of an export folder; its block is fixed at export time, so
    `block_ms` must be None or that block's length."""
    info, outputs, modules, facts = export.read_folder(path)
    if "step" not in modules:
        raise BundleError(f"{Path(path) / export_format.MANIFEST}: modules: no 'step'")
    exported = modules["step"]
    stream_cli.check_export_block(path, facts.spec.output_hop_s, outputs, block_ms)
    initial_state = functools.partial(export.initial_state, exported, 1)
    return StreamModel(jax.jit(exported.call), initial_state, info, outputs, facts.spec)


def from_onnx(path, block_ms: float | None) -> StreamModel:
    """The ONNX step and front end of an export folder, run by onnxruntime; its block is
    fixed at export time, as `from_export`'s."""
    info, outputs, modules, facts = export.read_folder(path, backend="onnx")
    stream_cli.check_export_block(path, facts.spec.output_hop_s, outputs, block_ms)
    module = modules["step"]

    def step(inputs, mask, present, state):
        found = module.call(inputs=inputs, mask=mask, present=present, state=state)
        return found["outputs"], found["out_mask"], found["new_state"]

    initial_state = functools.partial(module.initial_state, 1)
    return StreamModel(step, initial_state, info, outputs, facts.spec, modules["frontend"])


def load(path, block_ms: float | None, backend: str = "jax") -> StreamModel:
    """For an export folder (with export.json) `from_export` (backend "jax") or
    `from_onnx` ("onnx"), else `from_bundle` (a bundle runs with jax only)."""
    if not export_format.is_folder(path):
        stream_cli.require_export(path, backend, "multiqt")
        return from_bundle(path, block_ms)
    if backend == "onnx":
        return from_onnx(path, block_ms)
    return from_export(path, block_ms)


# ---------------------------------------------------------------------------- text


@dataclasses.dataclass(frozen=True)
class TextSource:
    """Where a call's text comes from (see the module docstring)."""

    words_file: str | None = None  # a words JSON for the one call (--words)
    posteriors_file: str | None = None  # a posteriors .npy for the one call (--posteriors)
    recogniser: str = "none"  # "pocketsphinx" or "ctc": recognise each call
    missing: bool = False  # mark the text missing (present = False)
    ctc_bundle: str | None = None  # the ctc_jax recogniser of recogniser "ctc"
    ctc_posteriors: bool = False  # "ctc" gives its character posteriors, not its words


def call_text(name: str, samples: np.ndarray, tracker: StreamModel, source: TextSource):
    """(text float32 [frames // 2, V] or None, present bool [1, 2]) of one call of
    `samples` (frames: its 10 ms audio frames); None when the model reads no text or
    the text is marked missing."""
    if not tracker.reads_text:
        return None, np.ones((1, 2), bool)
    if source.missing:
        return None, np.array([[True, False]])
    frames = frontend.num_frames(len(samples), tracker.info.features)
    record = _text_record(name, samples, frames, source)
    if record is None:
        stem = os.path.splitext(name)[0]
        raise InputError(
            f"{name}: the model reads text ({'+'.join(tracker.config.modalities)}) and this "
            f"call has none: give --asr pocketsphinx (recognise it), --words FILE.json or "
            f"{stem}.json beside it (timed words), --posteriors FILE.npy or {stem}.npy beside "
            "it (character posteriors), or --no-text (text marked missing)"
        )
    input_pipeline, _ = text_code()
    text = input_pipeline.text_input(record, frames, tracker.info.decoding.causal_text)
    return text, np.ones((1, 2), bool)


def _text_record(name: str, samples, frames: int, source: TextSource) -> dict | None:
    """The record fields `input_pipeline.text_input` reads (asr_* words,
    text_posteriors) from the first source there is (module docstring); None: none."""
    stem = os.path.splitext(name)[0]
    _, annotated_calls = text_code()
    if source.posteriors_file:
        return _posteriors_record(source.posteriors_file, frames)
    if source.words_file:
        words = annotated_calls.read_words(source.words_file)
    elif source.recogniser == "pocketsphinx":
        words = list(asr.recognise(samples).words)
    elif source.recogniser == "ctc":
        recogniser = _ctc_recogniser(source.ctc_bundle)
        features = frontend.waveform_log_mel(samples, _ctc_code()[0].FEATURES)
        if source.ctc_posteriors:
            return {**word_fields([]), "text_posteriors": recogniser.posteriors([features])[0]}
        words = list(recogniser.transcribe([features])[0].words)
    elif os.path.exists(stem + ".npy"):
        return _posteriors_record(stem + ".npy", frames)
    elif os.path.exists(stem + ".json"):
        words = annotated_calls.read_words(stem + ".json")
    else:
        return None
    return {**word_fields(words), "text_posteriors": np.zeros((0, asr.NUM_SYMBOLS), np.float32)}


def text_code():
    """(multiqt_jax.input_pipeline, multiqt_jax.datasets.annotated_calls): the training
    pipeline's text code, which a model that reads text needs (the full install; an
    InputError saying so in the light one)."""
    try:
        from multiqt_jax import input_pipeline
        from multiqt_jax.datasets import annotated_calls
    except ModuleNotFoundError as err:
        raise InputError(
            f"the model reads text, and its text input is built by the training pipeline's "
            f"code, which needs {err.name} (not installed: the light install): "
            f"{FULL_INSTALL}, or --no-text (text marked missing)"
        ) from None
    return input_pipeline, annotated_calls


def _ctc_code():
    """(ctc_jax.bundle, ctc_jax.recognise.Recogniser): the recogniser's
    model code (the full install; a BundleError saying so in the light one)."""
    what = "--asr ctc: the recogniser"
    bundle = model_code("ctc_jax.bundle", what)
    return bundle, model_code("ctc_jax.recognise", what).Recogniser


@functools.cache
def _ctc_recogniser(path: str):
    """The `ctc_jax.recognise.Recogniser` of a recogniser bundle folder."""
    return _ctc_code()[1].load(path)


def _posteriors_record(path: str, frames: int) -> dict:
    _, annotated_calls = text_code()
    posteriors = annotated_calls.read_posteriors(path, frames // 2)
    return {**word_fields([]), "text_posteriors": posteriors}


# ------------------------------------------------------------------------ segments


class SegmentStream:
    """Output frames' labels in (valid frames only, in order), closed segments out: a
    run of one non-background class closes at the first frame of another class or at
    `close`. `shift` frames are taken off start and end (a smoother's lag)."""

    def __init__(self, labels, hop_s: float, shift: int = 0):
        self.labels, self.hop_s, self.shift = tuple(labels), hop_s, shift
        self.frames = 0  # frames received
        self._class, self._start = BACKGROUND, 0

    def push(self, classes, emitted: float) -> list[Segment]:
        """classes int [n]: the next frames' class ids; emitted: audio consumed (s)."""
        closed = []
        for class_id in np.asarray(classes).tolist():
            if class_id != self._class:
                if self._class != BACKGROUND:
                    closed.append(self._segment(self.frames - self.shift, emitted))
                self._class, self._start = class_id, self.frames
            self.frames += 1
        return closed

    def close(self, emitted: float, end: float) -> list[Segment]:
        """The run still open at the end of the call, ending at `end` (s)."""
        if self._class == BACKGROUND:
            return []
        segment = self._segment(self.frames - self.shift, emitted)
        self._class = BACKGROUND
        return [dataclasses.replace(segment, end=max(segment.start, end))]

    def _segment(self, end_frame: int, emitted: float) -> Segment:
        start = max(0, self._start - self.shift) * self.hop_s
        return Segment(
            self.labels[self._class], self._class, start, end_frame * self.hop_s, emitted
        )


def smoothing_of(info: Bundle, smoothing_frames: int | None = None):
    """The smoothing rule a call runs (`multiqt_jax.decode`): the bundle's
    `decoding.smoothing`, its K (`min_frames`) set to `smoothing_frames` unless None."""
    if smoothing_frames is None:
        return info.decoding.smoothing
    return dataclasses.replace(info.decoding.smoothing, min_frames=smoothing_frames)


class CallStream:
    """One call through a `StreamModel`: log-mel frames in (any number at a time), closed
    segments out. `close()` ends the call as `BlockRunner.run` does (the last block
    padded with masked zero frames), so the labels are the whole-call forward's.
    text: float32 [frames // 2, V] of the whole call, or None (zeros: a model without
    text, or its text marked missing in `present`). smoothing_frames: the smoothing
    rule's K instead of the bundle's (`decoding.smoothing`; None: the bundle's)."""

    def __init__(self, tracker: StreamModel, text, present, smoothing_frames: int | None = None):
        self.tracker, self.text, self.present = tracker, text, np.asarray(present, bool)
        self.state = tracker.initial_state()
        self.audio_width = tracker.info.features.num_mels
        self._buffer = np.zeros((0, self.audio_width), np.float32)
        self.frames = 0  # real audio frames received
        self.blocks = 0  # blocks stepped
        self.smoothing = smoothing_of(tracker.info, smoothing_frames)
        self._smoothing_state = decode.initial_state(1, self.smoothing)
        self.segments = SegmentStream(
            tracker.info.labels, tracker.spec.output_hop_s, self.smoothing.latency_frames
        )

    def push(self, features: np.ndarray) -> list[Segment]:
        """features float32 [frames, 40] -> the segments closed by the blocks they
        complete."""
        self.frames += len(features)
        self._buffer = np.concatenate([self._buffer, features])
        size, closed = self.tracker.audio_block, []
        while len(self._buffer) >= size:
            block, self._buffer = self._buffer[:size], self._buffer[size:]
            closed += self._step(block, np.ones(size, bool))
        return closed

    def close(self) -> list[Segment]:
        """Ends the call: the rest of the last block, then masked blocks until every
        output frame of the whole call is out."""
        tracker, closed = self.tracker, []
        total = max(1, -(-self._output_frames() // tracker.block_outputs))
        while self.blocks < total:
            block, mask = stream_cli.padded_block(self._buffer, tracker.audio_block)
            self._buffer = self._buffer[:0]
            closed += self._step(block, mask)
        hop_s = self.tracker.info.features.hop_s
        return closed + self.segments.close(self._consumed(), self.frames * hop_s)

    def _output_frames(self) -> int:
        """Output frames of the whole call (`StreamingSpec.output_frames`)."""
        frames = {"audio": self.frames, "text": self.frames // 2}
        spec = self.tracker.spec
        return spec.output_frames({name: frames[name] for name in spec.inputs})

    def _consumed(self) -> float:
        """Seconds of audio the blocks stepped so far have consumed."""
        frames = min(self.blocks * self.tracker.audio_block, self.frames)
        return frames * self.tracker.info.features.hop_s

    def _step(self, audio: np.ndarray, audio_mask: np.ndarray) -> list[Segment]:
        inputs, mask = self._block_inputs(audio, audio_mask)
        outputs, out_mask, self.state = self.tracker.step(inputs, mask, self.present, self.state)
        self.blocks += 1
        labels, _, self._smoothing_state = _smooth(
            outputs["logits"], out_mask, self._smoothing_state, config=self.smoothing
        )
        valid = np.asarray(out_mask[0])
        return self.segments.push(np.asarray(labels[0])[valid], self._consumed())

    def _block_inputs(self, audio, audio_mask) -> tuple[dict, dict]:
        """(inputs, mask) of the block being stepped, for the model's modalities."""
        inputs, mask = {}, {}
        if "audio" in self.tracker.config.modalities:
            inputs["audio"], mask["audio"] = audio[None], audio_mask[None]
        if self.tracker.reads_text:
            size = self.tracker.block_frames["text"]
            begin = self.blocks * size
            piece = np.zeros((size, self.tracker.config.text_symbols), np.float32)
            if self.text is not None:
                real = self.text[begin : begin + size]
                piece[: len(real)] = real
            text_frames = self.frames // 2  # the call's text frames (20 ms) so far
            inputs["text"] = piece[None]
            mask["text"] = (begin + np.arange(size) < text_frames)[None]
        return inputs, mask


# ------------------------------------------------------------------------- output


def output(form: str, stream) -> Output:
    """Segments written to `stream` as a table, JSON lines, CSV, an event list or an
    Audacity label track (`speechkit.stream_cli.Output`), a line as soon as a
    segment closes."""
    return Output(
        form,
        stream,
        FIELDS,
        ("start", "end", "emitted"),
        f"{'label':<22} {'start':>8} {'end':>8} {'emitted':>8}  file",
        lambda name, s: f"{s.label:<22} {s.start:>8.2f} {s.end:>8.2f} {s.emitted:>8.2f}  {name}",
    )


# ---------------------------------------------------------------------------- run


def track_stream(chunks, stream: CallStream, emit) -> int:
    """Streams sample chunks through the front end and `stream`, calling `emit` with
    each segment as it closes; returns the number of segments."""
    frontend_stream = stream.tracker.feature_stream()
    return stream_cli.stream_items(chunks, frontend_stream, stream, emit)


def run_input(name: str, tracker: StreamModel, args, out: Output) -> tuple[int, float]:
    """Segments of one call, printed as they close -> (count, seconds of audio)."""
    features = tracker.info.features
    rate = features.sample_rate
    size = tracker.block_samples
    emit = lambda segment: out.write(name, segment)  # noqa: E731
    source = text_source(args, tracker)
    live = name == STDIN or args.mic is not None  # audio as it arrives: no text of the call
    if not live and tracker.reads_text and not source.missing:
        # The call's text comes from the whole call (its words or their recognition).
        samples = stream_inputs.read_samples(name, features)
        text, present = call_text(name, samples, tracker, source)
        stream = CallStream(tracker, text, present, args.smoothing_frames)
        chunks = stream_inputs.file_chunks(samples, size, rate, args.realtime)
        return track_stream(chunks, stream, emit), len(samples) / rate
    # audio only: read block by block, memory does not grow with the call
    checked = stream_inputs.input_chunks(name, features, size, args)
    if live and tracker.reads_text and not args.no_text:
        source_name = "standard input" if name == STDIN else "the microphone"
        raise InputError(
            f"{name}: {source_name} carries audio only and the model reads text: give a "
            "file with its text, or --no-text"
        )
    present = np.array([[True, not tracker.reads_text]])
    stream = CallStream(tracker, None, present, args.smoothing_frames)
    count = track_stream(checked, stream, emit)
    checked.check()
    return count, checked.samples / rate


def text_source(args, tracker: StreamModel) -> TextSource:
    """The text options, and whether `--asr ctc` gives this model the recogniser's
    posteriors (a bundle trained on them: decoding.text_recogniser 'ctc_posteriors')."""
    posteriors = tracker.info.decoding.text_recogniser == "ctc_posteriors"
    return TextSource(
        args.words, args.posteriors, args.asr, args.no_text, args.ctc_bundle, posteriors
    )


def parser() -> argparse.ArgumentParser:
    prog = stream_cli.command_name("multiqt_jax.track")
    parse = stream_cli.stream_parser(
        prog,
        "Track questions (or symptoms) in calls with a MultiQT bundle or export,\n"
        "streamed block by block; each segment is printed when it closes.",
        f"Example: {prog} --model multiqt-questions --asr ctc calls/\n"
        f"Microphone (audio-only model): {stream_cli.MICROPHONE} | {prog} MODEL -\n"
        "A text model's text: --asr, --words, --posteriors, <call>.npy or .json beside the "
        "call, or --no-text.",
        "call",
    )
    stream_cli.add_stream_arguments(
        parse,
        "bundle or export folder",
        "calls",
        "model",
    )
    stream_cli.add_shipped_argument(parse, models.CATALOGUE)
    text = parse.add_mutually_exclusive_group()
    text.add_argument(
        "--asr",
        choices=ASR_CHOICES,
        default="none",
        help="recognise each call for its text (default none: files beside it)",
    )
    text.add_argument("--words", metavar="JSON", help="the one call's timed words")
    parse.add_argument(
        "--ctc-bundle", metavar="FOLDER", help="--asr ctc's recogniser (default: the shipped one)"
    )
    text.add_argument(
        "--posteriors", metavar="NPY", help="the one call's character posteriors (20 ms)"
    )
    text.add_argument("--no-text", action="store_true", help="mark the text missing")
    parse.add_argument(
        "--smoothing-frames",
        type=stream_cli.number(1, integer=True),
        default=None,
        metavar="K",
        help="frames a class holds to switch (1: raw; default: the model's)",
    )
    stream_cli.add_run_arguments(parse, "calls", "no progress or notes on stderr")
    return parse


def _check_text_arguments(args, tracker: StreamModel) -> None:
    """Arguments that cannot work with this model (InputError)."""
    if (args.words or args.posteriors) and len(args.inputs) != 1:
        raise InputError(
            "--words / --posteriors: give the text of one call; for several, put "
            "<call>.json or <call>.npy beside each"
        )
    if args.ctc_bundle and args.asr != "ctc":
        raise InputError("--ctc-bundle FOLDER: only with --asr ctc")
    if args.asr == "ctc" and not args.ctc_bundle:
        args.ctc_bundle = _ctc_code()[0].SHIPPED  # the recogniser that ships with the toolkit
    if args.ctc_bundle:
        _ctc_recogniser(args.ctc_bundle)  # a bad recogniser bundle stops the run here
    if tracker.reads_text and not args.no_text:
        text_code()  # a light install stops the run here
    if args.no_text and tracker.config.modalities == ("text",):
        raise InputError("--no-text: the model reads text only")
    if args.smoothing_frames is not None and args.smoothing_frames < 1:
        raise InputError(f"--smoothing-frames: expected at least 1, got {args.smoothing_frames}")


def _notes(args, tracker: StreamModel) -> list[str]:
    """Warnings for stderr about how the model's text is used."""
    if not tracker.reads_text or args.quiet:
        return []
    if args.no_text:
        if tracker.config.modality_dropout == 0:
            return [
                "note: --no-text: the model was trained without modality dropout; its "
                "outputs without text are outside what it learnt"
            ]
        return []
    notes = []
    if not tracker.info.decoding.causal_text:
        notes.append(
            "note: the model reads offline text (decoding.causal_text false: words at "
            "their recognised times, before the recogniser emitted them); segments and "
            "`emitted` are those of a replay, not of a live run"
        )
    trained = tracker.info.decoding.text_recogniser
    trained = "ctc" if trained in ("ctc", "ctc_posteriors") else "pocketsphinx"
    if args.asr in ("pocketsphinx", "ctc") and args.asr != trained:
        notes.append(
            f"note: the model was trained on {trained}'s words and this run gives it "
            f"--asr {args.asr}'s: their errors differ, and so may its scores "
            f"(--asr {trained} matches)"
        )
    return notes


def main(argv=None) -> int:
    """The command line (see the module docstring) -> the exit status."""
    listed = stream_cli.listed_devices(argv)
    if listed is not None:
        return listed
    args = parser().parse_intermixed_args(argv)  # files after options too (nargs="*")
    progress.quiet(args.quiet)
    compilation.enable_cache()
    try:
        stream_cli.shipped_model(args, models.CATALOGUE, "calls")
        args.inputs = stream_cli.stream_inputs_of(args, "calls")
        tracker = load(args.model, args.block_ms, args.backend)
        _check_text_arguments(args, tracker)
    except (BundleError, InputError) as err:
        stream_cli.print_error(err)
        return 2
    for note in _notes(args, tracker):
        print(note, file=sys.stderr)
    out = output(args.format, sys.stdout)
    out.header()
    return stream_cli.run_all(
        args.inputs,
        lambda name: run_input(name, tracker, args, out),
        args,
        INPUT_ERRORS,
        "segment(s)",
    )


if __name__ == "__main__":
    sys.exit(stream_cli.main_in_pipe(main))
