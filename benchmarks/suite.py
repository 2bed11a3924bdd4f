"""Where the test suite's time goes: a pytest plugin that records each test's seconds and
the JAX compilation inside it, per xdist worker, and one JSON summary of the run.

    make suite-profile        # the suite as `make test` runs it, plus this plugin
    .venv/bin/python -m pytest -p benchmarks.suite --suite-profile=/tmp/suite.json tests/metrics
    .venv/bin/python -m benchmarks.suite benchmarks/results/suite.json   # the table again

Each test's seconds are its setup, call and teardown. Compilation is counted in the
worker's own process (`speechkit.compilation.Counter`): the experiment tests' subprocesses
compile on top of it, inside their tests' seconds. With xdist every worker writes its
part beside the summary (`<summary>.<worker>`) and the controller merges the parts, then
deletes them.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys
import time
from collections import defaultdict

import pytest

from speechkit import files

SLOWEST = 25  # tests listed one by one in the summary


def pytest_addoption(parser):
    parser.addoption(
        "--suite-profile",
        metavar="PATH",
        help="write each test's seconds and JAX compilation, summed per file, to PATH (JSON)",
    )


class _Recorder:
    """Each test's seconds and compilation in this process, written as one part file."""

    def __init__(self, path: pathlib.Path, worker: str):
        self.path, self.worker = path, worker
        self.tests: list[dict] = []
        self.started = time.time()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        from speechkit import compilation

        with compilation.Counter() as counted:
            start = time.perf_counter()
            yield
            seconds = time.perf_counter() - start
        self.tests.append(
            {
                "test": item.nodeid,
                "seconds": round(seconds, 3),
                "compile_seconds": round(counted.compile_seconds, 3),
                "trace_and_lower_seconds": round(counted.trace_seconds + counted.lower_seconds, 3),
                "programs": counted.programs,
                "cache_hits": counted.cache_hits,
            }
        )

    def pytest_sessionfinish(self, session):
        part = {"worker": self.worker, "span": [self.started, time.time()], "tests": self.tests}
        files.write_json(_part_path(self.path, self.worker), part)


class _Merger:
    """On the controller of an xdist run (or a run without xdist): the parts into one
    summary."""

    def __init__(self, path: pathlib.Path, recorder: _Recorder | None):
        self.path, self.recorder = path, recorder
        self.started = time.time()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        parts = sorted(self.path.parent.glob(self.path.name + ".*"))
        loaded = [json.loads(p.read_text()) for p in parts]
        summary = summarise(loaded, time.time() - self.started, int(exitstatus))
        files.write_json(self.path, summary)
        for p in parts:
            p.unlink()
        print(f"\nsuite profile: {self.path}\n" + "\n".join(table(summary)))


def _part_path(path: pathlib.Path, worker: str) -> pathlib.Path:
    return path.with_name(f"{path.name}.{worker}")


def pytest_configure(config):
    value = config.getoption("--suite-profile")
    if not value:
        return
    path = pathlib.Path(value).resolve()
    worker = getattr(config, "workerinput", {}).get("workerid")  # set on xdist workers
    uses_workers = getattr(config.option, "numprocesses", None) not in (None, 0)
    recorder = None
    if worker or not uses_workers:
        recorder = _Recorder(path, worker or "main")
        config.pluginmanager.register(recorder, "suite-profile-recorder")
    if not worker:
        for stale in path.parent.glob(path.name + ".*"):
            stale.unlink()  # parts of an earlier, interrupted run
        config.pluginmanager.register(_Merger(path, recorder), "suite-profile-merger")


def summarise(parts: list[dict], wall_seconds: float, exit_status: int) -> dict:
    """The run's summary from the workers' parts: totals, each worker's seconds, the
    files by summed seconds and the slowest tests."""
    tests = [test for part in parts for test in part["tests"]]
    keys = ("seconds", "compile_seconds", "trace_and_lower_seconds", "programs", "cache_hits")
    by_file: dict[str, dict] = defaultdict(lambda: {"tests": 0, **{k: 0 for k in keys}})
    for test in tests:
        row = by_file[test["test"].split("::")[0]]
        row["tests"] += 1
        for key in keys:
            row[key] += test[key]
    files = sorted(by_file.items(), key=lambda item: -item[1]["seconds"])
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "exit_status": exit_status,
        "wall_seconds": round(wall_seconds, 1),
        "workers": {
            part["worker"]: {
                "tests": len(part["tests"]),
                "busy_seconds": round(sum(t["seconds"] for t in part["tests"]), 1),
                "span_seconds": round(part["span"][1] - part["span"][0], 1),
            }
            for part in parts
        },
        "totals": {"tests": len(tests), **{k: _rounded(sum(t[k] for t in tests)) for k in keys}},
        "files": {name: {k: _rounded(v) for k, v in row.items()} for name, row in files},
        "slowest": sorted(tests, key=lambda test: -test["seconds"])[:SLOWEST],
    }


def _rounded(value):
    return round(value, 3) if isinstance(value, float) else value


def table(summary: dict, files: int = 15) -> list[str]:
    """A few lines: the totals, then the `files` costliest files."""
    t = summary["totals"]
    lines = [
        f"{t['tests']} tests in {summary['wall_seconds']:.0f} s on "
        f"{len(summary['workers'])} worker(s), {summary['machine']['cpus']} CPUs: "
        f"{t['seconds']:.0f} s of test time, of which JAX compiled {t['programs']} programs "
        f"in {t['compile_seconds']:.0f} s ({t['cache_hits']} from the cache) and traced and "
        f"lowered for {t['trace_and_lower_seconds']:.0f} s in the test processes",
        f"{'seconds':>8} {'compile':>8} {'programs':>8}  file",
    ]
    for name, row in list(summary["files"].items())[:files]:
        lines.append(
            f"{row['seconds']:8.1f} {row['compile_seconds']:8.1f} {row['programs']:8d}  {name}"
        )
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("summary", help="a JSON file written with --suite-profile")
    parser.add_argument("--files", type=int, default=40, help="how many files to list")
    args = parser.parse_args(argv)
    summary = json.loads(pathlib.Path(args.summary).read_text())
    print("\n".join(table(summary, args.files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
