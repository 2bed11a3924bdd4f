r"""What a refactor must not move: the runners' input pipelines and results, fingerprinted.

    python -m experiments.fingerprint pipelines --data_dir=DIR > before.json
    python -m experiments.fingerprint compare OLD/results.json NEW/results.json

`pipelines` prints, as JSON, the SHA-256 of the first `--batches` (20) batches of every
input pipeline the runners build on the smoke corpora in DIR (`python -m
experiments.build_data --size=smoke --data_dir=DIR`): MultiQT's training batches of folds
0 and 4 (`experiments.multiqt_folds.FoldTrainer`) and its evaluation batches of fold 0 and of
each evaluation (`experiments.scoring.calls.eval_batches`), for both tasks; CS-KWS's
training crops with and without the unknown class (`experiments.cskws.training_batches`)
and its evaluation batches of the test split and of each evaluation. `compare` walks two
JSON files (results.json, studies.json, ...) and lists every value that differs, leaving
out the wall-clock fields (`WALL_CLOCK`); it exits 1 when any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile

import numpy as np

WALL_CLOCK = frozenset({"seconds", "RTF"})  # timings: they differ on every run


def digest(batches, count: int = 20) -> str:
    """SHA-256 over the first `count` batches: each field's name, dtype, shape and bytes."""
    hasher = hashlib.sha256()
    for position, batch in enumerate(batches):
        if position == count:
            break
        for key in sorted(batch):
            array = np.ascontiguousarray(np.asarray(batch[key]))
            hasher.update(f"{key}{array.dtype}{array.shape}".encode())
            hasher.update(array.tobytes())
    return hasher.hexdigest()


def pipelines(data_dir: str, count: int = 20) -> dict[str, str]:
    """{pipeline name: `digest`} of every runner's pipelines on the smoke corpora."""
    from experiments import cskws, folds, multiqt, multiqt_folds, multiqt_setup
    from experiments.configs import cskws as kws_presets
    from experiments.configs import multiqt as calls_presets
    from experiments.scoring import calls
    from experiments.scoring import keywords as kws_scoring

    found = {}
    for task in ("questions", "symptoms"):
        config = calls_presets.get_config("smoke")
        config.data_dir, config.task, config.build_missing = data_dir, task, False
        source, index = multiqt_setup.load_corpus(config)
        fold_ids = index.folds % config.num_folds
        counts = multiqt_folds.record_frame_counts(source, len(multiqt.labels.classes(task)))
        with tempfile.TemporaryDirectory() as workdir:
            trainer = multiqt_folds.FoldTrainer(
                "multimodal", config, source, index, fold_ids, folds.fold_mesh(), workdir, counts
            )
            for fold in (0, 4):
                found[f"multiqt-{task}-train-fold{fold}"] = digest(trainer.datasets[fold], count)
        batching = multiqt_setup.call_batching(config)
        test = np.flatnonzero(fold_ids == 0)
        found[f"multiqt-{task}-eval-fold0"] = digest(
            calls.eval_batches(source, test, index, batching), count
        )
        for name, (other, other_index) in multiqt_setup.evaluation_sources(config).items():
            found[f"multiqt-{task}-eval-{name}"] = digest(
                calls.eval_batches(other, np.arange(len(other)), other_index, batching), count
            )
    config = kws_presets.get_config("smoke")
    config.data_dir, config.build_missing = data_dir, False
    sources, keywords = cskws.load_corpus(config)
    for unknown in (True, False):
        batches = cskws.training_batches(config, sources["train"], len(keywords), unknown)
        found[f"cskws-train-unknown{unknown}"] = digest(batches, count)
    others = cskws.evaluation_sources(config, keywords)
    for name, source in {"test": sources["test"], **others}.items():
        batches = kws_scoring.evaluation_batches(
            source, num_keywords=len(keywords), batch_size=config.eval.batch_size
        )
        found[f"cskws-eval-{name}"] = digest(batches, count)
    return found


def differences(old, new, path: str = "") -> list[str]:
    """Every place where JSON values `old` and `new` differ (keys in another order count;
    NaN equals NaN), leaving out `WALL_CLOCK` fields."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = [] if list(old) == list(new) else [f"{path}: keys {list(old)} != {list(new)}"]
        for key in old:
            if key not in WALL_CLOCK and key in new:
                found += differences(old[key], new[key], f"{path}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{path}: {len(old)} items != {len(new)}"]
        return [
            d
            for i, pair in enumerate(zip(old, new, strict=True))
            for d in differences(*pair, f"{path}[{i}]")
        ]
    if old == new or (old != old and new != new):  # NaN == NaN here
        return []
    return [f"{path}: {old!r} != {new!r}"]


def _read_json(path: str):
    """The JSON in the file `path`, or a ValueError naming it."""
    try:
        with open(path) as source:
            return json.load(source)
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as err:
        raise ValueError(f"{path}: not a readable JSON file ({err})") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    digests = commands.add_parser("pipelines", help="SHA-256 of every runner's first batches")
    digests.add_argument("--data_dir", required=True, help="TFDS folder of the smoke corpora")
    digests.add_argument("--batches", type=int, default=20)
    compare = commands.add_parser("compare", help="differences of two JSON files")
    compare.add_argument("old")
    compare.add_argument("new")
    args = parser.parse_args(argv)
    if args.command == "pipelines":
        print(json.dumps(pipelines(args.data_dir, args.batches), indent=1))
        return 0
    try:
        old, new = _read_json(args.old), _read_json(args.new)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    found = differences(old, new)
    print("\n".join(found) or f"identical but for {sorted(WALL_CLOCK)}: {args.old}, {args.new}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
