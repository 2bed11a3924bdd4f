"""The number formats and table lines that report.md, studies.md, results.md and the
runners' printed tables share."""

from __future__ import annotations


def mean_std_text(value: dict) -> str:
    """{"mean", "std"} as "0.700 ± 0.010"."""
    return f"{value['mean']:.3f} ± {value['std']:.3f}"


def number(value) -> str:
    """A score to 3 decimals; "n/a" for None."""
    return "n/a" if value is None else f"{value:.3f}"


def ratio(value) -> str:
    """A ratio (a transfer) to 2 decimals; "n/a" for None."""
    return "n/a" if value is None else f"{value:.2f}"


def interval_text(bounds) -> str:
    """A bootstrap interval as " [lo, hi]" (2 decimals); "" when there is none or a bound
    is missing."""
    if not bounds or any(bound is None for bound in bounds):
        return ""
    return f" [{bounds[0]:.2f}, {bounds[1]:.2f}]"


def point_text(point) -> str:
    """A swept point as written in tables and on axes: a label as it is, a number by :g."""
    return point if isinstance(point, str) else f"{point:g}"


def scored(value, bounds) -> str:
    """A score with its bootstrap interval: "0.400 [0.35, 0.45]" (`number`,
    `interval_text`)."""
    return number(value) + interval_text(bounds)


def early_share_text(early: dict, index: int | None = None) -> str:
    """A share of results.json's "early_frames" with its frame counts, "0.125 (3/24)":
    class `index`'s, or with None the overall one."""
    if index is None:
        return f"{early['overall']:.3f} ({sum(early['early'])}/{sum(early['predicted'])})"
    return f"{early['per_class'][index]:.3f} ({early['early'][index]}/{early['predicted'][index]})"


def row(*cells: str) -> str:
    """One table row: "| a | b |"."""
    return "| " + " | ".join(cells) + " |"


def header(*columns: str) -> list[str]:
    """A table's first two lines: the column names (each argument a name, or several
    joined by " | ") and the separator."""
    names = " | ".join(columns)
    return [f"| {names} |", "|---" * (names.count(" | ") + 1) + "|"]
