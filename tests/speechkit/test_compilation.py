"""speechkit.compilation: where the persistent cache lives, and the compilation counter."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from speechkit import compilation


def test_the_cache_folder_follows_the_environment(tmp_path):
    home = {"HOME": str(tmp_path)}
    assert compilation.cache_dir({"XDG_CACHE_HOME": "/c"}) == "/c/speech-tracking-jax/jax"
    both = {"JAX_COMPILATION_CACHE_DIR": "/j", "XDG_CACHE_HOME": "/c"}
    assert compilation.cache_dir(both) == "/j"
    assert compilation.default_cache_dir({}).endswith("/.cache/speech-tracking-jax/jax")
    for off in ("false", "0", "False", "off"):
        assert compilation.cache_dir({**home, "JAX_ENABLE_COMPILATION_CACHE": off}) is None
    assert compilation.cache_dir({"JAX_ENABLE_COMPILATION_CACHE": "true", "XDG_CACHE_HOME": "/c"})


def test_enable_cache_keeps_a_folder_already_configured():
    configured = jax.config.jax_compilation_cache_dir  # tests/conftest.py sets one
    assert configured
    assert compilation.enable_cache({"JAX_COMPILATION_CACHE_DIR": "/elsewhere"}) == configured
    assert jax.config.jax_compilation_cache_dir == configured


def test_the_threshold_is_jax_s_variable_when_set():
    previous = jax.config.jax_persistent_cache_min_compile_time_secs
    try:
        compilation.enable_cache({"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.25"})
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.25
        compilation.enable_cache({})
        assert (
            jax.config.jax_persistent_cache_min_compile_time_secs == compilation.MIN_COMPILE_SECONDS
        )
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", previous)


def _fresh_function(scale: float):
    def scaled_cumsum(x):
        return jnp.cumsum(x * scale) + scale

    return jax.jit(scaled_cumsum)


def test_the_counter_counts_compilations_and_cache_reads():
    x = np.arange(17, dtype=np.float32)
    previous = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    try:
        with compilation.Counter() as first:
            jitted = _fresh_function(1.5)
            jitted(x).block_until_ready()
            jitted(x).block_until_ready()  # compiled already, in memory: not counted
        jax.clear_caches()
        with compilation.Counter() as again:
            _fresh_function(1.5)(x).block_until_ready()  # read back from the disk cache
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", previous)
    assert first.programs == 1 and first.cache_hits == 0 and first.compile_seconds > 0
    assert first.record()["slowest"]["jit(scaled_cumsum)"]["programs"] == 1
    assert again.programs == 1 and again.cache_hits == 1
    assert "1 from the cache" in again.summary()
    with compilation.Counter() as closed:
        pass
    _fresh_function(2.5)(x).block_until_ready()  # after the counter closed
    assert closed.programs == 0 and closed.summary().startswith("0 programs")


@pytest.mark.parametrize("slowest", [1, 3])
def test_the_record_lists_the_slowest_functions(slowest):
    with compilation.Counter() as counted:
        for scale in (3.5, 4.5, 5.5):
            _fresh_function(scale)(np.ones(5, np.float32)).block_until_ready()
    record = counted.record(slowest=slowest)
    assert record["programs"] == 3 and len(record["slowest"]) == 1  # one function name
    assert set(record) == {
        "programs",
        "cache_hits",
        "compile_seconds",
        "trace_seconds",
        "lower_seconds",
        "slowest",
    }
