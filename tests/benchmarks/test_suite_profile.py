"""benchmarks.suite, the suite's time profile: a small run through xdist workers writes one
summary that counts every test and the programs it compiled; the summary by hand."""

import json
import subprocess
import sys

import pytest

from benchmarks import suite

TESTS = """
import jax
import jax.numpy as jnp


def test_compiles_one_program():
    assert float(jax.jit(lambda x: jnp.sin(x) * 3)(1.0)) != 0


def test_compiles_nothing():
    assert 1 + 1 == 2
"""


def test_a_run_through_workers_writes_one_summary(tmp_path):
    (tmp_path / "test_tiny.py").write_text(TESTS)
    out = tmp_path / "profile" / "suite.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "benchmarks.suite",
            f"--suite-profile={out}",
            "-n",
            "2",
            "--dist",
            "loadfile",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_tiny.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["totals"]["tests"] == 2 and summary["exit_status"] == 0
    assert summary["totals"]["programs"] >= 1 and summary["totals"]["compile_seconds"] > 0
    (name,) = summary["files"]
    assert name.endswith("test_tiny.py") and summary["files"][name]["tests"] == 2
    assert sorted(out.parent.iterdir()) == [out]  # the workers' parts are merged away
    assert "suite profile:" in done.stdout and "test_tiny.py" in done.stdout


def test_the_summary_sums_files_and_workers_by_hand():
    def test(name, seconds, programs):
        return {
            "test": name,
            "seconds": seconds,
            "compile_seconds": seconds / 2,
            "trace_and_lower_seconds": 0.5,
            "programs": programs,
            "cache_hits": 1,
        }

    parts = [
        {"worker": "gw0", "span": [0.0, 10.0], "tests": [test("a.py::x", 4.0, 3)]},
        {
            "worker": "gw1",
            "span": [1.0, 9.0],
            "tests": [test("b.py::y", 2.0, 1), test("b.py::z", 3.0, 2)],
        },
    ]
    summary = suite.summarise(parts, wall_seconds=12.0, exit_status=0)
    assert list(summary["files"]) == ["b.py", "a.py"]  # by summed seconds
    assert summary["files"]["b.py"] == {
        "tests": 2,
        "seconds": 5.0,
        "compile_seconds": 2.5,
        "trace_and_lower_seconds": 1.0,
        "programs": 3,
        "cache_hits": 2,
    }
    assert summary["workers"]["gw1"] == {"tests": 2, "busy_seconds": 5.0, "span_seconds": 8.0}
    assert summary["totals"]["seconds"] == pytest.approx(9.0)
    assert [t["test"] for t in summary["slowest"]] == ["a.py::x", "b.py::z", "b.py::y"]
    assert suite.table(summary)[0].startswith("3 tests in 12 s on 2 worker(s)")
