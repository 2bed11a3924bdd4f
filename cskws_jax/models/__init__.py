"""The AF-KWS models that ship with the toolkit: data-only bundles (`cskws_jax.bundle`), each
in a folder of this package with its model card (card.md, card.json), by name
(`speechkit.shipped.Catalogue`).

    python -m cskws_jax.detect --model afkws-top20 my_call.wav
    net, params, info = cskws_jax.bundle.load(cskws_jax.models.path("afkws-top20"))

`python -m experiments.ship --config=experiments/configs/shipped.py:NAME` rebuilds one.
"""

from __future__ import annotations

import os

from speechkit.shipped import Catalogue

FOLDER = os.path.dirname(os.path.abspath(__file__))
CATALOGUE = Catalogue(FOLDER, "AF-KWS", "cskws_jax.bundle")
names = CATALOGUE.names
path = CATALOGUE.path
