"""Progress bars for long work (tqdm), on standard error: corpus rendering, training
steps, evaluation batches and the command lines' inputs.

    with progress.bar(len(jobs), "synthetic_calls render", "call") as shown:
        for job in jobs:
            ...
            shown.update(1)
    for batch in progress.wrap(batches, "tracking", "batch"): ...

A bar shows the count, the rate and the time left (ETA). It is drawn only on a terminal
(tqdm's `disable=None`): in a log file or a pipe it writes nothing, and the work's own
log lines stay as they were. `quiet()` turns every bar off for the rest of the process
(the commands' `--quiet`), as does the environment variable `STJ_QUIET=1`.
"""

from __future__ import annotations

import os
import sys

import tqdm

_QUIET = {"on": False}


def quiet(on: bool = True) -> None:
    """Turns every later bar of this process off (`on`) or back to terminal-only."""
    _QUIET["on"] = on


def is_quiet() -> bool:
    return _QUIET["on"] or os.environ.get("STJ_QUIET", "") == "1"


def bar(
    total: int | None, description: str, unit: str = "it", initial: int = 0, shown: bool = True
) -> tqdm.tqdm:
    """A tqdm bar over `total` units (None: unknown) starting at `initial`, on stderr,
    drawn only on a terminal, never when quiet or not `shown`."""
    return wrap(None, description, unit, total, initial, shown)


def wrap(iterable, description: str, unit: str = "it", total=None, initial: int = 0, shown=True):
    """`iterable` (None: a bar updated by hand) with a bar as `bar` draws it; `total`
    defaults to its length when it has one."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    return tqdm.tqdm(
        iterable,
        total=total,
        initial=initial,
        desc=description,
        unit=unit,
        file=sys.stderr,
        disable=True if is_quiet() or not shown else None,
        dynamic_ncols=True,
        leave=False,
    )
