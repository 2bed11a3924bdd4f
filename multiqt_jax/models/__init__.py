"""The MultiQT models that ship with the toolkit: data-only bundles (`multiqt_jax.bundle`),
each in a folder of this package with its model card (card.md, card.json), by name
(`speechkit.shipped.Catalogue`).

    python -m multiqt_jax.track --model multiqt-questions --asr ctc my_call.wav
    python -m multiqt_jax.track --model multiqt-questions-audio my_call.wav
    net, params, info = multiqt_jax.bundle.load(multiqt_jax.models.path("multiqt-questions"))

`python -m experiments.ship --config=experiments/configs/shipped.py:NAME` rebuilds one.
"""

from __future__ import annotations

import os

from speechkit.shipped import Catalogue

FOLDER = os.path.dirname(os.path.abspath(__file__))
CATALOGUE = Catalogue(FOLDER, "MultiQT", "multiqt_jax.bundle")
names = CATALOGUE.names
path = CATALOGUE.path
