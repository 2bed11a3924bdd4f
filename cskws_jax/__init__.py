"""CS-KWS: anchor-free keyword detection in continuous speech (AF-KWS).

`cskws_jax.Detector` (`cskws_jax.api.Detector`) detects keywords in audio fed chunk by
chunk (docs/api.md); it is imported on first use, so `import cskws_jax` stays light.
"""

from __future__ import annotations

__all__ = ["Detector"]


def __getattr__(name: str):
    """The streaming API, imported when first asked for (it loads jax)."""
    if name == "Detector":
        from cskws_jax.api import Detector

        return Detector
    raise AttributeError(f"module 'cskws_jax' has no attribute {name!r}")
