"""experiments.common.Beside: an experiment's train_and_evaluate in a spawned process, its
result or its error back here, and nothing left running when this side stops early."""

import os
import textwrap
import time

import pytest

from experiments import common
from speechkit import errors

FAKE_EXPERIMENT = textwrap.dedent(
    """
    import os
    import time

    import jax.numpy as jnp

    from speechkit import errors


    def train_and_evaluate(config, workdir):
        os.makedirs(workdir, exist_ok=True)
        with open(os.path.join(workdir, "pid"), "w") as out:
            out.write(str(os.getpid()))
        if config["mode"] == "bad input":
            raise errors.InvalidInput("corpus.json: field 'hours' must be positive")
        if config["mode"] == "slow":
            time.sleep(120)
        total = int(jnp.arange(config["n"]).sum())
        return {"total": total}
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _pid(workdir) -> int:
    for _ in range(600):  # the spawned process starts in a few seconds
        if (workdir / "pid").exists() and (workdir / "pid").read_text():
            return int((workdir / "pid").read_text())
        time.sleep(0.1)
    raise AssertionError(f"no pid in {workdir}")


def test_a_stage_beside_returns_its_result_its_error_or_is_stopped(tmp_path, monkeypatch):
    (tmp_path / "fake_experiment.py").write_text(FAKE_EXPERIMENT)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned processes import it too
    runs = {mode: tmp_path / mode.replace(" ", "_") for mode in ("ok", "bad input", "slow")}
    # All three start at once (each spends a few seconds importing jax).
    ok = common.Beside("fake_experiment", {"mode": "ok", "n": 5}, str(runs["ok"]))
    bad = common.Beside("fake_experiment", {"mode": "bad input"}, str(runs["bad input"]))
    slow = common.Beside("fake_experiment", {"mode": "slow"}, str(runs["slow"]))
    with pytest.raises(RuntimeError, match="stopped here"), slow:
        slow_pid = _pid(runs["slow"])
        raise RuntimeError("stopped here")
    with ok:
        value, seconds, compiled = ok.result()
    assert value == {"total": 10} and seconds > 0
    assert compiled["programs"] >= 1  # its compilations are counted there, not here
    with bad, pytest.raises(errors.InvalidInput, match="field 'hours' must be positive"):
        bad.result()
    assert not _alive(slow_pid) and not _alive(_pid(runs["ok"]))
