"""Hostile and broken export folders (`speechkit.export_read.read_folder`, through the tiny
AF-KWS export of `cskws_jax.export`): each is refused before any module runs, with a
`BundleError` naming the file and the field or call.

- a module holding a custom call whose target is not on the allowlist (issue 31's
  reproduction: one `stablehlo.custom_call @xla_ffi_python_cpu_callback` with a made-up
  callback index added to step.stablehlo, which made detect segfault), even with every
  checksum in export.json recomputed as a forger would;
- a flipped byte in step.stablehlo (its sha256, checked before deserializing);
- an edited `features.hop_ms`, `features.window_ms` or `block_outputs`, and an edited
  model config whose checksums were recomputed (the modules' signatures);
- module names and files that leave the folder (`../`, absolute, a symlink out);
- swapped modules, an export written before the checksums (refused: export again);
- edited model facts (state dtypes, sizes, counts and names, input blocks), each
  refused; a version 3 folder (no model facts) read with the model code's.

The crafted module is never run in this process: the refusal is asserted on reading,
and the command line is run in a subprocess (where the parent commit segfaulted).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import flatbuffers  # noqa: F401  # jax.export serialization: a dependency, never skipped
import jax
import numpy as np
import pytest

from cskws_jax import bundle, model
from cskws_jax import export as kws_export
from speechkit import export_format, export_read, stablehlo_checks
from speechkit.bundle import BundleError

ROOT = Path(__file__).resolve().parents[2]
CALLBACK = "xla_ffi_python_cpu_callback"


@pytest.fixture(scope="module")
def exported(tiny_afkws_config, tmp_path_factory) -> Path:
    """An export folder (forward, step of 2 output frames, export.json) of a tiny
    3-keyword AF-KWS bundle; tests copy it (`folder`) before breaking it."""
    root = tmp_path_factory.mktemp("export")
    net = model.AfKws(tiny_afkws_config(3))
    params = jax.jit(net.init)(jax.random.key(0), {"audio": np.zeros((1, 16, 64), np.float32)})
    bundle.save(root / "bundle", net, params, ("alpha", "beta", "gamma"))
    args = [str(root / "bundle"), str(root / "out"), "--block-outputs=2"]
    assert kws_export.main(args) == 0
    return root / "out"


@pytest.fixture
def folder(exported, tmp_path) -> Path:
    """A fresh copy of the export folder."""
    return Path(shutil.copytree(exported, tmp_path / "exported"))


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "export.json").read_text())


def _write_manifest(folder: Path, payload: dict, *, forge: bool = False) -> None:
    """export.json as `payload`; `forge`: with every module's sha256 and size and every
    field's sha256 recomputed, as someone crafting an export would."""
    if forge and isinstance(payload["modules"], dict):  # (a list: before the checksums)
        for field, suffix in (("modules", ".stablehlo"), ("onnx_modules", ".onnx")):
            for name, entry in payload.get(field, {}).items():
                data = (folder / f"{name}{suffix}").read_bytes()
                entry["sha256"] = hashlib.sha256(data).hexdigest()
                if "bytes" in entry:
                    entry["bytes"] = len(data)
        fields = {key: value for key, value in payload.items() if key != "fields_sha256"}
        payload["fields_sha256"] = export_format.fields_sha256(fields)
    (folder / "export.json").write_text(json.dumps(payload, indent=2))


def _refused(folder: Path, *fragments: str) -> str:
    """The BundleError of reading `folder`, checked to hold each fragment."""
    with pytest.raises(BundleError) as caught:
        kws_export.read_folder(folder)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def _crafted_step(step_path: Path) -> bytes:
    """step.stablehlo with one `stablehlo.custom_call @xla_ffi_python_cpu_callback` (a
    made-up callback index) added before main's return: the issue's crafted module,
    serialized as jax.export writes one. Never run."""
    from jax.export import deserialize
    from jax.extend.mlir import serialize_portable_artifact
    from jax.extend.mlir.dialects import stablehlo

    genuine = deserialize(bytearray(step_path.read_bytes()))
    text = genuine.mlir_module()
    main = text.index("func.func public @main")
    back = text.index("    return ", main)
    call = (
        f"    stablehlo.custom_call @{CALLBACK}() {{api_version = 4 : i32, backend_config = "
        "{index = 987654321 : ui64}, has_side_effect = true} : () -> ()\n"
    )
    crafted = text[:back] + call + text[back:]
    module = serialize_portable_artifact(crafted, stablehlo.get_current_version())
    return dataclasses.replace(genuine, mlir_module_serialized=module).serialize()


# ------------------------------------------------------------------------ allowlist


def test_own_exports_hold_only_allowed_custom_calls(exported):
    """The allowlist is what the project's exports contain (shape_assertion: the check
    of symbolic sizes), and each of them passes it."""
    found = set()
    for name in ("forward", "step"):
        path = exported / f"{name}.stablehlo"
        module = export_read.read(path)  # checked
        found |= set(stablehlo_checks.custom_call_targets(module.mlir_module(), path))
    assert found == set(stablehlo_checks.ALLOWED_CUSTOM_CALLS) == {"shape_assertion"}


def test_a_crafted_custom_call_is_refused_naming_the_file_and_the_target(folder):
    step = folder / "step.stablehlo"
    step.write_bytes(_crafted_step(step))
    _write_manifest(folder, _manifest(folder), forge=True)  # every checksum matches
    message = _refused(folder, str(step), f"stablehlo.custom_call @{CALLBACK}", "refused")
    assert "not an allowed call target" in message
    with pytest.raises(BundleError, match=f"step.stablehlo: stablehlo.custom_call @{CALLBACK}"):
        export_read.read(step)  # the single-module reader checks too


def test_detect_exits_2_on_the_crafted_export_instead_of_crashing(folder, tmp_path):
    """The issue's reproduction on the command line, in a subprocess: it died with a
    segmentation fault (exit 139, or -11 here) before the allowlist."""
    import soundfile

    step = folder / "step.stablehlo"
    step.write_bytes(_crafted_step(step))
    _write_manifest(folder, _manifest(folder), forge=True)
    wav = tmp_path / "call.wav"
    soundfile.write(wav, 0.1 * np.random.default_rng(0).normal(size=8000), 16000)
    done = subprocess.run(
        [sys.executable, "-m", "cskws_jax.detect", str(folder), str(wav)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert f"{step}: stablehlo.custom_call @{CALLBACK}: refused" in done.stderr


@pytest.mark.parametrize(
    ("text", "targets"),
    [
        ('%0 = stablehlo.custom_call @shape_assertion(%a) {x = "y"} : (tensor<i1>) -> ()', None),
        ('stablehlo.custom_call @"odd name"() : () -> ()', ["odd name"]),
        (
            '"stablehlo.custom_call"() <{call_target_name = "cb", api_version = 4}> : () -> ()',
            ["cb"],
        ),
        ("%0 = stablehlo.add %a, %b : tensor<f32>", []),
    ],
)
def test_custom_call_targets_reads_every_printed_form(text, targets):
    found = stablehlo_checks.custom_call_targets(text, "m.stablehlo")
    assert found == (["shape_assertion"] if targets is None else targets)


def test_a_custom_call_whose_target_cannot_be_read_is_refused():
    with pytest.raises(BundleError, match="m.stablehlo: a custom_call whose target cannot"):
        stablehlo_checks.custom_call_targets(
            "%0 = my.custom_call(%a) : (f32) -> f32", "m.stablehlo"
        )
    with pytest.raises(BundleError, match="m.stablehlo: a custom_call whose target cannot"):
        stablehlo_checks.custom_call_targets('"stablehlo.custom_call"() : () -> ()', "m.stablehlo")


# ------------------------------------------------------------------------ integrity


def test_a_flipped_byte_is_refused_before_deserializing(folder):
    step = folder / "step.stablehlo"
    data = bytearray(step.read_bytes())
    data[len(data) // 2] ^= 0x01
    step.write_bytes(bytes(data))
    _refused(folder, f"{step}: sha256 differs from export.json's modules.step.sha256")


@pytest.mark.parametrize("forge", [False, True])
def test_an_edited_hop_is_refused_naming_the_field(folder, forge):
    payload = _manifest(folder)
    payload["features"]["hop_ms"] = 12.5
    _write_manifest(folder, payload, forge=forge)
    _refused(folder, f"{folder / 'export.json'}: features.hop_ms: 12.5", "10 ms")


def test_an_edited_field_the_modules_cannot_check_is_caught_by_its_checksum(folder):
    payload = _manifest(folder)
    payload["features"]["window_ms"] = 30.0
    _write_manifest(folder, payload)
    _refused(
        folder, f"{folder / 'export.json'}: features: its sha256 is not fields_sha256.features"
    )


@pytest.mark.parametrize("forge", [False, True])
def test_an_edited_block_is_refused_naming_the_field(folder, forge):
    payload = _manifest(folder)
    payload["block_outputs"] = 3
    _write_manifest(folder, payload, forge=forge)
    _refused(
        folder,
        f"{folder / 'export.json'}: block_outputs: 3; step.stablehlo steps 2 output frames",
    )


def test_a_forged_model_config_is_refused_by_the_signature(folder):
    """Checksums recomputed: the step's input width (model_config.features, with the
    front end's num_mels to match) no longer fits the module."""
    payload = _manifest(folder)
    payload["model_config"]["features"] = 40
    payload["features"]["num_mels"] = 40
    _write_manifest(folder, payload, forge=True)
    _refused(
        folder,
        f"{folder / 'export.json'}: model_config: forward.stablehlo's argument [0] is "
        "float32[b,4*t,64]; the model config and block_outputs make float32[b,4*t,40]",
    )


def test_swapped_modules_are_refused(folder):
    forward, step = folder / "forward.stablehlo", folder / "step.stablehlo"
    forward_bytes, step_bytes = forward.read_bytes(), step.read_bytes()
    forward.write_bytes(step_bytes)
    step.write_bytes(forward_bytes)
    _write_manifest(folder, _manifest(folder), forge=True)
    _refused(folder, "forward.stablehlo: its arguments are", "model_config makes a forward")


# ------------------------------------------------------------------- names and files


@pytest.mark.parametrize("name", ["../step", "/tmp/step", "sub/step", "step.", ""])
def test_module_names_may_not_leave_the_folder(folder, name):
    payload = _manifest(folder)
    payload["modules"][name] = payload["modules"].pop("step")
    _write_manifest(folder, payload, forge=False)
    _refused(folder, f"{folder / 'export.json'}: modules: {name!r}: not a module name")


def test_a_module_file_elsewhere_is_refused(folder):
    payload = _manifest(folder)
    payload["modules"]["step"]["file"] = "../step.stablehlo"
    _write_manifest(folder, payload)
    _refused(folder, f"{folder / 'export.json'}: modules.step.file: expected 'step.stablehlo'")


def test_a_symlink_out_of_the_folder_is_refused(folder, tmp_path):
    outside = tmp_path / "elsewhere" / "step.stablehlo"
    outside.parent.mkdir()
    shutil.move(folder / "step.stablehlo", outside)  # the genuine bytes: only the place is wrong
    (folder / "step.stablehlo").symlink_to(outside)
    _refused(folder, f"{folder / 'step.stablehlo'}: a symlink to {outside}, outside the export")


def test_an_export_written_before_the_checksums_is_refused_with_how_to_export_again(folder):
    payload = _manifest(folder)
    old = {key: value for key, value in payload.items() if key != "fields_sha256"}
    del old["format_version"]
    old["modules"] = list(old["modules"])
    _write_manifest(folder, old)
    _refused(
        folder,
        f"{folder / 'export.json'}: format_version: missing",
        "export the bundle again: python -m cskws_jax.export BUNDLE",
    )


def test_unknown_fields_and_wrong_types_are_named(folder):
    payload = _manifest(folder)
    _write_manifest(folder, {**payload, "extra": 1})
    _refused(folder, f"{folder / 'export.json'}: extra: not a field of export.json")
    _write_manifest(folder, {**payload, "modules": 5})
    _refused(folder, f"{folder / 'export.json'}: modules: expected dict, got int 5")
    (folder / "export.json").write_text("[" * 100000)
    _refused(folder, f"{folder / 'export.json'}: not readable JSON")


@pytest.mark.parametrize(
    "option, expected",
    [
        ("--platforms=bogus", "'bogus': expected distinct names of cpu, cuda, rocm, tpu"),
        ("--platforms=cpu,cpu", "'cpu,cpu': expected distinct names of"),
        ("--block-outputs=0", "'0': expected an integer in [1, 6000]"),
        ("--block-outputs=1e9", "'1e9': expected an integer in [1, 6000]"),
    ],
)
def test_export_arguments_are_usage_errors(exported, tmp_path, capsys, option, expected):
    with pytest.raises(SystemExit) as stop:
        kws_export.main([str(exported.parent / "bundle"), str(tmp_path / "out"), option])
    assert stop.value.code == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_export_into_a_file_is_refused(exported, tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("not a folder")
    assert kws_export.main([str(exported.parent / "bundle"), str(target)]) == 2
    assert f"error: {target}: exists and is not a folder" in capsys.readouterr().err
    assert target.read_text() == "not a folder"


def _refused_onnx(folder: Path, *fragments: str) -> None:
    with pytest.raises(BundleError) as caught:
        kws_export.read_folder(folder, backend="onnx")
    for fragment in fragments:
        assert fragment in str(caught.value), (fragment, str(caught.value))


def test_own_onnx_modules_pass_their_checks_and_an_edited_one_is_refused(folder):
    info, block_outputs, modules, _ = kws_export.read_folder(folder, backend="onnx")
    assert sorted(modules) == ["detector", "forward", "frontend", "step", "stream"]
    data = bytearray((folder / "detector.onnx").read_bytes())
    data[len(data) // 2] ^= 1
    (folder / "detector.onnx").write_bytes(bytes(data))
    _refused_onnx(folder, "detector.onnx: sha256 differs", "onnx_modules.detector.sha256")


def test_a_forged_onnx_module_is_refused_by_its_checks(folder):
    """A custom operator added to step.onnx, every checksum recomputed as a forger would:
    refused by the operator allowlist before onnxruntime sees it."""
    import onnx

    step = onnx.load_from_string((folder / "step.onnx").read_bytes())
    step.graph.node.insert(0, onnx.helper.make_node("Run", ["block"], ["r"], domain="evil"))
    (folder / "step.onnx").write_bytes(step.SerializeToString())
    payload = _manifest(folder)
    payload["onnx_modules"]["step"]["sha256"] = hashlib.sha256(
        (folder / "step.onnx").read_bytes()
    ).hexdigest()
    _write_manifest(folder, payload, forge=True)
    _refused_onnx(folder, "step.onnx: operator evil.Run", "refused")


def test_a_version_2_folder_reads_with_jax_and_names_the_missing_onnx(folder):
    payload = _manifest(folder)
    for name in payload.pop("onnx_modules"):
        (folder / f"{name}.onnx").unlink()
    del payload["model_facts"]
    payload["format_version"] = 2
    _write_manifest(folder, payload, forge=True)
    kws_export.read_folder(folder)
    _refused_onnx(folder, "onnx_modules: none", "export the bundle again")


def test_an_onnx_module_missing_from_the_list_is_refused(folder):
    payload = _manifest(folder)
    del payload["onnx_modules"]["detector"]
    _write_manifest(folder, payload, forge=True)
    _refused_onnx(
        folder, "onnx_modules: ['forward', 'frontend', 'step', 'stream']; a cskws export holds"
    )


def test_a_folder_of_version_5_reads_without_the_stream_module_and_one_of_6_does_not(folder):
    """The stream module came with format version 6: older folders lack it."""
    payload = _manifest(folder)
    del payload["onnx_modules"]["stream"]
    (folder / "stream.onnx").unlink()
    _write_manifest(folder, payload, forge=True)
    _refused_onnx(folder, "onnx_modules: ['detector', 'forward', 'frontend', 'step']; a cskws")
    payload["format_version"] = 5
    _write_manifest(folder, payload, forge=True)
    assert "stream" not in kws_export.read_folder(folder, backend="onnx").modules


# ---------------------------------------------------------------------- model facts


@pytest.mark.parametrize(
    ("edit", "fragments"),
    [
        (
            lambda f: f["states"]["step"][0].update(dtype="complex128"),
            ("model_facts.states.step[0].dtype: expected one of",),
        ),
        (
            lambda f: f["states"]["step"][0].update(shape=["b", 10**6, 10**6]),
            ("model_facts.states.step: one stream's state would take",),
        ),
        (
            lambda f: f["states"]["step"].extend([{"shape": [1], "dtype": "bool"}] * 5000),
            ("model_facts.states.step: expected a list of at most 4096 arrays",),
        ),
        (
            lambda f: f["states"].pop("detector"),
            ("model_facts.states: ['step']; the model config makes ['detector', 'step']",),
        ),
        (
            lambda f: f["streaming_spec"]["inputs"]["audio"].update(block=8),
            ("model_facts.streaming_spec.inputs.audio: block 8 of 10 ms frames", "makes 4"),
        ),
        (
            lambda f: f["streaming_spec"]["inputs"].update(
                text=dict(f["streaming_spec"]["inputs"]["audio"])
            ),
            ("model_facts.streaming_spec.inputs: ['audio', 'text']",),
        ),
        (
            lambda f: f.update(extra=1),
            ("model_facts: expected an object of streaming_spec, states",),
        ),
        (
            lambda f: f["streaming_spec"].update(output_latency=2**31),
            ("model_facts.streaming_spec.output_latency: 2147483648; the model config makes 2",),
        ),
        (
            lambda f: f["streaming_spec"]["inputs"]["audio"].update(block=10**400),
            ("model_facts.streaming_spec.inputs.audio.block: an output frame spans",),
        ),
        (
            lambda f: f["streaming_spec"]["inputs"]["audio"].update(receptive_field=10**9),
            ("model_facts.streaming_spec.inputs.audio.receptive_field: the receptive field",),
        ),
    ],
)
def test_edited_model_facts_are_refused_before_any_module(folder, edit, fragments):
    """model_facts that a forger edited (every checksum recomputed): out of bounds or not
    what the model config makes, refused with the part named."""
    payload = _manifest(folder)
    edit(payload["model_facts"])
    _write_manifest(folder, payload, forge=True)
    _refused(folder, *fragments)


def test_a_state_that_does_not_fit_the_module_is_refused(folder):
    """State shapes consistent with the config's names but not with step.stablehlo."""
    payload = _manifest(folder)
    payload["model_facts"]["states"]["step"][0]["shape"][-1] += 1
    _write_manifest(folder, payload, forge=True)
    _refused(folder, "step.stablehlo's argument")


def test_a_version_3_folder_reads_its_facts_from_the_model_code(folder):
    payload = _manifest(folder)
    del payload["model_facts"], payload["onnx_modules"]["stream"]  # both came later
    payload["format_version"] = 3
    _write_manifest(folder, payload, forge=True)
    old = kws_export.read_folder(folder)
    assert old.facts == kws_export.read_folder(folder, backend="onnx").facts
    assert old.facts == kws_export.model_facts(old.info, old.block_outputs)
