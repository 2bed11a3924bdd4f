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
