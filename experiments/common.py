"""Small pieces the experiment runners share: the command line (`main`: the flags
--config, --workdir and the multi-process ones, defined once here for every runner),
logging, training curves, configs mapped field for field onto the dataclasses they build
(`build`), the TFDS data folder of a config (`data_dir`), transfer ratios
(`transfer_ratio`), an experiment run in a second process (`Beside`), and variants of
a config with dotted fields set, each in a folder that remembers its config (`variant`,
`check_variant`: the studies' and the lever screen's sub-runs)."""

from __future__ import annotations

import copy
import importlib
import json
import math
import multiprocessing
import os
import sys
import threading
import time
import traceback

import jax
import ml_collections
from absl import app, flags
from absl import logging as absl_logging
from ml_collections import config_flags

from speechkit import accelerator, compilation, dataclass_json, errors, files


def logger(name: str):
    """A function printing `[name HH:MM:SS] message` to stderr (with the process index
    when several processes run)."""

    def log(message: str) -> None:
        process = f" p{jax.process_index()}" if jax.process_count() > 1 else ""
        stamp = time.strftime("%H:%M:%S")
        print(f"[{name}{process} {stamp}] {message}", file=sys.stderr, flush=True)

    return log


def define_distributed_flags():
    """--coordinator_address, --num_processes, --process_id (defaults: the environment
    variables JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID)."""
    env = os.environ
    return (
        flags.DEFINE_string(
            "coordinator_address",
            env.get("JAX_COORDINATOR_ADDRESS", ""),
            "host:port of process 0, for multi-process runs",
        ),
        flags.DEFINE_integer(
            "num_processes", int(env.get("JAX_NUM_PROCESSES", "1")), "processes in the run"
        ),
        flags.DEFINE_integer("process_id", int(env.get("JAX_PROCESS_ID", "0")), "this process"),
    )


def initialize_distributed(address: str, num_processes: int, process_id: int) -> None:
    """jax.distributed.initialize for a multi-process run (no-op for one process)."""
    if num_processes <= 1:
        return
    if not address:
        raise ValueError("--coordinator_address (or JAX_COORDINATOR_ADDRESS) is required")
    jax.distributed.initialize(address, num_processes=num_processes, process_id=process_id)


PRESETS = ("smoke", "quick", "full")

# The runners' flags, defined once (every runner reads these; a module imported by another
# runner defines none of its own).
CONFIG = config_flags.DEFINE_config_file(
    "config", None, "experiments/configs/<runner>.py:PRESET; any field can be overridden"
)
WORKDIR = flags.DEFINE_string("workdir", None, "output and checkpoint folder")
DISTRIBUTED = define_distributed_flags()


def data_dir(config) -> str:
    """`config.data_dir`, or TFDS's default folder when it is empty."""
    return os.path.expanduser(config.data_dir or "~/tensorflow_datasets")


def transfer_ratio(heldout, in_engine) -> float | None:
    """heldout / in_engine; None when either is missing or not finite, or the in-engine
    score is 0."""
    if heldout is None or in_engine is None:
        return None
    if not math.isfinite(heldout) or not math.isfinite(in_engine) or in_engine == 0:
        return None
    return float(heldout) / float(in_engine)


def check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise ValueError(f"preset: expected one of {PRESETS}, got {preset!r}")
    return preset


def _set_up_process() -> None:
    """What a runner's process does first: the project's XLA flags (before jax starts;
    logged when too late) and quiet orbax."""
    flags_set = accelerator.configure()
    if accelerator.with_flags(flags_set["xla_flags"]) != flags_set["xla_flags"]:
        logger("experiments")(
            "jax was initialised before cli_main: XLA_FLAGS left as they are "
            f"({flags_set['xla_flags']!r})"
        )
    absl_logging.set_verbosity(absl_logging.WARNING)  # orbax reports every save at INFO


def cli_main(run, config, workdir: str | None, distributed=None) -> None:
    """The runners' absl main: the project's XLA flags (run-to-run deterministic GPU
    kernels, `speechkit.accelerator.configure`, before jax starts), the persistent
    compilation cache (`speechkit.compilation`), quiet orbax, optional jax.distributed,
    then run(config, workdir), logging at the end what it compiled. A
    `speechkit.errors.InvalidInput` (a bad bundle, corpus, annotation, audio file...)
    ends the process with its message on one line and exit status 2, no traceback."""
    _set_up_process()
    if distributed is not None:
        initialize_distributed(*(flag.value for flag in distributed))
    if config is None or not workdir:
        raise app.UsageError("--config and --workdir are required")
    cache = compilation.enable_cache()
    log = logger("experiments")
    log(f"compiled programs cached in {cache}" if cache else "compilation cache off")
    with compilation.Counter() as counted:
        try:
            run(config, workdir)
        except errors.InvalidInput as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(errors.EXIT_USAGE)
    log(f"compilation: {counted.summary()}")


def main(run, *, distributed: bool = False) -> None:
    """A runner's command line: `run(config, workdir)` from --config and --workdir
    (`cli_main`), with the multi-process flags when `distributed`."""

    def absl_main(argv) -> None:
        del argv
        cli_main(run, CONFIG.value, WORKDIR.value, DISTRIBUTED if distributed else None)

    app.run(absl_main)


class Beside:
    """`module.function(config, workdir)` of an experiment module (named, e.g.
    "experiments.cskws"; `function` defaults to train_and_evaluate) in a second, spawned
    process, set up as `cli_main` sets up a
    runner (XLA flags, compilation cache, quiet orbax), while this process goes on. Its
    log lines and printed results reach this process's stderr and stdout.

    `result()` waits for it and returns (what the function returned, which must pickle;
    its seconds; `compilation.Counter.record()` of what it compiled), or raises the
    exception it raised (a `speechkit.errors.InvalidInput`
    included, so `cli_main` reports it as usual). Used as a context manager, leaving the
    block early (an error here) terminates it; it also ends itself when this process dies.
    The numbers do not depend on it: the child runs the same programs on the same data
    with the same seeds.
    """

    def __init__(self, module: str, config, workdir: str, function: str = "train_and_evaluate"):
        context = multiprocessing.get_context("spawn")  # never fork a process running XLA
        self._receive, send = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_beside_main,
            args=(send, module, function, config, workdir, os.getpid()),
            name=f"{module}.{function}",
        )
        self._process.start()
        send.close()

    def result(self) -> tuple[object, float, dict]:
        try:
            message = self._receive.recv()
        except EOFError:
            self._process.join()
            raise RuntimeError(
                f"{self._process.name} in its own process ended (exit status "
                f"{self._process.exitcode}) before it finished"
            ) from None
        self._process.join()
        if message[0] == "error":
            raise message[1]
        return message[1:]

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._receive.close()


def _end_with_parent(parent: int) -> None:
    """Ends this process (status 1) once the process that started it has gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _beside_main(connection, module: str, function: str, config, workdir, parent: int) -> None:
    threading.Thread(target=_end_with_parent, args=(parent,), daemon=True).start()
    _set_up_process()
    compilation.enable_cache()
    log = logger(module.rsplit(".", 1)[-1])
    started = time.perf_counter()
    try:
        with compilation.Counter() as counted:
            value = getattr(importlib.import_module(module), function)(config, workdir)
    except BaseException as err:  # noqa: BLE001 - sent to the parent, which raises it
        if not isinstance(err, errors.InvalidInput):
            err.add_note(f"in {module}'s own process:\n{traceback.format_exc()}")
        try:
            connection.send(("error", err))
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            connection.send(("error", RuntimeError(f"in {module}'s own process: {err!r}")))
        connection.close()
        sys.exit(1)
    log(f"compilation: {counted.summary()}")
    connection.send(("done", value, time.perf_counter() - started, counted.record()))
    connection.close()


def build(cls, section, where: str, **overrides):
    """`cls(**section, **overrides)`: a config section (a `ConfigDict` or a mapping) mapped
    field for field onto the dataclass `cls` by `speechkit.dataclass_json.from_dict`: each
    value converted by its field's type hint (lists or tuples become tuples; a field typed
    as a dataclass, or a tuple of them, is built from a mapping or a sequence of its fields
    in order), a missing field takes its default, and `overrides` are given as they are.
    A name that is not a field of `cls`, or a value of another type, raises an error naming
    `where` and the field."""
    values = section.to_dict() if hasattr(section, "to_dict") else dict(section or {})
    return dataclass_json.from_dict(
        cls, values, where, defaults=True, positional=True, overrides=overrides
    )


class Curves:
    """Training curves as `curves.jsonl` and as TensorBoard event files in `folder`.

    `tensorboard --logdir WORKDIR` shows every model's curves (one tag per fold)."""

    def __init__(self, folder: str, enabled: bool = True):
        self.enabled = enabled  # False: a process other than the writer
        if not enabled:
            return
        os.makedirs(folder, exist_ok=True)
        from tensorboardX import SummaryWriter  # here: benchmarks import this module without it

        self._lines = open(os.path.join(folder, "curves.jsonl"), "a")  # noqa: SIM115
        self._board = SummaryWriter(os.path.join(folder, "tensorboard"))

    def add(self, step: int, **values) -> None:
        """values: name -> float or list of floats (one per fold)."""
        if not self.enabled:
            return
        self._lines.write(json.dumps({"step": step, **values}) + "\n")
        self._lines.flush()
        for name, value in values.items():
            if isinstance(value, list):
                for fold, item in enumerate(value):
                    self._board.add_scalar(f"{name}/fold{fold}", item, step)
            else:
                self._board.add_scalar(name, value, step)
        self._board.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        self._lines.close()
        self._board.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ------------------------------------------------- variants of an experiment config


def variant(base: ml_collections.ConfigDict, overrides: dict) -> ml_collections.ConfigDict:
    """A copy of an experiment config with dotted fields set ("train.steps": 100)."""
    config = copy.deepcopy(base)
    for path, value in overrides.items():
        *parents, leaf = path.split(".")
        section = config
        for name in parents:
            section = section[name]
        if leaf not in section:
            raise ValueError(f"{path!r} is no field of the experiment config")
        section[leaf] = value
    return config


def _flat(tree, prefix: str = "") -> dict:
    """{dotted path: leaf} of nested dicts; tuples as lists (as JSON has them)."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix[:-1]: list(tree) if isinstance(tree, tuple) else tree}


def flat_fields(config: ml_collections.ConfigDict) -> dict:
    """{dotted field name: value} of an experiment config; tuples as lists."""
    return _flat(config.to_dict())


def check_variant(folder: str, config: ml_collections.ConfigDict) -> None:
    """Records a variant's config in folder/variant.json, or checks it against the one
    recorded: a variant folder trained with another config is an error naming the fields
    (its checkpoints and scores would be read back as if they were this config's)."""
    path = os.path.join(folder, "variant.json")
    wanted = json.loads(json.dumps(flat_fields(config)))
    recorded = files.read_json(path)
    if recorded is None:
        os.makedirs(folder, exist_ok=True)
        files.write_json(path, wanted)
        return
    changed = sorted(k for k in wanted.keys() | recorded.keys() if wanted.get(k) != recorded.get(k))
    if changed:
        raise ValueError(
            f"{folder}: trained with another config (fields {', '.join(changed)}); "
            "use another --workdir or delete that folder"
        )
