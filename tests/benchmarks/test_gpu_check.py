"""The device check's pieces on CPU: the project's XLA flags and precision policy
(speechkit.accelerator), the wheels it brings (benchmarks.gpu_wheels), how it reads test
results (benchmarks.junit) and runs, and the accelerator mode's search for real-time
streams."""

import os
import subprocess
import sys
import zipfile

import jax
import pytest

from benchmarks import gpu_check, gpu_wheels, junit
from benchmarks import streaming as streaming_benchmark
from speechkit import accelerator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Run in a fresh interpreter: refuses every installed top-level package but the
# distributions in ALLOWED and everything they require (and the project's own).
_ONLY_THE_MACHINES_PACKAGES = """
import importlib.machinery, importlib.metadata as metadata, re, sys, sysconfig

def normalise_distribution(name):
    return re.sub(r"[-_.]+", "-", name).lower()

def requirements(name):
    for line in metadata.requires(name) or ():
        if "extra ==" not in line:
            yield re.split(r"[\\s;<>=!~\\[(]", line, maxsplit=1)[0]

allowed, todo = set(), list(ALLOWED)
while todo:
    name = normalise_distribution(todo.pop())
    if name not in allowed:
        allowed.add(name)
        try:
            todo.extend(requirements(name))
        except metadata.PackageNotFoundError:
            pass
tops = {top for top, dists in metadata.packages_distributions().items()
        if any(normalise_distribution(d) in allowed for d in dists)} | set(PROJECT)
installed = tuple(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if path is not None or name in tops:
            return None  # a submodule, or an allowed top-level package
        spec = importlib.machinery.PathFinder.find_spec(name)
        where = spec and (spec.origin or next(iter(spec.submodule_search_locations or ()), ""))
        if where and where.startswith(installed):
            raise ModuleNotFoundError(f"No module named {name!r} there", name=name)

sys.meta_path.insert(0, Refuse())
for name in MODULES:
    __import__(name)
"""


def test_what_the_check_imports_loads_with_the_machines_packages_alone():
    """The accelerator machine has jax, flax, optax, orbax, numpy, scipy, scikit-learn,
    pytest and hypothesis, plus the check's wheels: no TFDS, Grain, pocketsphinx or
    tensorboardX. A model or benchmark that imports one of those at module level stops
    the whole check there (as TFDS, ml_collections and tensorboardX once did)."""
    allowed = gpu_wheels.MACHINE_PACKAGES + gpu_wheels.WHEEL_PACKAGES
    project = (
        "benchmarks",
        "experiments",
        "metrics",
        "multiqt_jax",
        "cskws_jax",
        "ctc_jax",
        "speechkit",
    )
    code = (
        f"ALLOWED = {allowed!r}\nPROJECT = {project!r}\n"
        f"MODULES = {gpu_check.CHECKED_MODULES!r}\n{_ONLY_THE_MACHINES_PACKAGES}"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize(
    "existing, expected",
    [
        ("", "--xla_gpu_deterministic_ops=true"),
        (
            "--xla_force_host_platform_device_count=2",
            "--xla_force_host_platform_device_count=2 --xla_gpu_deterministic_ops=true",
        ),
        ("--xla_gpu_deterministic_ops=false", "--xla_gpu_deterministic_ops=false"),
        ("--xla_gpu_deterministic_ops", "--xla_gpu_deterministic_ops"),
        ("  --xla_gpu_deterministic_ops=true  ", "--xla_gpu_deterministic_ops=true"),
    ],
)
def test_the_deterministic_flag_is_added_once_and_a_user_choice_kept(existing, expected):
    assert accelerator.with_flags(existing) == expected
    assert accelerator.with_flags(expected) == expected


def test_flags_are_set_before_jax_starts_and_left_alone_after():
    script = (
        "import os; from speechkit import accelerator as a; "
        "os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=3'; "
        "r = a.configure(); import jax; print(r['applied'], jax.device_count(), "
        "os.environ['XLA_FLAGS'])"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == [
        "True",
        "3",
        "--xla_force_host_platform_device_count=3",
        "--xla_gpu_deterministic_ops=true",
    ]
    jax.devices()  # this process: started
    environ = {"XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true"}
    assert accelerator.configure(environ=environ) == {
        "xla_flags": "--xla_cpu_use_thunk_runtime=true",
        "applied": False,
    }
    assert environ == {"XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true"}


@pytest.mark.parametrize(
    "platforms, expected", [("cpu", False), ("cuda", True), ("cuda,cpu", True), ("tpu", True)]
)
def test_an_accelerator_is_expected_from_jax_platforms(platforms, expected):
    assert accelerator.accelerator_expected({"JAX_PLATFORMS": platforms}) is expected


def test_precision_policy_names_map_to_lax_precisions():
    assert accelerator.lax_precision("highest") == jax.lax.Precision.HIGHEST
    assert accelerator.lax_precision("high") == jax.lax.Precision.HIGH
    assert accelerator.lax_precision("default") is None
    with pytest.raises(ValueError, match="precision: expected one of"):
        accelerator.check_precision("fp32")
    with accelerator.precision_scope("highest"):
        assert jax.config.jax_default_matmul_precision == "highest"
    with accelerator.precision_scope("default"):
        assert jax.config.jax_default_matmul_precision is None


def test_the_machine_is_described_and_named():
    machine = accelerator.describe()
    assert machine["backend"] == jax.default_backend() and machine["device_count"] >= 1
    assert accelerator.device_slug({"device_kind": "NVIDIA H200"}) == "nvidia-h200"
    assert accelerator.device_slug({"device_kind": "TPU v5 lite"}) == "tpu-v5-lite"


def test_wheel_specs_come_from_the_lock_file():
    with open(os.path.join(ROOT, "requirements.lock")) as lock:
        specs = gpu_wheels.wheel_specs(lock.read())
    assert len(specs) == len(gpu_wheels.WHEEL_PACKAGES)
    assert "sequence-layers==0.2" in specs and "typeguard==2.13.3" in specs
    with pytest.raises(ValueError, match="pins no version of"):
        gpu_wheels.wheel_specs("numpy==2.0\n", packages=("numpy", "einops"))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check", "--wheel-specs"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert done.stdout.split() == specs


def _wheel(folder, name: str, version: str) -> str:
    path = os.path.join(folder, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", f"VERSION = {version!r}\n")
        archive.writestr(
            f"{name}-{version}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n"
        )
    return path


def test_only_missing_or_other_versions_are_unpacked(tmp_path):
    wheels = [_wheel(tmp_path, "gpu_probe_a", "1.0"), _wheel(tmp_path, "gpu_probe_b", "2.0")]
    installed = {"gpu-probe-a": "1.0", "gpu-probe-b": "1.5"}.get
    assert gpu_wheels.wheel_identity(wheels[0]) == ("gpu-probe-a", "1.0")
    assert gpu_wheels.wheels_to_unpack(wheels, installed) == wheels[1:]
    target = tmp_path / "site"
    gpu_wheels.unpack(wheels[1:], str(target))
    assert (target / "gpu_probe_b" / "__init__.py").read_text() == "VERSION = '2.0'\n"
    report = gpu_wheels.provide_packages(str(tmp_path), str(tmp_path / "other"))
    assert sorted(report["unpacked"]) == sorted(os.path.basename(w) for w in wheels)


def test_junit_results_are_counted(tmp_path):
    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<testsuites><testsuite tests="4" failures="1" errors="0" skipped="1">'
        '<testcase classname="tests.a" name="ok"/>'
        '<testcase classname="tests.a" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="tests.a" name="skip"><skipped/></testcase>'
        '<testcase classname="tests.b" name="ok"/></testsuite></testsuites>'
    )
    counted = {
        "passed": 2,
        "failed": 1,
        "errors": 0,
        "skipped": 1,
        "failed_tests": ["tests.a::bad"],
    }
    assert junit.summary(str(xml)) == counted
    none = junit.summary(str(tmp_path / "never-written.xml"))  # a process killed early
    assert none == {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failed_tests": []}
    both = junit.total([counted, none, counted])
    assert both == {
        **{k: 2 * counted[k] for k in junit.COUNTS},
        "failed_tests": ["tests.a::bad"] * 2,
    }


def test_runs_are_compared_bit_for_bit():
    run = {
        "multiqt_params_sha256": "a",
        "multiqt_losses_bits": ["3f80"],
        "multiqt_losses": [[1.0]],
        "afkws_params_sha256": "b",
        "afkws_losses_bits": ["40"],
        "afkws_losses": [2.0],
    }
    assert gpu_check.compare_runs(run, dict(run)) == {"identical": True, "differences": []}
    other = {**run, "afkws_params_sha256": "c", "afkws_losses": [2.5]}
    assert gpu_check.compare_runs(run, other) == {
        "identical": False,
        "differences": ["afkws_params_sha256"],
        "afkws_max_abs_loss_difference": 0.5,
    }
    assert gpu_check.compare_runs(run, None)["identical"] is None


def test_the_contract_holds_only_within_tolerance_at_highest():
    heads = {f"{h}_max_abs_stream_minus_offline": 1e-7 for h in gpu_check.HEADS}
    kws = {**heads, "only_offline": 1, "only_streamed": 0}
    contract = {
        "multiqt": {"audio": {"highest": 2e-7, "default": 4e-4}},
        "afkws": {"highest": kws, "default": {**kws, "heatmap_max_abs_stream_minus_offline": 3e-4}},
        "ctc": {"default": {"highest": 3e-7, "default": 5e-4}},
    }
    summary = gpu_check.contract_summary(contract)
    assert summary["holds"] and summary["multiqt_max_at_default"] == 4e-4
    assert summary["afkws_heads_max_at_default"] == 3e-4
    assert summary["afkws_unmatched_detections"] == {"highest": 1, "default": 1}
    assert summary["ctc_max_at_default"] == 5e-4
    contract["ctc"]["default"]["highest"] = 2e-5
    assert not gpu_check.contract_summary(contract)["holds"]
    contract["ctc"]["default"]["highest"] = 3e-7
    contract["multiqt"]["audio"]["highest"] = 2e-5
    assert not gpu_check.contract_summary(contract)["holds"]


def test_the_budget_leaves_later_phases_their_reserve():
    clock = gpu_check.Clock(500)
    assert 200 <= clock.allow(210, "contract", "streaming") <= 210
    assert 235 < clock.allow(1000, "contract", "determinism", "train", "streaming") <= 240
    assert gpu_check.Clock(0).allow(100) == 10.0


def test_a_check_split_into_phases_judges_and_budgets_only_those():
    assert gpu_check.parse_phases("benchmarks, contract") == ("contract", "benchmarks")
    for bad in ("", "tests,training"):
        with pytest.raises(ValueError, match="--phases"):
            gpu_check.parse_phases(bad)
    alone = gpu_check.Clock(500, ("tests",))  # no cap, nothing reserved for phases not run
    assert 495 < alone.allow(240, "contract", "determinism", "train", "streaming") <= 500
    assert 375 < gpu_check.Clock(500, ("tests", "benchmarks")).allow(240, *gpu_check.RESERVE) <= 380
    report = {"machine": {"backend": "gpu"}, "contract": {"holds": True}}
    assert gpu_check.verdict(report, ("contract",))
    assert not gpu_check.verdict(report, ("contract", "tests"))
    assert not gpu_check.verdict({"contract": {"holds": True}}, ("contract",))


def _fake_batches(monkeypatch, seconds_per_stream: float, out_of_memory_at: int | None = None):
    def make_step(batch):
        if out_of_memory_at and batch >= out_of_memory_at:
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory")
        return None, batch

    monkeypatch.setattr(
        streaming_benchmark, "_time_batched", lambda compiled, batch: batch * seconds_per_stream
    )
    return make_step


def test_streams_per_device_grow_by_four_then_refine(monkeypatch):
    make_step = _fake_batches(monkeypatch, 1e-5)  # 100 streams per ms
    found = streaming_benchmark.device_streams(make_step, 0.0015, float("inf"), 2**20)
    assert found["realtime_streams_per_device"] == 128  # 1, 4, 16, 64, 256 (too slow), 128
    assert list(found["step_ms_by_batch"]) == ["1", "4", "16", "64", "256", "128"]
    assert found["stopped_by"] == "real time" and not found["lower_bound"]
    found = streaming_benchmark.device_streams(make_step, 1.0, float("inf"), 4096)
    assert found["realtime_streams_per_device"] == 4096 and found["lower_bound"]


def test_streams_per_device_stop_at_memory_and_budget(monkeypatch):
    make_step = _fake_batches(monkeypatch, 1e-9, out_of_memory_at=1024)
    found = streaming_benchmark.device_streams(make_step, 0.04, float("inf"), 2**20)
    assert found["realtime_streams_per_device"] == 512 and found["stopped_by"] == "memory"
    found = streaming_benchmark.device_streams(make_step, 0.04, 0.0, 2**20)
    assert found["realtime_streams_per_device"] == 0 and found["stopped_by"] == "budget"


def test_phases_run_side_by_side_and_are_stopped_at_their_time():
    quick = [sys.executable, "-c", "print('done')"]
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    first, second = gpu_check.run_together([quick, slow], dict(os.environ), timeout_s=2)
    assert first["rc"] == 0 and first["tail"].strip() == "done"
    assert second["rc"] is None and second["seconds"] < 10
