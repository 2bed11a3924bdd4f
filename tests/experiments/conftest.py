"""Running an experiment module as its command line does, on the session's smoke data."""

import subprocess
import sys

import pytest


@pytest.fixture
def run_experiment(smoke_build):
    """run(module, preset_config, workdir, *flags, env=None) -> CompletedProcess of
    `python -m experiments.<module> --config=experiments/configs/<module>.py:smoke`
    on the smoke corpora; fails the test (with the end of stderr) unless it exits 0."""
    data_dir, _ = smoke_build

    def run(module: str, workdir, *flags, env=None):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                f"experiments.{module}",
                f"--config=experiments/configs/{module}.py:smoke",
                f"--workdir={workdir}",
                f"--config.data_dir={data_dir}",
                *flags,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    return run


@pytest.fixture
def check_multiqt_heldout():
    """check(summary, num_folds): a MultiQT model's results.json entry holds its scores
    on the held-out engine's calls (raw and smoothed, every fold, all in [0, 1]) and the
    transfer ratios of their means to the in-engine ones."""
    from experiments.scoring import calls
    from experiments.scoring.evaluators import tracking

    def check(summary: dict, num_folds: int) -> None:
        heldout = summary["heldout"]
        assert heldout["smoothed"]["smoothing"] == summary["smoothed"]["smoothing"]
        for part in (heldout, heldout["smoothed"]):
            assert len(part["folds"]) == num_folds
            for score in tracking.SCORES:
                for name in tracking.PARTS:
                    assert 0 <= part["mean"][score][name] <= 1, (score, name)
                    for fold in part["folds"]:
                        assert 0 <= fold[score][name] <= 1, (score, name)
        assert set(summary["transfer"]) == set(calls.TRANSFER)
        for key, (score, name) in calls.TRANSFER.items():
            in_engine = summary["mean"][score][name]
            if in_engine == 0:
                assert summary["transfer"][key] is None
            else:
                expected = heldout["mean"][score][name] / in_engine
                assert summary["transfer"][key] == pytest.approx(expected), key

    return check
