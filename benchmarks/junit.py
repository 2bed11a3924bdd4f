"""pytest's JUnit XML (`--junitxml`) -> counts of passed, failed, errored and skipped tests
and the failed tests' ids; the device check (`benchmarks.gpu_check`) reads its test
processes' results with it. Standard library only."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree

COUNTS = ("passed", "failed", "errors", "skipped")


def summary(path: str) -> dict:
    """passed / failed / errors / skipped and the failed tests' ids from pytest's XML
    (all zero when pytest wrote none)."""
    if not os.path.exists(path):
        return {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failed_tests": []}
    root = ElementTree.parse(path).getroot()
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    failed = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in root.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return {
        "passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
        "failed": counts["failures"],
        "errors": counts["errors"],
        "skipped": counts["skipped"],
        "failed_tests": failed,
    }


def total(summaries: list[dict]) -> dict:
    """`summary`s of several pytest processes added up."""
    return {
        **{key: sum(s[key] for s in summaries) for key in COUNTS},
        "failed_tests": [name for s in summaries for name in s["failed_tests"]],
    }
