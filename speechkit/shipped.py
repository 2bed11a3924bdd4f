"""The models that ship with the toolkit: a bundle and its export in a package folder,
by name.

    catalogue = shipped.Catalogue(os.path.dirname(__file__), "AF-KWS", "cskws_jax.bundle")
    catalogue.names()                    # ("afkws-top20",)
    catalogue.path("afkws-top20")        # the bundle folder; a ValueError lists the names
    catalogue.runnable("afkws-top20")    # the bundle, or its export without the model code
    catalogue.sample("afkws-top20")      # a WAV to try it on

Each task package keeps its own models (`cskws_jax.models`, `multiqt_jax.models`), each
in a sub-folder: bundle.json and params.npz (the bundle), its model card (card.md,
card.json), `export/` (the bundle exported: StableHLO and ONNX, which the light install
runs) and `sample.wav` with `sample.json` (what is spoken in it);
`python -m experiments.ship` rebuilds them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os

EXPORT = "export"  # a shipped model's export folder, inside its bundle folder
SAMPLE = "sample.wav"  # a recording to try it on
SAMPLE_FACTS = "sample.json"  # what is spoken in the sample, and where


@dataclasses.dataclass(frozen=True)
class Catalogue:
    """The shipped models of one task: the sub-folders of `folder` holding a bundle.json;
    `kind` names the task's models in errors ("AF-KWS", "MultiQT"); `model_code` is the
    module that loads a bundle (it needs the full install)."""

    folder: str
    kind: str
    model_code: str

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

    def export_path(self, name: str) -> str:
        """The export folder of the shipped model `name` (`speechkit.export_format`)."""
        return os.path.join(self.path(name), EXPORT)

    def runnable(self, name: str, backend: str = "jax") -> str:
        """The folder that runs `name` with `backend`: its bundle where the model code
        imports and the backend is jax, else its export (ONNX, or the light install)."""
        if backend == "jax" and has_model_code(self.model_code):
            return self.path(name)
        return self.export_path(name)

    def sample(self, name: str) -> str:
        """The sample recording of the shipped model `name` (a WAV)."""
        return os.path.join(self.path(name), SAMPLE)


def has_model_code(module: str) -> bool:
    """Whether `module` (a task's bundle loader) imports: False in the light install,
    which lacks flax and the rest of the full install."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError:
        return False
    return True
