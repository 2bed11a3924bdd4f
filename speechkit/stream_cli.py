"""What the streaming command lines (`python -m cskws_jax.detect`, `python -m
multiqt_jax.track`) share beyond reading their inputs (`speechkit.stream_inputs`): their
options (`stream_parser`, `add_stream_arguments`, `add_shipped_argument`,
`add_run_arguments`; `--block-ms` and `--backend` checked against an export), their output
(`Output`: a table, JSON lines, CSV, an event list or an Audacity label track, a line as
each item is decided), the stream loop (`stream_items`: features that stop being finite
are refused at their time), the run over every input with a progress bar and
--keep-going (`run_all`), and a quiet end at a closed pipe or Ctrl-C (`main_in_pipe`).

    parse = stream_parser(command_name("cskws_jax.detect"), description, epilog, "input")
    add_stream_arguments(parse, "bundle or export folder", "audio", "detector")
    ...
    return run_all(stream_inputs_of(args, "audio"), run, args, INPUT_ERRORS, "detection(s)")
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
from collections.abc import Callable, Sequence

import numpy as np
import soundfile

from speechkit import errors, frontend, progress, stream_inputs
from speechkit.stream_inputs import AUDIO_SUFFIXES, MAX_BLOCK_MS, MIC, STDIN, InputError

FORMATS = ("table", "jsonl", "csv", "tsv", "audacity")
EVENT_HEADER = ("filename", "onset", "offset", "event_label")
"""The tsv format's columns: DCASE's event lists, as sed_eval / dcase_util read them."""
MICROPHONE = "arecord -q -f S16_LE -r 16000 -c 1 -t raw"  # raw 16 kHz PCM for `-`


def command_name(module: str) -> str:
    """How the user ran the command: its name on the PATH (`stj-detect`) when run so,
    else `python -m <module>`; for usage lines and examples."""
    name = os.path.basename(sys.argv[0] or "")
    return name if name.startswith("stj-") else f"python -m {module}"


def stream_parser(prog: str, description: str, epilog: str, unit: str) -> argparse.ArgumentParser:
    """The parser of a streaming command line; its epilog `epilog`, then a line on the
    exit statuses (`unit`: what one input is, "input" or "call")."""
    return argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=f"{epilog}\nExit status: 0 every {unit} used; 1 one was bad (--keep-going: "
        "skipped); 2 bad model or arguments; 130 Ctrl-C; 141 closed output.\nEvery option: "
        "docs/usage.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def number(low: float, high: float = math.inf, *, above: bool = False, integer: bool = False):
    """An argparse `type`: a finite number in [low, high] ((low, high] with `above`);
    anything else (nan, inf, out of range, not a number) is a usage error naming the
    value and the range, exit status 2."""
    opening = "(" if above else "["
    closing = "]" if math.isfinite(high) else ")"
    expected = (
        f"{'an integer' if integer else 'a finite number'} in {opening}{low:g}, {high:g}{closing}"
    )

    def parse(text: str):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}") from None
        if not math.isfinite(value) or value < low or (above and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value

    parse.__name__ = "number"  # argparse names the type in its messages
    return parse


def add_stream_arguments(
    parse: argparse.ArgumentParser, model_help: str, inputs: str, step: str
) -> None:
    """The model and inputs (positional, the inputs named `inputs`), --format,
    --block-ms (help naming what steps: `step`), --realtime, --mic, --list-devices and
    --backend (`stream_inputs_of` checks the inputs against --mic)."""
    parse.add_argument("model", nargs="?", help=model_help)  # or --model: `shipped_model`
    parse.add_argument(
        inputs,
        nargs="*",
        help="audio files (wav, flac, ogg, opus, mp3), folders, or - (raw 16-bit PCM, stdin)",
    )
    parse.add_argument("--format", choices=FORMATS, default="table", help="output format")
    parse.add_argument(
        "--block-ms",
        type=number(0, MAX_BLOCK_MS, above=True),
        default=None,
        metavar="MS",
        help=f"audio per {step} step (default 200; an export's own)",
    )
    parse.add_argument(
        "--realtime", action="store_true", help="feed files at the pace of a live stream"
    )
    parse.add_argument(
        "--mic",
        nargs="?",
        const="",
        default=None,
        metavar="DEVICE",
        help="record a microphone (default device, or an index or name) until Ctrl-C",
    )
    parse.add_argument(
        "--list-devices", action="store_true", help="list the audio devices --mic can use"
    )
    parse.add_argument(
        "--backend",
        choices=("jax", "onnx"),
        default="jax",
        help="runs an export: jax (StableHLO, the default) or onnx (onnxruntime)",
    )


def listed_devices(argv) -> int | None:
    """With `--list-devices` among `argv` (None: the command line's): the devices
    printed, then the exit status (0, or 2 without sounddevice / PortAudio); else None."""
    argv = sys.argv[1:] if argv is None else argv
    if "--list-devices" not in argv:
        return None
    try:
        print(stream_inputs.list_devices())
    except InputError as err:
        print_error(err)
        return 2
    return 0


def add_shipped_argument(parse: argparse.ArgumentParser, catalogue) -> None:
    """--model NAME: a model of `catalogue` (`speechkit.shipped.Catalogue`) instead of a
    MODEL folder (`shipped_model` resolves it)."""
    parse.add_argument(
        "--model",
        dest="shipped",
        metavar="NAME",
        help=f"a shipped model instead of MODEL: {', '.join(catalogue.names()) or 'none yet'}",
    )


def shipped_model(args, catalogue, inputs: str) -> None:
    """With --model NAME, MODEL becomes the shipped model's folder (its bundle, or its
    export where --backend is onnx or the model code is missing: the light install,
    `speechkit.shipped.Catalogue.runnable`) and a MODEL given is the first of `inputs`;
    without it, no MODEL is an InputError naming the shipped models. An unknown NAME is
    an InputError that lists them."""
    if args.shipped is None:
        shipped = f"--model NAME ({', '.join(catalogue.names()) or 'none'})"
        if args.model is None:
            raise InputError(
                f"no MODEL: name a bundle or export folder, or a shipped model with {shipped}"
            )
        if args.model == STDIN or (
            args.model.lower().endswith(AUDIO_SUFFIXES) and not os.path.isdir(args.model)
        ):
            raise InputError(
                f"{args.model}: {inputs} where MODEL goes: name a bundle or export folder first, "
                f"or a shipped model with {shipped}"
            )
        return
    try:
        folder = catalogue.runnable(args.shipped, args.backend)
    except ValueError as err:
        raise InputError(f"--model: {err}") from None
    if args.model is not None:
        setattr(args, inputs, [args.model, *getattr(args, inputs)])
    args.model = folder


def stream_inputs_of(args, inputs: str) -> list:
    """The inputs to run: `[MIC]` with --mic (an InputError when files are named too),
    else the named ones expanded (`expand_paths`; an InputError when there are none, or
    when an Audacity label track would hold several)."""
    named = getattr(args, inputs)
    if args.mic is not None:
        if named:
            raise InputError(f"--mic: records from a device; do not name {inputs} files too")
        stream_inputs._sounddevice()  # what to install, before the model loads
        return [MIC]
    if not named:
        raise InputError(f"no {inputs}: name files, folders or - (standard input), or use --mic")
    expanded = list(stream_inputs.expand_paths(named))
    if args.format == "audacity" and len(expanded) > 1:
        raise InputError(
            f"--format audacity: a label track holds one input, got {len(expanded)}; run one "
            "at a time, or use --format tsv (a file column)"
        )
    return expanded


def add_run_arguments(parse: argparse.ArgumentParser, units: str, quiet_help: str) -> None:
    """--keep-going (skipping bad `units`) and --quiet."""
    parse.add_argument(
        "--keep-going", action="store_true", help=f"skip bad {units} (listed at the end)"
    )
    parse.add_argument("--quiet", action="store_true", help=quiet_help)


def block_outputs(block_ms: float, hop_s: float) -> int:
    """Output frames per block for `--block-ms` (a whole number of output hops of
    `hop_s` seconds)."""
    count = block_ms / (hop_s * 1000)
    if count < 1 or not math.isclose(count, round(count), abs_tol=1e-6):
        raise InputError(
            f"--block-ms: {block_ms:g} ms is not a whole number of the model's {hop_s * 1000:g} ms "
            "output hops"
        )
    return round(count)


def check_export_block(path, hop_s: float, outputs: int, block_ms: float | None) -> None:
    """An InputError unless `block_ms` is None or the block of `outputs` output frames of
    `hop_s` seconds that the step exported in `path` takes (fixed when exporting)."""
    wanted = None if block_ms is None else block_outputs(block_ms, hop_s)
    if wanted is not None and wanted != outputs:
        raise InputError(
            f"--block-ms: {block_ms:g} ms; the step exported in {path} takes blocks of "
            f"{outputs * hop_s * 1000:g} ms (export again with --block-outputs {wanted} for "
            f"{block_ms:g} ms blocks)"
        )


def require_export(path, backend: str, task: str) -> None:
    """An InputError for `--backend` other than jax on a bundle folder `path` of `task`'s
    (only export folders run elsewhere)."""
    if backend != "jax":
        raise InputError(
            f"--backend {backend}: {path} is a bundle; export it first (python -m "
            f"{task}_jax.export {path} OUT_DIR) and run OUT_DIR"
        )


class Output:
    """Writes items (dataclasses) to a text stream as a table, JSON lines, CSV, an event
    list (tsv) or an Audacity label track, a line as soon as an item is decided (the
    stream is flushed). A row is the input's name (`file`) and the item's fields, those
    in `rounded` to 6 decimals, in the order of `fields`; the table has the line
    `header`, then `table_line(name, item)` each. The events name an item's fields
    `event` (start, end, label): tsv writes `EVENT_HEADER`, then file, onset, offset and
    label per row, tab-separated; audacity writes start, end and label per row (no file:
    one input per label track)."""

    def __init__(
        self,
        form: str,
        stream,
        fields: Sequence[str],
        rounded: Sequence[str],
        header: str,
        table_line: Callable[[str, object], str],
        event: Sequence[str] = ("start", "end", "label"),
    ):
        self.form, self.stream, self.fields, self.rounded = form, stream, tuple(fields), rounded
        self.table_header, self.table_line, self.event = header, table_line, tuple(event)
        tabs = form in ("tsv", "audacity")
        self._csv = (
            csv.writer(stream, lineterminator="\n", delimiter="\t" if tabs else ",")
            if form in ("csv", "tsv", "audacity")
            else None
        )

    def header(self) -> None:
        if self.form == "table":
            self._line(self.table_header)
        elif self.form in ("csv", "tsv"):
            self._csv.writerow(self.fields if self.form == "csv" else EVENT_HEADER)
            self.stream.flush()

    def write(self, name: str, item) -> None:
        """One row; in a table, CSV, tsv and audacity, control characters of the name and
        of text fields (a newline, an ANSI escape) are printed escaped, so that no row
        can forge another or reach the terminal (JSON lines escape them)."""
        row = {"file": name, **dataclasses.asdict(item)}
        for key in self.rounded:
            row[key] = round(row[key], 6)
        start, end, label = (row[key] for key in self.event)
        if self.form == "jsonl":
            self._line(json.dumps({key: row[key] for key in self.fields}))
        elif self.form in ("csv", "tsv", "audacity"):
            row = {key: printable(v) if isinstance(v, str) else v for key, v in row.items()}
            name, label = row["file"], row[self.event[2]]
            values = {
                "csv": [row[key] for key in self.fields],
                "tsv": [name, f"{start:.6f}", f"{end:.6f}", label],
                "audacity": [f"{start:.6f}", f"{end:.6f}", label],
            }
            self._csv.writerow(values[self.form])
            self.stream.flush()
        else:
            text = {key: printable(value) for key, value in row.items() if isinstance(value, str)}
            text.pop("file")
            self._line(self.table_line(printable(name), dataclasses.replace(item, **text)))

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


def print_error(err: Exception) -> None:
    """`error: <err>` on standard error, its control characters escaped (`printable`):
    a file name cannot clear the terminal or forge a line."""
    print(f"error: {printable(str(err))}", file=sys.stderr)


def printable(text: str) -> str:
    """`text` with every non-printable character (newline, escape, other controls) as
    its Python escape, e.g. `\\n`, `\\x1b`."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def padded_block(frames: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The last frames of a stream, float32 [n <= size, F] -> (block float32 [size, F]
    padded with zero frames, mask bool [size]: True on the real ones)."""
    block = np.zeros((size, frames.shape[1]), np.float32)
    block[: len(frames)] = frames
    return block, np.arange(size) < len(frames)


def stream_items(chunks, features: frontend.FeatureStream, stream, emit) -> int:
    """Streams sample chunks through the front end (`features`) and `stream` (its
    `push(frames)` and `close()` return the items they decide), calling `emit` with
    each item as it is decided; returns the number of items. Non-finite features (a
    finite sample too large for float32 arithmetic) are an InputError naming the input
    (`chunks.name`, when it has one) and their time."""
    count = done = 0
    for chunk in chunks:
        frames = features.push(chunk)
        bad = ~np.isfinite(frames).all(axis=1)
        if bad.any():
            name = getattr(chunks, "name", "input")
            at = (done + int(np.argmax(bad))) * features.config.hop_s
            raise InputError(
                f"{name}: non-finite features from {at:.3f} s (samples too large? peak so far "
                f"{getattr(chunks, 'peak', float('nan')):.3g})"
            )
        done += len(frames)
        for item in stream.push(frames):
            emit(item)
            count += 1
    for item in stream.close():
        emit(item)
        count += 1
    return count


def run_inputs(
    inputs: list, run: Callable[[str], tuple[int, float]], args, errors, units: str
) -> list[str]:
    """`run(input) -> (count, seconds of audio)` for every input in turn, with a bar in
    seconds of audio on stderr (per file as its chunks are read, the total and the time
    left when every input's duration is known from its header), and a line per input
    when there are several (`count` of `units`, e.g. "detection(s)"), unless
    `args.quiet`. Returns what was wrong with the bad ones (`errors`); without
    `args.keep_going` the first bad one's error is raised."""
    skipped = []
    several = len(inputs) > 1 and not args.quiet
    lengths = [audio_seconds(item) for item in inputs]
    total = None if None in lengths else round(sum(lengths), 1)
    with progress.bar(total, "audio", "s", shown=not args.quiet) as shown:
        for number, (item, length) in enumerate(zip(inputs, lengths, strict=True), start=1):
            shown.set_description_str(f"[{number}/{len(inputs)}] {printable(str(item))[-40:]}")
            started, before = time.perf_counter(), shown.n
            advancing = stream_inputs._ADVANCE.set(lambda seconds: shown.update(round(seconds, 3)))
            try:
                if isinstance(item, InputError):
                    raise item
                count, seconds = run(item)
            except errors as err:
                if not args.keep_going:
                    raise
                skipped.append(str(err))
                continue
            finally:
                stream_inputs._ADVANCE.reset(advancing)
                if length is not None:  # a file that stopped early counts whole
                    shown.update(round(before + length - shown.n, 3))
            if several:
                shown.write(
                    f"[{number}/{len(inputs)}] {printable(item)}: {count} {units} in "
                    f"{seconds:.1f} s of audio ({time.perf_counter() - started:.1f} s)",
                    file=sys.stderr,
                )
    return skipped


def audio_seconds(item) -> float | None:
    """A file input's duration from its header; None for standard input, the
    microphone, an error and anything that is not a regular file (a FIFO would block)."""
    if not isinstance(item, str) or item in (STDIN, MIC) or not os.path.isfile(item):
        return None
    try:
        return float(soundfile.info(item).duration)
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError):
        return None


def run_all(inputs: list, run: Callable[[str], tuple[int, float]], args, errors, units) -> int:
    """`run_inputs`, its errors and skipped inputs reported on stderr -> the exit status
    (1 when an input was bad, else 0)."""
    try:
        skipped = run_inputs(inputs, run, args, errors, units)
    except errors as err:
        print_error(err)
        return 1
    if skipped:
        print(f"skipped {len(skipped)} input(s):", file=sys.stderr)
        for reason in skipped:
            print(f"  {printable(reason)}", file=sys.stderr)
    return 1 if skipped else 0


def main_in_pipe(main: Callable[[], int]) -> int:
    """`main()`, ending quietly when the reader of standard output goes away (`| head`:
    exit status 141) and with one line at Ctrl-C (130), never a traceback."""
    try:
        return main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return errors.EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return errors.EXIT_INTERRUPTED
