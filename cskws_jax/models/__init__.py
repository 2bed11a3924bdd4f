"""The AF-KWS models that ship with the toolkit: data-only bundles (`cskws_jax.bundle`), each
in a folder of this package with its model card (card.md, card.json), by name.

    python -m cskws_jax.detect --model afkws-top20 my_call.wav
    net, params, info = cskws_jax.bundle.load(cskws_jax.models.path("afkws-top20"))

`python -m experiments.ship --config=experiments/configs/shipped.py:NAME` rebuilds one.
"""

from __future__ import annotations

import os

FOLDER = os.path.dirname(os.path.abspath(__file__))


def names() -> tuple[str, ...]:
    """The shipped models' names, sorted."""
    return tuple(
        sorted(
            entry
            for entry in os.listdir(FOLDER)
            if os.path.isfile(os.path.join(FOLDER, entry, "bundle.json"))
        )
    )


def path(name: str) -> str:
    """The bundle folder of the shipped model `name`; a ValueError lists the names."""
    if name not in names():
        raise ValueError(
            f"no shipped AF-KWS model {name!r}; the toolkit ships {', '.join(names()) or 'none'}"
        )
    return os.path.join(FOLDER, name)
