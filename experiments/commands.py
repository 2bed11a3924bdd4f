"""The user commands on the PATH (pyproject.toml's `[project.scripts]`), each the same as
its `python -m` module:

    stj-detect MODEL AUDIO...              python -m cskws_jax.detect
    stj-track MODEL CALL...                python -m multiqt_jax.track
    stj-export BUNDLE OUT_DIR              python -m cskws_jax.export or multiqt_jax.export,
                                           by the bundle's task (bundle.json's "task")
    stj-evaluate --bundle B --dataset D --workdir W     python -m experiments.evaluate
    stj-build-data --size quick --data-dir D            python -m experiments.build_data

One flag style: words joined by `-` (`--block-ms`, `--manual-dir`); evaluate and
build-data, whose modules spell their flags with `_`, take either. Exit statuses (all
five): 0 success; 1 one input of several was bad (the run goes on with `--keep-going`
and lists it); 2 bad arguments, or a model folder, export, config or corpus that cannot
be used (the error names the file and the field); detect and track also 130 at Ctrl-C
and 141 when the reader of their output goes away. The experiments' runners keep their
`--config.*` overrides (`python -m experiments.<runner>`). detect and track run export
folders in the light install (`.[infer]`); export, evaluate and build-data need the full
one and, without it, say so (exit status 2).
"""

from __future__ import annotations

import os
import sys

from speechkit import files

PREFIX = "stj-"
COMMANDS = {
    "stj-detect": "cskws_jax.detect",
    "stj-track": "multiqt_jax.track",
    "stj-export": "cskws_jax.export / multiqt_jax.export",
    "stj-evaluate": "experiments.evaluate",
    "stj-build-data": "experiments.build_data",
}
"""Command -> the module it runs."""
EXPORTS = {"cskws": "cskws_jax.export", "multiqt": "multiqt_jax.export"}


def detect() -> int:
    from cskws_jax import detect as command
    from speechkit import stream_cli

    return stream_cli.main_in_pipe(command.main)


def track() -> int:
    from multiqt_jax import track as command
    from speechkit import stream_cli

    return stream_cli.main_in_pipe(command.main)


EXPORT_USAGE = """usage: stj-export BUNDLE OUT_DIR [--block-outputs N] [--platforms cpu,cuda]

Exports a bundle's offline forward and streaming step (StableHLO and ONNX) and its front
end (ONNX) with the export of its task (bundle.json's "task"): python -m cskws_jax.export
or python -m multiqt_jax.export, whose --help lists every option.

Example: stj-export outputs/reproduce/cskws/afkws/bundle exported/
Exit status: 0 written; 2 a bad bundle or bad arguments."""


def export(argv=None) -> int:
    """`stj-export BUNDLE OUT_DIR [options]`: the export of the bundle's task."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "-h" in argv or "--help" in argv:
        print(EXPORT_USAGE)
        return 0
    positional = _positional(argv, valued={"--block-outputs", "--platforms"})
    if not positional:
        print(EXPORT_USAGE, file=sys.stderr)
        return 2
    task = _bundle_task(positional[0])
    if task is None:
        return 2
    import importlib

    return importlib.import_module(EXPORTS[task]).main(argv)


def _full_install_modules(command: str, *names: str) -> list | None:
    """The modules `names` imported, or None, with the install to use printed, when they
    need a package of the full install that this one lacks."""
    import importlib

    from speechkit.bundle import FULL_INSTALL

    try:
        return [importlib.import_module(name) for name in names]
    except ModuleNotFoundError as err:
        print(
            f"error: {command} needs {err.name or 'a package'}, which this install lacks (the "
            f"light install runs export folders with stj-detect and stj-track): {FULL_INSTALL}",
            file=sys.stderr,
        )
        return None


def _positional(argv, valued) -> list[str]:
    """The arguments that are not options or the values of the `valued` options."""
    found, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in valued:
            skip = True
        elif not arg.startswith("-"):
            found.append(arg)
    return found


def _bundle_task(path: str) -> str | None:
    """bundle.json's task, or None after printing why it cannot be read."""
    manifest = os.path.join(path, "bundle.json")
    if not os.path.lexists(manifest):
        print(f"error: {path}: no such bundle folder (no bundle.json)", file=sys.stderr)
        return None
    try:
        payload = files.load_json(manifest)
    except files.JsonFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return None
    task = payload.get("task") if isinstance(payload, dict) else None
    if task not in EXPORTS:
        print(f"error: {manifest}: task: {task!r} is not one of {sorted(EXPORTS)}", file=sys.stderr)
        return None
    return task


def snake_flags(argv, names=None) -> list[str]:
    """argv with `--a-b[=v]` spelled `--a_b[=v]` where `a_b` is one of `names` (the flags
    of a module that spells them with `_`; None: every flag); the rest as given."""
    converted = []
    for arg in argv:
        flag, equals, value = arg.partition("=")
        if flag.startswith("--") and "-" in flag[2:]:
            snake = flag[2:].replace("-", "_")
            if names is None or snake in names:
                arg = f"--{snake}{equals}{value}"
        converted.append(arg)
    return converted


EVALUATE_USAGE = """usage: stj-evaluate --bundle B --dataset D --workdir W [options]

Scores a trained bundle on a corpus with the experiments' own scoring, without
training; the task comes from the bundle (bundle.json's "task").

  --bundle       a bundle folder, or a folder of bundle-fold<k> (MultiQT)
  --dataset      TFDS name with config: folder_kws/shipped, annotated_calls/questions, ...
  --workdir      where results.json and the curves go
  --data-dir     TFDS data folder (default ~/tensorflow_datasets)
  --manual-dir   build the corpus from this folder of your recordings first
  --split        default: test (keyword corpus), train (call corpus)
  --keywords     shared (score the keywords both sides have) or strict
  --engines      keyword corpus: only the utterances these engines spoke (e.g. piper)
  --batch-size   utterances or calls per batch (16)
  --num-folds, --min-frames, --missing, --ctc-bundle   MultiQT options

Example: stj-evaluate --bundle=out/cskws/afkws/bundle --dataset=folder_kws/shipped \\
             --manual-dir=/data/my_keywords --workdir=/tmp/eval
Needs the full install. docs/usage.md has every option and what results.json holds.
Exit status: 0 scored; 2 a bad bundle, corpus or arguments."""


def evaluate() -> int:
    if {"-h", "--help"} & set(sys.argv[1:]):  # before any import: the light install too
        print(EVALUATE_USAGE)
        return 0
    loaded = _full_install_modules("stj-evaluate", "absl.app", "absl.flags", "experiments.evaluate")
    if loaded is None:
        return 2
    app, flags, command = loaded
    argv = [sys.argv[0], *snake_flags(sys.argv[1:], set(flags.FLAGS))]
    try:  # absl exits with 1 on a bad flag; the commands' status for bad arguments is 2
        flags.FLAGS(argv)
    except flags.Error as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    missing = [name for name in ("bundle", "dataset", "workdir") if not flags.FLAGS[name].value]
    if missing:
        print(f"error: --{', --'.join(missing)}: required (--help)", file=sys.stderr)
        return 2
    sys.argv = argv
    app.run(command.main)  # exits with command.main's status
    return 0


def build_data() -> int:
    loaded = _full_install_modules("stj-build-data", "experiments.build_data")
    if loaded is None:
        return 2
    return loaded[0].main(snake_flags(sys.argv[1:]))
