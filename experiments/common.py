"""Small pieces the experiment runners share: logging, atomic JSON, training curves."""

from __future__ import annotations

import json
import os
import sys
import time

from tensorboardX import SummaryWriter


def logger(name: str):
    """A function printing `[name HH:MM:SS] message` to stderr."""

    def log(message: str) -> None:
        print(f"[{name} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    return log


def write_json(path: str, payload) -> None:
    """Writes JSON atomically (a temporary file, then a rename)."""
    with open(path + ".tmp", "w") as out:
        json.dump(payload, out, indent=2)
    os.replace(path + ".tmp", path)


class Curves:
    """Training curves as `curves.jsonl` and as TensorBoard event files in `folder`.

    `tensorboard --logdir WORKDIR` shows every model's curves (one tag per fold)."""

    def __init__(self, folder: str):
        os.makedirs(folder, exist_ok=True)
        self._lines = open(os.path.join(folder, "curves.jsonl"), "a")  # noqa: SIM115
        self._board = SummaryWriter(os.path.join(folder, "tensorboard"))

    def add(self, step: int, **values) -> None:
        """values: name -> float or list of floats (one per fold)."""
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
        self._lines.close()
        self._board.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
