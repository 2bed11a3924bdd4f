"""The device check: on a machine with a CUDA (or TPU) jax, one command of < 9 minutes.

    make gpu-check                                    # python3 -m benchmarks.gpu_check
    python3 -m benchmarks.gpu_check --allow-cpu --quick --json /tmp/gpu-cpu.json  # rehearsal

It needs no .venv and no package registry: the machine's own packages, and the wheels of
`.whl/` for what it lacks (`benchmarks.gpu_wheels`). One subprocess at a time (only one
process holds the accelerator), it describes the machine, runs the accelerator-relevant
tests (`benchmarks.junit` reads their results), measures the streaming contract, checks
that training is deterministic and runs `benchmarks.train` and `benchmarks.streaming`
with the time left (`--budget_s`); docs/gpu.md ("The device check") describes each phase.
Writes benchmarks/results/gpu-<device kind>.json (`--json`); exits 0 when ok, 1
otherwise, 2 when jax has no accelerator and `--allow-cpu` is not given.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import common, gpu_wheels, junit
from speechkit import accelerator, files  # light: imports jax, starts no backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# two pytest processes side by side (about equal time on CPU)
TEST_GROUPS = (
    (
        "tests/multiqt_jax/test_model.py",
        "tests/cskws_jax/test_model.py",
        "tests/cskws_jax/test_streaming.py",
        "tests/cskws_jax/test_targets_losses_decode.py",
        "tests/ctc_jax/test_model.py",
        "tests/benchmarks/test_gpu_check.py",
    ),
    ("tests/metrics",),
)
QUICK_TESTS = ("tests/cskws_jax/test_streaming.py", "tests/benchmarks/test_gpu_check.py")
# what the check's phases import: each loads with gpu_wheels.MACHINE_PACKAGES and the
# wheels alone (test_gpu_check.py)
CHECKED_MODULES = (
    "multiqt_jax.model",
    "multiqt_jax.train",
    "cskws_jax.model",
    "cskws_jax.streaming",
    "cskws_jax.train",
    "ctc_jax.model",
    "ctc_jax.train",
    "ctc_jax.bundle",
    "experiments.folds",
    "benchmarks.train",
    "benchmarks.streaming",
)
CONTRACT_TOLERANCE = 1e-5
HEADS = ("heatmap", "length", "offset")
# seconds each later phase keeps for itself while an earlier one runs
RESERVE = {"contract": 40, "determinism": 100, "train": 60, "streaming": 60}
# the check's phases in order (--phases), and the reserves of each
PHASES = {
    "tests": (),
    "contract": ("contract",),
    "determinism": ("determinism",),
    "benchmarks": ("train", "streaming"),
}
CAPS = {"tests": 240, "contract": 90, "training_run": 75, "train": 150}


def log(message: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- subprocesses -------------------------------------------------------------------------


def child_env(target: str | None, deterministic: bool = True) -> dict:
    """The environment of every phase: unpacked wheels and the repository first on the
    path; the project's XLA flags unless `deterministic` is False."""
    env = dict(os.environ)
    paths = [p for p in (target, ROOT, env.get("PYTHONPATH")) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    flags = env.get("XLA_FLAGS", "")
    env["XLA_FLAGS"] = accelerator.with_flags(flags) if deterministic else flags
    return env


def run_together(commands: list[list[str]], env: dict, timeout_s: float) -> list[dict]:
    """Runs commands side by side; per command {"rc" (None: killed at `timeout_s`),
    "seconds", "tail" (the end of its output)}."""
    started = time.perf_counter()
    with contextlib.ExitStack() as files:
        logs = [files.enter_context(tempfile.TemporaryFile()) for _ in commands]
        processes = [
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
            for command, out in zip(commands, logs, strict=True)
        ]
        return [
            _finish(process, out, started, timeout_s)
            for process, out in zip(processes, logs, strict=True)
        ]


def _finish(process, out, started: float, timeout_s: float) -> dict:
    """Waits for `process` until `timeout_s` after `started` (then kills it)."""
    try:
        process.wait(timeout=max(timeout_s - (time.perf_counter() - started), 1))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    out.seek(0)
    text = out.read().decode("utf-8", "replace")
    rc = None if process.returncode == -9 else process.returncode
    return {"rc": rc, "seconds": round(time.perf_counter() - started, 1), "tail": text[-4000:]}


def run(command: list[str], env: dict, timeout_s: float) -> dict:
    """One command: `run_together`'s record of it."""
    return run_together([command], env, timeout_s)[0]


def worker(name: str, out: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.gpu_check", "--worker", name, "--out", out, *extra]


# -- workers (each in its own process) ----------------------------------------------------


def describe_worker() -> dict:
    """The machine, and whether the project's models import."""
    machine = common.machine()
    import cskws_jax.model  # noqa: F401
    import multiqt_jax.model  # noqa: F401

    return machine


def multiqt_contract(fusion: str, modalities: tuple, precision: str, seconds: float) -> float:
    """max |stream - offline| of a default-size MultiQT over a random stream, 40 ms blocks."""
    import jax
    import numpy as np

    from multiqt_jax import model
    from speechkit import streaming

    config = model.MultiQTConfig(
        num_classes=7, fusion=fusion, modalities=modalities, precision=precision
    )
    rng = np.random.default_rng(0)
    frames = int(seconds * 100) // 4 * 4
    audio = rng.normal(size=(2, frames, 40)).astype(np.float32)
    text = rng.random((2, frames // 2, 29)).astype(np.float32)
    net = model.MultiQT(config)
    params = net.init(jax.random.key(0), {"audio": audio[:, :40], "text": text[:, :20]})
    inputs = {"audio": audio, "text": text}
    offline = jax.jit(net.apply)(params, inputs)[0]["logits"]
    streamed = streaming.BlockRunner.for_model(net, params).run(inputs)[0]["logits"]
    return float(np.max(np.abs(np.asarray(streamed) - np.asarray(offline))))


def afkws_contract(precision: str, seconds: float) -> dict:
    """A default-size AF-KWS over a random stream: max |stream - offline| of the heads
    (step by step, 40 ms blocks) and streamed vs offline detections."""
    import jax
    import numpy as np

    from benchmarks.streaming import _compare_detections
    from cskws_jax import decode, model
    from cskws_jax.streaming import StreamDetector
    from speechkit import streaming

    config = model.AfKwsConfig(precision=precision)
    stride = config.output_stride
    rng = np.random.default_rng(0)
    frames = int(seconds * 100) // stride * stride
    features = rng.normal(size=(1, frames, 64)).astype(np.float32)
    net = model.AfKws(config)
    params = net.init(jax.random.key(0), {"audio": features[:, :400]})
    whole, mask = jax.jit(net.apply)(params, {"audio": features})
    heads, _ = streaming.BlockRunner.for_model(net, params).run({"audio": features})
    result = {}
    for key in HEADS:
        difference = np.abs(np.asarray(heads[key]) - np.asarray(whole[key]))
        result[f"{key}_max_abs_stream_minus_offline"] = float(difference.max())
    hop = model.streaming_spec(config).output_hop_s
    offline = decode.decode(whole, mask, num_keywords=20, hop_s=hop, max_detections=4096)
    found, _ = StreamDetector(net, params).detect(features, max_detections=4096)
    result.update(_compare_detections(offline, found))
    return result


def ctc_contract(config_name: str, precision: str, seconds: float) -> float:
    """max |stream - offline| of the CTC recogniser's logits (`ctc_jax.model`'s
    default or FULL config) over a random stream, 40 ms blocks."""
    import dataclasses

    import jax
    import numpy as np

    from ctc_jax import model
    from speechkit import streaming

    base = model.FULL if config_name == "full" else model.CtcConfig()
    net = model.CtcRecogniser(dataclasses.replace(base, precision=precision))
    rng = np.random.default_rng(0)
    audio = rng.normal(size=(2, int(seconds * 100) // 4 * 4, 40)).astype(np.float32)
    params = net.init(jax.random.key(0), {"audio": audio[:, :40]})
    offline = jax.jit(net.apply)(params, {"audio": audio})[0]["logits"]
    streamed = streaming.BlockRunner.for_model(net, params).run({"audio": audio})[0]["logits"]
    return float(np.max(np.abs(np.asarray(streamed) - np.asarray(offline))))


MULTIQT_VARIANTS = {
    "audio+text-concat": ("concat", ("audio", "text")),
    "audio+text-sum": ("sum", ("audio", "text")),
    "audio+text-gated": ("gated", ("audio", "text")),
    "audio+text-tensor": ("tensor", ("audio", "text")),
    "audio": ("concat", ("audio",)),
    "text": ("concat", ("text",)),
}


def contract_worker(quick: bool) -> dict:
    """The streaming contract's differences at "highest" and at JAX's "default"."""
    seconds = 2.0 if quick else 8.0
    variants = ["audio+text-concat"] if quick else list(MULTIQT_VARIANTS)
    recognisers = ["default"] if quick else ["default", "full"]
    result = {"stream_seconds": seconds, "multiqt": {}, "afkws": {}, "ctc": {}}
    for precision in ("highest", "default"):
        for name in variants:
            fusion, modalities = MULTIQT_VARIANTS[name]
            difference = multiqt_contract(fusion, modalities, precision, seconds)
            result["multiqt"].setdefault(name, {})[precision] = difference
        result["afkws"][precision] = afkws_contract(precision, seconds)
        for name in recognisers:
            result["ctc"].setdefault(name, {})[precision] = ctc_contract(name, precision, seconds)
    return result


def _digest(tree) -> str:
    """sha256 of every leaf's bytes, in tree order."""
    import jax
    import numpy as np

    digest = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(tree):
        digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return digest.hexdigest()


def _train_multiqt_folds(steps: int, seconds: float, rng) -> tuple[list, object]:
    """5 default MultiQT folds trained in one fold-parallel step (the experiments' loop
    for the backend) on seeded random batches of 4 x `seconds`: (losses [steps][folds],
    parameters of every fold)."""
    import jax
    import numpy as np

    from benchmarks.train import multiqt_batch
    from experiments import folds
    from multiqt_jax import model as mq_model
    from multiqt_jax import train as mq_train
    from speechkit.optim import OptimizerConfig, TrainState

    net = mq_model.MultiQT(mq_model.MultiQTConfig(num_classes=7))
    mesh = folds.fold_mesh()
    slots = folds.fold_slots(5, mesh)
    first = multiqt_batch(rng, batch=4, seconds=seconds)

    def init(key):
        params = net.init(key, mq_train.model_inputs(first, rows=1))
        return TrainState.create(params, OptimizerConfig(warmup_steps=1))

    def one_fold(state, batch, key):
        return mq_train.train_step(net, state, batch, jax.random.wrap_key_data(key))

    keys = jax.random.split(jax.random.key(0), slots)
    states = folds.to_global(
        jax.tree_util.tree_map(np.asarray, jax.jit(jax.vmap(init))(keys)), mesh
    )
    step = folds.fold_parallel(one_fold, mesh, form=folds.default_form())
    losses = []
    for index in range(steps):
        batches = folds.stack([multiqt_batch(rng, batch=4, seconds=seconds) for _ in range(slots)])
        keys = np.stack(
            [jax.random.key_data(jax.random.key(100 * index + s)) for s in range(slots)]
        )
        states, stats = step(
            states, folds.to_global(batches, mesh), folds.to_global(np.asarray(keys), mesh)
        )
        losses.append(np.asarray(folds.gather(stats)["loss"], np.float32).tolist())
    return losses, folds.gather(states.params)


def _train_afkws(steps: int, rng) -> tuple[list, object]:
    """The default AF-KWS trained on seeded random batches of 8 x 2 s: (losses, params)."""
    import functools

    import jax
    import numpy as np

    from benchmarks.train import kws_batch
    from cskws_jax import model as kws_model
    from cskws_jax import train as kws_train
    from speechkit.optim import OptimizerConfig

    net = kws_model.AfKws(kws_model.AfKwsConfig())
    batch = kws_batch(rng, batch=8, seconds=2.0)
    state = kws_train.create_train_state(
        net, OptimizerConfig(warmup_steps=1), jax.random.key(0), batch
    )
    step = jax.jit(functools.partial(kws_train.train_step, net, kws_train.AugmentConfig()))
    losses = []
    for index in range(steps):
        state, stats = step(state, kws_batch(rng, batch=8, seconds=2.0), jax.random.key(index))
        losses.append(float(np.float32(stats["loss"])))
    return losses, state.params


def _bits(values) -> list:
    """float32 bit patterns of (nested lists of) losses, as decimal strings."""
    import numpy as np

    return np.asarray(values, np.float32).view(np.uint32).astype(str).tolist()


def training_worker(quick: bool, deterministic: bool) -> dict:
    """Trains 5 MultiQT folds and one AF-KWS model (see above); returns the digests of
    the parameters, the losses (and their float32 bit patterns) and the XLA flags."""
    if deterministic:
        accelerator.configure()
    import jax
    import numpy as np

    steps, seconds = (2, 2.0) if quick else (10, 10.0)
    rng = np.random.default_rng(0)
    multiqt_losses, multiqt_params = _train_multiqt_folds(steps, seconds, rng)
    afkws_losses, afkws_params = _train_afkws(steps, rng)
    return {
        "steps": steps,
        "multiqt_params_sha256": _digest(multiqt_params),
        "multiqt_losses_bits": _bits(multiqt_losses),
        "multiqt_losses": multiqt_losses,
        "afkws_params_sha256": _digest(afkws_params),
        "afkws_losses_bits": _bits(afkws_losses),
        "afkws_losses": afkws_losses,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "backend": jax.default_backend(),
    }


def compare_runs(first: dict | None, second: dict | None) -> dict:
    """Whether two training runs are bit-identical, and if not, what differs."""
    if first is None or second is None:
        return {"identical": None, "differences": ["a run did not finish"]}
    keys = (
        "multiqt_params_sha256",
        "multiqt_losses_bits",
        "afkws_params_sha256",
        "afkws_losses_bits",
    )
    differences = [key for key in keys if first.get(key) != second.get(key)]
    result = {"identical": not differences, "differences": differences}
    for name in ("multiqt", "afkws"):
        a, b = first.get(f"{name}_losses"), second.get(f"{name}_losses")
        if a is not None and b is not None and a != b:
            result[f"{name}_max_abs_loss_difference"] = _max_difference(a, b)
    return result


def _max_difference(a, b) -> float:
    flat_a, flat_b = _flatten(a), _flatten(b)
    return max((abs(x - y) for x, y in zip(flat_a, flat_b, strict=False)), default=0.0)


def _flatten(values) -> list[float]:
    if isinstance(values, list):
        return [item for value in values for item in _flatten(value)]
    return [float(values)]


WORKERS = {
    "describe": lambda args: describe_worker(),
    "contract": lambda args: contract_worker(args.quick),
    "training": lambda args: training_worker(args.quick, not args.no_deterministic),
}


# -- the check ----------------------------------------------------------------------------


class Clock:
    """The check's time budget: seconds left, and a phase's share of them. With only
    some `phases` run, the others reserve nothing and the caps are lifted (a phase run
    on its own may take the budget)."""

    def __init__(self, budget_s: float, phases=tuple(PHASES)):
        self.deadline = time.perf_counter() + budget_s
        self.reserved = {name for phase in phases for name in PHASES[phase]}
        self.capped = set(phases) == set(PHASES)

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def allow(self, cap: float, *later: str) -> float:
        """At most `cap` seconds, leaving the later phases their reserve."""
        reserve = sum(RESERVE[name] for name in later if name in self.reserved)
        return max(min(cap if self.capped else math.inf, self.left() - reserve), 10.0)


def contract_summary(contract: dict | None) -> dict:
    """The largest differences at "highest" and at "default", and whether the contract
    holds: MultiQT and CTC logits and AF-KWS heads within 1e-5 at "highest". Detections found on
    one side only are reported, not judged: a peak may flip where two neighbouring
    frames' scores are within float rounding of each other."""
    if not contract:
        return {"holds": None}
    highest = [v["highest"] for v in contract["multiqt"].values()]
    default = [v["default"] for v in contract["multiqt"].values()]
    ctc = list(contract.get("ctc", {}).values())
    ctc_max = {p: max((v[p] for v in ctc), default=0.0) for p in ("highest", "default")}
    kws = {p: contract["afkws"][p] for p in ("highest", "default")}
    heads = {p: max(kws[p][f"{h}_max_abs_stream_minus_offline"] for h in HEADS) for p in kws}
    return {
        "multiqt_max_at_highest": max(highest),
        "multiqt_max_at_default": max(default),
        "afkws_heads_max_at_highest": heads["highest"],
        "afkws_heads_max_at_default": heads["default"],
        "ctc_max_at_highest": ctc_max["highest"],
        "ctc_max_at_default": ctc_max["default"],
        "afkws_unmatched_detections": {
            p: kws[p]["only_offline"] + kws[p]["only_streamed"] for p in kws
        },
        "holds": max(max(highest), heads["highest"], ctc_max["highest"]) <= CONTRACT_TOLERANCE,
    }


def streaming_summary(payload: dict | None) -> list[dict]:
    """One row per model and block: RTF, latency, real-time streams per device."""
    rows = []
    for name in ("multiqt", "afkws"):
        for block in (payload or {}).get(name, {}).get("blocks", []):
            rows.append(
                {
                    "model": name,
                    **{
                        key: block.get(key)
                        for key in (
                            "block_ms",
                            "rtf",
                            "latency_median_ms",
                            "latency_p99_ms",
                            "max_abs_stream_minus_offline",
                            "realtime_streams_per_device",
                            "lower_bound",
                            "stopped_by",
                        )
                    },
                }
            )
    return rows


def phase_tests(report: dict, env: dict, clock: Clock, quick: bool, scratch: str) -> None:
    """The test groups side by side (no memory preallocation: they share the device)."""
    groups = [QUICK_TESTS] if quick else TEST_GROUPS
    junits = [os.path.join(scratch, f"junit{index}.xml") for index in range(len(groups))]
    commands = [
        [sys.executable, "-m", "pytest", "--noconftest", "-q", "-p", "no:cacheprovider"]
        + [f"--junitxml={path}", *group]
        for group, path in zip(groups, junits, strict=True)
    ]
    shared = {**env, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    outcomes = run_together(commands, shared, clock.allow(CAPS["tests"], *RESERVE))
    report["tests"] = {
        **junit.total([junit.summary(path) for path in junits]),
        "rc": max((o["rc"] if o["rc"] is not None else 124) for o in outcomes),
        "seconds": max(o["seconds"] for o in outcomes),
    }
    tails = [o["tail"][-2000:] for o in outcomes if o["rc"] != 0]
    if tails:
        report["tests"]["tail"] = "\n".join(tails)
    log(f"tests: {json.dumps({k: v for k, v in report['tests'].items() if k != 'tail'})}")


def phase_worker(name: str, env: dict, timeout_s: float, scratch: str, *extra: str, tag=""):
    """Runs a worker; (its JSON or None, the run's record)."""
    out = os.path.join(scratch, f"{name}{tag}.json")
    outcome = run(worker(name, out, *extra), env, timeout_s)
    return files.read_json(out), outcome


def phase_contract(report: dict, env: dict, clock: Clock, quick: bool, scratch: str) -> None:
    timeout = clock.allow(CAPS["contract"], "determinism", "train", "streaming")
    extra = ("--quick",) if quick else ()
    contract, outcome = phase_worker("contract", env, timeout, scratch, *extra)
    report["contract"] = {**contract_summary(contract), "differences": contract}
    if contract is None:
        report["contract"]["tail"] = outcome["tail"][-2500:]
    log(f"contract: {json.dumps(contract_summary(contract))}")


def phase_determinism(report: dict, target, clock: Clock, quick: bool, scratch: str) -> None:
    extra = ("--quick",) if quick else ()
    env = child_env(target)
    timeout = clock.allow(CAPS["training_run"], "train", "streaming")
    first, one = phase_worker("training", env, timeout, scratch, *extra, tag="1")
    second, two = phase_worker("training", env, timeout, scratch, *extra, tag="2")
    result = compare_runs(first, second)
    result.update({"xla_flags": env["XLA_FLAGS"], "seconds": [one["seconds"], two["seconds"]]})
    if first is None:
        result["tail"] = one["tail"][-2500:]
    if not quick and clock.left() > timeout + RESERVE["train"] + RESERVE["streaming"]:
        plain = child_env(target, deterministic=False)
        control, _ = phase_worker(
            "training", plain, timeout, scratch, "--no_deterministic", tag="-plain"
        )
        result["without_project_flags"] = {
            "xla_flags": plain["XLA_FLAGS"],
            **compare_runs(first, control),
        }
    report["determinism"] = result
    log(f"determinism: {json.dumps({k: v for k, v in result.items() if k != 'tail'})}")


def phase_benchmarks(report: dict, target, clock: Clock, quick: bool, scratch: str) -> None:
    """benchmarks.train (it sets the project's flags, as training does) and
    benchmarks.streaming without them, as a deployment runs (autotuned kernels)."""
    env = child_env(target)
    train_json = os.path.join(scratch, "train.json")
    # One round of the loop measurement (host sync every step against losses fetched at
    # log time): on an accelerator that sync is what keeps the device idle.
    command = [
        sys.executable,
        "-m",
        "benchmarks.train",
        "--json",
        train_json,
        "--loop_rounds=1",
        "--form_call_seconds=0",  # the fold forms at the full preset: not in the budget
    ]
    command += ["--repeats", "2", "--quick"] if quick else ["--repeats", "3", "--profile"]
    outcome = run(command, env, clock.allow(CAPS["train"], "streaming"))
    report["train"] = {
        "rc": outcome["rc"],
        "seconds": outcome["seconds"],
        **(files.read_json(train_json) or {}),
    }
    if outcome["rc"] != 0:
        report["train"]["tail"] = outcome["tail"][-2500:]
    log(f"train benchmark: rc {outcome['rc']}, {outcome['seconds']} s")

    streaming_json = os.path.join(scratch, "streaming.json")
    budget = max(clock.left() - 45, 30)
    command = [
        sys.executable,
        "-m",
        "benchmarks.streaming",
        "--accelerator",
        "--json",
        streaming_json,
    ]
    command += ["--budget_s", f"{budget:.0f}"]
    if quick:
        command += ["--seconds", "1", "--max_streams", "16", "--block_outputs", "1"]
    outcome = run(command, child_env(target, deterministic=False), budget + 40)
    payload = files.read_json(streaming_json)
    report["streaming"] = {
        "rc": outcome["rc"],
        "seconds": outcome["seconds"],
        "summary": streaming_summary(payload),
        "full": payload,
    }
    if outcome["rc"] != 0:
        report["streaming"]["tail"] = outcome["tail"][-2500:]
    log(f"streaming benchmark: rc {outcome['rc']}, {outcome['seconds']} s")


def check(args) -> int:
    started = time.perf_counter()
    phases = parse_phases(args.phases)
    clock = Clock(args.budget_s, phases)
    scratch = tempfile.mkdtemp(prefix="gpu-check-")
    target = os.path.join(scratch, "site-packages")
    os.makedirs(target)
    report = {
        "command": " ".join(sys.argv),
        "quick": args.quick,
        "budget_s": args.budget_s,
        "phases": list(phases),
    }
    report["packages"] = gpu_wheels.provide_packages(args.wheels, target)
    log(f"packages: {report['packages']}")
    env = child_env(target)
    machine, outcome = phase_worker("describe", env, 120, scratch)
    report["machine"] = machine
    if machine is None:
        report["describe_tail"] = outcome["tail"]
        log(f"the project does not import here:\n{outcome['tail']}")
    elif machine["backend"] == "cpu" and not args.allow_cpu:
        log("jax has no GPU or TPU here (backend cpu); --allow-cpu runs the check anyway")
        return 2
    if machine is not None:
        if "tests" in phases:
            phase_tests(report, env, clock, args.quick, scratch)
        if "contract" in phases:
            phase_contract(report, env, clock, args.quick, scratch)
        if "determinism" in phases:
            phase_determinism(report, target, clock, args.quick, scratch)
        if "benchmarks" in phases:
            phase_benchmarks(report, target, clock, args.quick, scratch)
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    report["ok"] = verdict(report, phases)
    slug = accelerator.device_slug(report.get("machine") or {})
    path = args.json or os.path.join(ROOT, "benchmarks", "results", f"gpu-{slug}.json")
    files.write_json(path, report)
    log(f"{'OK' if report['ok'] else 'NOT OK'} in {report['elapsed_s']} s; wrote {path}")
    return 0 if report["ok"] else 1


def verdict(report: dict, phases=tuple(PHASES)) -> bool:
    """Of the phases run: every test passed, training was deterministic, the contract
    held and both benchmarks finished."""
    tests = report.get("tests", {})
    held = {
        "tests": tests.get("rc") == 0 and tests.get("passed", 0) > 0,
        "contract": report.get("contract", {}).get("holds"),
        "determinism": report.get("determinism", {}).get("identical"),
        "benchmarks": report.get("train", {}).get("rc") == 0
        and report.get("streaming", {}).get("rc") == 0,
    }
    return bool(report.get("machine")) and all(bool(held[phase]) for phase in phases)


def parse_phases(text: str) -> tuple[str, ...]:
    """'contract,tests' -> ('tests', 'contract'): the named phases, in the check's order."""
    names = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(names - set(PHASES))
    if unknown or not names:
        raise ValueError(f"--phases: expected some of {','.join(PHASES)}, got {text!r}")
    return tuple(phase for phase in PHASES if phase in names)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=None, help="default benchmarks/results/gpu-KIND.json")
    parser.add_argument("--budget_s", type=float, default=540.0, help="the whole check")
    parser.add_argument(
        "--wheels", default=gpu_wheels.WHEEL_DIR, help="folder of wheels (make gpu-wheels)"
    )
    parser.add_argument("--allow-cpu", dest="allow_cpu", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a subset, small sizes")
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"some of {','.join(PHASES)} (default all): a check split over device calls",
    )
    parser.add_argument(
        "--wheel-specs",
        dest="wheel_specs",
        action="store_true",
        help="print name==version of the wheels gpu-check may need, and exit",
    )
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--no_deterministic", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.wheel_specs:
        with open(gpu_wheels.LOCK) as lock:
            print("\n".join(gpu_wheels.wheel_specs(lock.read())))
        return 0
    if args.worker:
        with contextlib.redirect_stdout(sys.stderr):
            files.write_json(args.out, WORKERS[args.worker](args))
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
