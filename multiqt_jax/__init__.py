"""MultiQT: multimodal real-time question and symptom tracking in streaming calls.

`multiqt_jax.Tracker` (`multiqt_jax.api.Tracker`) tracks questions in audio fed chunk by
chunk (docs/api.md); it is imported on first use, so `import multiqt_jax` stays light.
"""

from __future__ import annotations

__all__ = ["Tracker"]


def __getattr__(name: str):
    """The streaming API, imported when first asked for (it loads jax)."""
    if name == "Tracker":
        from multiqt_jax.api import Tracker

        return Tracker
    raise AttributeError(f"module 'multiqt_jax' has no attribute {name!r}")
