"""experiments.multiqt on smoke data: results, resuming after SIGKILL, device counts."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

MODELS = "multimodal,rf"


def _command(data_dir, workdir, *extra):
    return [
        sys.executable,
        "-m",
        "experiments.multiqt",
        "--config=experiments/configs/multiqt.py:smoke",
        f"--workdir={workdir}",
        f"--config.data_dir={data_dir}",
        "--config.build_missing=False",
        f"--config.models={MODELS}",
        *extra,
    ]


def _run(data_dir, workdir, devices=1, *extra):
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    done = subprocess.run(
        _command(data_dir, workdir, *extra), env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((workdir / "results.json").read_text()), done


@pytest.fixture(scope="module")
def reference(smoke_build, tmp_path_factory):
    data_dir, _ = smoke_build
    workdir = tmp_path_factory.mktemp("multiqt")
    results, done = _run(data_dir, workdir)
    return data_dir, results, done


@pytest.mark.slow
def test_smoke_cross_validation_writes_results(reference):
    _, results, done = reference
    assert set(results["models"]) == {"multimodal", "rf"}
    for summary in results["models"].values():
        assert len(summary["folds"]) == 5
        for score in ("timestep", "instance"):
            assert set(summary["mean"][score]) == {"precision", "recall", "f1"}
            assert 0 <= summary["mean"][score]["f1"] <= 1
    assert "TIMESTEP F1" in done.stdout and "multimodal" in done.stdout


@pytest.mark.slow
def test_offline_text_stream_is_a_separate_reference_row(reference, tmp_path):
    data_dir, results, _ = reference
    offline, done = _run(
        data_dir, tmp_path, 1, "--config.text_stream=offline", "--config.models=multimodal"
    )
    assert "offline text stream" in done.stderr
    assert offline["text_stream"] == "offline" and results["text_stream"] == "causal"
    assert set(offline["models"]) == {"multimodal@offline"}
    assert (tmp_path / "multimodal@offline" / "scores.json").exists()
    # Same model, same seed: only the text input differs, and the scores with it.
    assert offline["models"]["multimodal@offline"] != results["models"]["multimodal"]


def test_text_stream_must_be_causal_or_offline():
    from ml_collections import ConfigDict

    from experiments import multiqt

    with pytest.raises(ValueError, match=r"config.text_stream: expected one of .*'live'"):
        multiqt.causal_text(ConfigDict({"text_stream": "live"}))


@pytest.mark.slow
@pytest.mark.parametrize("devices", [2, 5])
def test_results_do_not_depend_on_the_device_count(reference, tmp_path, devices):
    data_dir, results, _ = reference
    again, done = _run(data_dir, tmp_path, devices)
    assert f"{devices} device(s)" in done.stderr
    assert again == results


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_results(reference, tmp_path):
    data_dir, results, _ = reference
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    process = subprocess.Popen(
        _command(data_dir, tmp_path), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    first_checkpoint = tmp_path / "multimodal" / "checkpoints" / "10"
    deadline = time.time() + 300
    while not first_checkpoint.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "results.json").exists()
    resumed, done = _run(data_dir, tmp_path)
    assert "resumed at step" in done.stderr
    assert resumed == results


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_two_processes_give_the_single_process_results(reference, tmp_path):
    data_dir, results, _ = reference
    address = f"127.0.0.1:{_free_port()}"
    processes = []
    for process_id in range(2):
        env = {
            **os.environ,
            "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
            "JAX_COORDINATOR_ADDRESS": address,
            "JAX_NUM_PROCESSES": "2",
            "JAX_PROCESS_ID": str(process_id),
        }
        processes.append(
            subprocess.Popen(
                _command(data_dir, tmp_path),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr[-3000:]
    assert "in 2 processes" in outputs[0][1]
    # Each process fed only its own folds (the baseline logs the folds it scored).
    assert "rf: fold 0" in outputs[0][1] and "rf: fold 0" not in outputs[1][1]
    assert "rf: fold 4" in outputs[1][1] and "rf: fold 4" not in outputs[0][1]
    assert json.loads((tmp_path / "results.json").read_text()) == results
