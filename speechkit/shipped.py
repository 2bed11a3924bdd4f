"""The models that ship with the toolkit: data-only bundles in a package folder, by name.

    catalogue = shipped.Catalogue(os.path.dirname(__file__), "AF-KWS")   # a models package
    catalogue.names()            # ("afkws-top20",)
    catalogue.path("afkws-top20")  # the bundle folder; a ValueError lists the names

Each task package keeps its own models (`cskws_jax.models`, `multiqt_jax.models`), each
model in a sub-folder with bundle.json, params.npz and its model card (card.md,
card.json); `python -m experiments.ship` rebuilds them.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Catalogue:
    """The shipped models of one task: the sub-folders of `folder` holding a bundle.json;
    `kind` names the task's models in errors ("AF-KWS", "MultiQT")."""

    folder: str
    kind: str

    def names(self) -> tuple[str, ...]:
        """The shipped models' names, sorted."""
        return tuple(
            sorted(
                entry
                for entry in os.listdir(self.folder)
                if os.path.isfile(os.path.join(self.folder, entry, "bundle.json"))
            )
        )

    def path(self, name: str) -> str:
        """The bundle folder of the shipped model `name`; a ValueError lists the names."""
        if name not in self.names():
            raise ValueError(
                f"no shipped {self.kind} model {name!r}; the toolkit ships "
                f"{', '.join(self.names()) or 'none'}"
            )
        return os.path.join(self.folder, name)
