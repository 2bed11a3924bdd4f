"""Shared CS-KWS test fixtures."""

import jax
import numpy as np
import pytest

from cskws_jax import model


@pytest.fixture(scope="session")
def tiny_afkws(tiny_afkws_config):
    """(net, params): a 3-keyword AF-KWS small enough to build in a second, params from
    key 0 (for the bundle, detection and export tests)."""
    net = model.AfKws(tiny_afkws_config(3))
    params = jax.jit(net.init)(jax.random.key(0), {"audio": np.zeros((1, 16, 64), np.float32)})
    return net, params
