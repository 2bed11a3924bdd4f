"""experiments.commands: every `[project.scripts]` entry is a function that exists, the
installed scripts run (`--help` with an example and the exit statuses), stj-export picks
the bundle's task, and evaluate / build-data take `-` as well as `_` in their flags."""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys
import tomllib

import jax
import numpy as np
import pytest

from experiments import commands

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_every_script_is_a_command_with_one_prefix():
    assert set(SCRIPTS) == set(commands.COMMANDS)
    for name, target in SCRIPTS.items():
        assert name.startswith(commands.PREFIX)
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_command_prints_help_with_an_example(name, monkeypatch, capsys):
    module, function = SCRIPTS[name].split(":")
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    try:
        status = getattr(importlib.import_module(module), function)()
    except SystemExit as done:  # argparse's --help
        status = done.code
    assert status == 0
    assert "xample" in capsys.readouterr().out  # "Example" / "example"


def test_the_scripts_are_installed():
    """pip install -e . wrote every script; one runs (the others' --help is in-process)."""
    folder = pathlib.Path(sys.executable).parent
    missing = [name for name in SCRIPTS if not (folder / name).exists()]
    if missing:
        pytest.skip(f"{missing} not installed in this environment (pip install -e .)")
    done = subprocess.run(
        [folder / "stj-export", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "Example: stj-export" in done.stdout, done.stderr


def test_snake_flags_respells_only_known_flags():
    argv = ["--manual-dir=/d", "--data-dir", "/t", "--block-ms=200", "-", "--bundle=b-c"]
    assert commands.snake_flags(argv, {"manual_dir", "data_dir", "bundle"}) == [
        "--manual_dir=/d",
        "--data_dir",
        "/t",
        "--block-ms=200",
        "-",
        "--bundle=b-c",
    ]
    assert commands.snake_flags(["--engine-set=pip"]) == ["--engine_set=pip"]


def test_stj_export_runs_the_bundles_task(tiny_afkws_config, tmp_path, capsys):
    from cskws_jax import bundle, model

    net = model.AfKws(tiny_afkws_config(3))
    params = jax.jit(net.init)(jax.random.key(0), {"audio": np.zeros((1, 16, 64), np.float32)})
    bundle.save(tmp_path / "bundle", net, params, ("alpha", "beta", "gamma"))
    assert commands.export([str(tmp_path / "bundle"), str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "detector.onnx").is_file()  # the keyword task's export
    capsys.readouterr()
    assert commands.export([str(tmp_path / "missing"), str(tmp_path / "o")]) == 2
    assert "no such bundle folder" in capsys.readouterr().err
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "bundle.json").write_text('{"task": "asr"}')
    assert commands.export([str(tmp_path / "odd"), str(tmp_path / "o")]) == 2
    assert "task: 'asr' is not one of" in capsys.readouterr().err
    assert commands.export([]) == 2
    assert commands.export(["--help"]) == 0
    assert "Exit status" in capsys.readouterr().out
