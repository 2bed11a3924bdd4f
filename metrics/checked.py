"""Opt-in run-time checks of array values that `jit` cannot check for free.

The metrics validate shapes, dtypes and static arguments while tracing. Label values
can only be checked by looking at the data, which costs a device-to-host sync; these
wrappers do that through `jax.experimental.checkify` and raise a `ValueError` naming
the argument and the allowed range:

    >>> import jax.numpy as jnp, metrics
    >>> pred = jnp.array([[0, 1, 7]]); gold = jnp.array([[0, 1, 1]])
    >>> mask = jnp.ones((1, 3), bool)
    >>> metrics.checked(metrics.timestep_prf)(pred, gold, mask, num_classes=2)
    Traceback (most recent call last):
    ...
    ValueError: pred: label values must lie in [0, 2) where mask is True; the first ...
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import checkify

from metrics.detection import detection_scores
from metrics.early import early_frame_counts, early_frames
from metrics.sequence import instance_counts, instance_prf, timestep_counts, timestep_prf

_SEQUENCE_METRICS = (
    timestep_prf,
    instance_prf,
    timestep_counts,
    instance_counts,
    early_frames,
    early_frame_counts,
)


def _check_range(name: str, labels, where, where_name: str, num_classes: int) -> None:
    outside = (where & ((labels < 0) | (labels >= num_classes))).reshape(-1)
    first = jnp.argmax(outside)
    checkify.check(
        ~jnp.any(outside),
        f"{name}: label values must lie in [0, {num_classes}) where {where_name} is True; "
        "the first offender, at flat index {index}, holds {value}",
        index=first,
        value=labels.reshape(-1)[first],
    )


def _checks(metric, args, kwargs) -> None:
    num_classes = kwargs["num_classes"]
    if metric in _SEQUENCE_METRICS:
        pred, gold, mask = (jnp.asarray(a) for a in args[:3])
        _check_range("pred", pred, mask, "mask", num_classes)
        _check_range("gold", gold, mask, "mask", num_classes)
    elif metric is detection_scores:
        detections, ground_truth = args[:2]
        for name, fields in (("detections", detections), ("ground_truth", ground_truth)):
            label, valid = jnp.asarray(fields["label"]), jnp.asarray(fields["valid"])
            _check_range(f"{name}['label']", label, valid, f"{name}['valid']", num_classes)
        score, valid = jnp.asarray(detections["score"]), jnp.asarray(detections["valid"])
        checkify.check(
            ~jnp.any(valid & ~jnp.isfinite(score)),
            "detections['score']: valid detections need finite scores",
        )
    else:
        raise TypeError(f"checked: no value checks are defined for {metric!r}")


def checked(metric):
    """Wraps a metric so out-of-range labels (and non-finite scores) raise ValueError.

    Works for `timestep_prf`, `instance_prf`, `timestep_counts`, `instance_counts`,
    `early_frames`, `early_frame_counts` and `detection_scores`. The wrapped call is
    jitted and synchronises with the host to raise; use it outside other transformations.
    """

    @functools.wraps(metric)
    def wrapped(*args, **kwargs):
        def run(*args):
            _checks(metric, args, kwargs)
            return metric(*args, **kwargs)

        error, result = jax.jit(checkify.checkify(run))(*args)
        try:
            error.throw()
        except checkify.JaxRuntimeError as err:
            raise ValueError(str(err).split("\n")[0]) from None
        return result

    return wrapped
