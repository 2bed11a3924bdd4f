"""Corpus building: render items in parallel worker processes, cached one file per item.

    items = render_cached(render_one, jobs, cache_dir, name="synthetic_kws/quick")

`render_one(job)` must be a module-level function (it runs in worker processes) and
return a picklable item; an item's `stage_seconds` dict (if it has one) is summed into
the progress report. Each item is written to `<cache_dir>/item-<index>.pkl` atomically,
so an interrupted build resumes where it stopped and a finished one is only read.
Workers come from multiprocessing's forkserver: like spawn, it imports the caller's
`__main__` module, so call this from a CLI or a test, not from an unguarded script body.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import sys
import time
from collections.abc import Callable, Sequence

from speechkit import files


class ArrayRecordByDefault:
    """Mixin for the project's TFDS builders: ArrayRecord output unless a caller asks for
    another `file_format`, so `tfds.builder(name).download_and_prepare()` and
    `tfds.data_source` work without TensorFlow (TFDS's own default is TFRecord).

        class MyCorpus(corpus.ArrayRecordByDefault, tfds.core.GeneratorBasedBuilder): ...
    """

    def __init__(self, *, file_format: str | None = "array_record", **kwargs):
        super().__init__(file_format=file_format, **kwargs)


def cache_dir(builder, *settings) -> str:
    """`<data_dir>/<builder name>/render_cache/<hash of settings>`: one render cache per
    distinct `settings` (include the builder's VERSION, size, seed and every config that
    changes the rendered items), shared by all of the builder's configs. The builder's
    data_dir may point into a config's temporary folder while it is being prepared, so
    the dataset root is found by name."""
    root = os.path.abspath(builder.data_dir)
    while os.path.basename(root) != builder.name and os.path.dirname(root) != root:
        root = os.path.dirname(root)
    key = hashlib.sha1(repr(settings).encode()).hexdigest()[:12]
    return os.path.join(root, "render_cache", key)


def _run(task):
    index, render_one, job = task
    return index, render_one(job)


def _item_path(cache_dir: str, index: int) -> str:
    return os.path.join(cache_dir, f"item-{index:06d}.pkl")


def _write_atomically(path: str, item) -> None:
    with files.atomic_open(path, "wb") as out:
        pickle.dump(item, out)


def render_cached(
    render_one: Callable,
    jobs: Sequence,
    cache_dir: str,
    name: str,
    workers: int | None = None,
) -> list:
    """[render_one(job) for job in jobs], computed by `workers` processes and cached."""
    os.makedirs(cache_dir, exist_ok=True)
    paths = [_item_path(cache_dir, i) for i in range(len(jobs))]
    todo = [i for i, path in enumerate(paths) if not os.path.exists(path)]
    if todo:
        workers = workers or min(os.cpu_count() or 1, len(todo))
        started, totals = time.perf_counter(), {}
        tasks = [(i, render_one, jobs[i]) for i in todo]
        context = multiprocessing.get_context("forkserver")
        with context.Pool(workers) as pool:
            for done, (index, item) in enumerate(pool.imap_unordered(_run, tasks), 1):
                _write_atomically(paths[index], item)
                for stage, seconds in getattr(item, "stage_seconds", {}).items():
                    totals[stage] = totals.get(stage, 0.0) + seconds
                elapsed = time.perf_counter() - started
                print(
                    f"\r[{name}] rendered {done}/{len(todo)} ({elapsed:.0f} s)",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        print(
            f"\n[{name}] stage seconds (summed over workers): "
            + ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in totals.items()),
            file=sys.stderr,
        )
    items = []
    for path in paths:
        with open(path, "rb") as source:
            items.append(pickle.load(source))
    return items
