"""Hostile bundles (issue 31, items 4 and 7): a zip-bombed or lying params.npz, absurd or
invalid size fields and non-finite parameters or front-end fields are refused quickly,
before anything big is built or decompressed, with a `BundleError` naming the file and
the field. Bounds come from `speechkit.checks` (MAX_CONTEXT_S, available memory) and
from the arrays bundle.json lists; the presets stay valid."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jax
import numpy as np
import pytest

from cskws_jax import bundle as cskws_bundle
from cskws_jax import model as cskws_model
from ctc_jax import bundle as ctc_bundle
from multiqt_jax import bundle as multiqt_bundle
from multiqt_jax import labels as multiqt_labels
from multiqt_jax import model as multiqt_model
from speechkit import bundle
from speechkit.bundle import BundleError

ROOT = Path(__file__).resolve().parents[2]
GUARD_S = 60  # a hang fails the test (pytest-timeout) instead of stalling the suite


def _random_params(expected) -> dict:
    """Random arrays of the shapes of `expected` (a tree of ShapeDtypeStructs): a
    bundle's parameters without compiling the model's init."""
    rng = np.random.default_rng(0)
    return jax.tree_util.tree_map(
        lambda leaf: rng.normal(size=leaf.shape).astype(leaf.dtype), expected
    )


@pytest.fixture(scope="module")
def afkws_folder(tmp_path_factory, tiny_afkws_config):
    """A tiny 3-keyword AF-KWS bundle (the conftest's config)."""
    config = tiny_afkws_config(3)
    params = _random_params(cskws_bundle.expected_params(config))
    folder = tmp_path_factory.mktemp("afkws") / "bundle"
    cskws_bundle.save(folder, cskws_model.AfKws(config), params, ["a", "b", "c"], corpus="toy")
    return folder


@pytest.fixture(scope="module")
def multiqt_folder(tmp_path_factory, tiny_multiqt_config):
    """A tiny gated-fusion MultiQT bundle (the conftest's config)."""
    config = tiny_multiqt_config(fusion="gated", fusion_size=4)
    params = _random_params(multiqt_bundle.expected_params(config))
    folder = tmp_path_factory.mktemp("multiqt") / "bundle"
    classes = multiqt_labels.classes("questions")
    multiqt_bundle.save(folder, multiqt_model.MultiQT(config), params, classes, corpus="toy")
    return folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(folder, copy)
    return copy


def _edit(folder: Path, path: str, value) -> None:
    """Sets bundle.json's field at `path` ("model_config.stages.0.blocks") to `value`."""
    manifest_path = folder / bundle.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    *parents, last = [int(key) if key.isdigit() else key for key in path.split(".")]
    node = manifest
    for key in parents:
        node = node[key]
    node[last] = value
    manifest_path.write_text(json.dumps(manifest))  # inf is written as Infinity


def _forge_sha256(folder: Path) -> None:
    """A sender can rewrite the manifest's sha256 along with params.npz."""
    digest = hashlib.sha256((folder / bundle.PARAMS).read_bytes()).hexdigest()
    _edit(folder, "params.sha256", digest)


# ------------------------------------------------------------------ absurd size fields


def _ids(cases) -> list[str]:
    """ "field=value" test ids, a long integer written as 1eN."""
    return [
        f"{path}=1e{len(str(value)) - 1}"
        if isinstance(value, int) and value > 10**6
        else f"{path}={value!r}"
        for path, value, _ in cases
    ]


AFKWS_CASES = [  # (bundle.json field, value, what the error must name)
    ("model_config.delay", 10**9, r"AfKwsConfig\.delay: the look-ahead"),
    ("model_config.stages.0.dilation", 10**6, r"AfKwsConfig\.stages\[0\]\.dilation: the recep"),
    ("model_config.stages.0.blocks", 100_000, r"AfKwsConfig\.stages\[0\]\.blocks: the receptiv"),
    ("model_config.stages.1.stride", 10**5, r"AfKwsConfig\.stages\[1\]\.stride: the output hop"),
    ("model_config.kernel", 10**7, r"AfKwsConfig\.kernel: the stem's kernel"),
    ("model_config.stem_channels", -5, r"AfKwsConfig\.stem_channels: expected an int >= 1"),
    ("model_config.head_channels", 0, r"AfKwsConfig\.head_channels: expected an int >= 1"),
    ("model_config.stages.0.dilation", 0, r"AfKwsConfig\.stages\[0\]\.dilation: expected an int"),
    ("model_config.stages.0.channels", 0, r"AfKwsConfig\.stages\[0\]\.channels: expected an int"),
    ("model_config.features", 0, r"AfKwsConfig\.features: expected an int >= 1"),
    ("model_config.stem_channels", 10**9, r"AfKwsConfig\.stem_channels: the model's .* memory"),
    ("model_config.delay", 10**4000, r"AfKwsConfig\.delay: the look-ahead"),  # 4001 digits
    ("decoding.radius", 10**6, r"PeakDecodingConfig\.radius: the peak window"),
    ("decoding.radius", 10**9, r"PeakDecodingConfig\.radius: the peak window"),
    ("decoding.max_detections", 10**15, r"PeakDecodingConfig\.max_detections: .* memory"),
    ("features.fft_size", 10**10, r"FeatureConfig\.fft_size: one FFT spans"),
    ("features.hop_ms", 0.01, r"FeatureConfig\.hop_ms: expected at least 1 sample"),
    ("features.window_ms", 1e9, r"FeatureConfig\.window_ms: expected a value in"),
    ("features.sample_rate", 10**13, r"FeatureConfig\.sample_rate: .* memory"),
    ("features.num_mels", 10**10, r"FeatureConfig\.num_mels: the mel filterbank"),
    ("features.log_floor", -1.0, r"FeatureConfig\.log_floor: expected a value in \(0, "),
    ("features.log_floor", 0.0, r"FeatureConfig\.log_floor: expected a value in \(0, "),
    ("features.log_floor", float("inf"), r"FeatureConfig\.log_floor: expected a finite number"),
    ("features.log_floor", float("nan"), r"FeatureConfig\.log_floor: expected a finite number"),
    ("features.log_floor", 1e30, r"FeatureConfig\.log_floor: expected a value in \(0, "),
    ("features.window_ms", 10**400, r"window_ms: a 1329-bit integer, beyond a float"),
    (
        "params.arrays.params/backbone/head_conv/kernel.dtype",
        [],
        r"params\.arrays\.params/backbone/head_conv/kernel\.dtype: expected one of",
    ),
]


MULTIQT_CASES = [
    ("model_config.audio_dilations.1", 10**6, r"MultiQTConfig\.audio_dilations\[1\]: the audio"),
    ("model_config.text_kernels.0", 10**5, r"MultiQTConfig\.text_kernels\[0\]: the text enc"),
    ("model_config.audio_strides.0", 10**9, r"MultiQTConfig\.audio_strides\[0\]: the audio out"),
    ("model_config.audio_channels.0", 0, r"MultiQTConfig\.audio_channels: expected a tuple of"),
    ("model_config.dense.0", -1, r"MultiQTConfig\.dense: expected a tuple of ints >= 1"),
    ("model_config.fusion_size", 0, r"MultiQTConfig\.fusion_size: expected an int >= 1"),
    ("model_config.fusion_size", 10**6, r"MultiQTConfig\.fusion_size: the model's .* memory"),
    ("model_config.text_symbols", 0, r"MultiQTConfig\.text_symbols: expected an int >= 1"),
]
FIELD_CASES = [  # each task's cases on its bundle (a fixture) and with its loader
    pytest.param(fixture, load, *case, id=case_id)
    for fixture, load, cases in [
        ("afkws_folder", cskws_bundle.load, AFKWS_CASES),
        ("multiqt_folder", multiqt_bundle.load, MULTIQT_CASES),
    ]
    for case, case_id in zip(cases, _ids(cases), strict=True)
]


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize("fixture, load, path, value, message", FIELD_CASES)
def test_an_absurd_or_invalid_field_is_refused_naming_it(
    request, tmp_path, fixture, load, path, value, message
):
    folder = _copy(request.getfixturevalue(fixture), tmp_path)
    _edit(folder, path, value)
    with pytest.raises(BundleError, match=message) as caught:
        load(folder)
    assert str(folder / bundle.MANIFEST) in str(caught.value)
    assert path.split(".")[0] in str(caught.value)


@pytest.mark.timeout(GUARD_S)
def test_a_config_of_more_arrays_than_listed_is_refused_before_its_model_is_built(
    afkws_folder, tmp_path
):
    """Kernel-1 blocks add no receptive field and few parameters: 100000 of them pass
    the config's own bounds, and are refused by counting the arrays bundle.json lists
    instead of tracing a model of 200000 layers."""
    folder = _copy(afkws_folder, tmp_path)
    _edit(folder, "model_config.kernel", 1)
    _edit(folder, "model_config.stages.0.blocks", 100_000)
    with pytest.raises(BundleError, match=r"model_config\.stages\[0\]: the config's model has "):
        cskws_bundle.load(folder)


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"format": 1' + "0" * 5000 + "}"],
    ids=["nested 100000 deep", "5001 digits"],
)
def test_json_that_python_cannot_read_is_a_bundle_error(afkws_folder, tmp_path, text):
    """Arrays nested 100000 deep (RecursionError) and a 5001-digit integer (ValueError
    past Python's 4300-digit limit) are "not readable JSON", not a traceback."""
    folder = _copy(afkws_folder, tmp_path)
    (folder / bundle.MANIFEST).write_text(text)
    with pytest.raises(BundleError, match=r"bundle.json: not readable JSON"):
        cskws_bundle.load(folder)


def test_detect_exits_2_naming_the_field(afkws_folder, tmp_path):
    """End to end: the command line's documented exit status for a bad model folder."""
    folder = _copy(afkws_folder, tmp_path)
    _edit(folder, "model_config.stem_channels", -5)
    done = subprocess.run(
        [sys.executable, "-m", "cskws_jax.detect", str(folder), str(tmp_path / "none.wav")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "bundle.json: model_config: AfKwsConfig.stem_channels" in done.stderr
    assert "Traceback" not in done.stderr


# ---------------------------------------------------------------- the presets stay valid


@pytest.mark.parametrize("preset", ["smoke", "quick", "full"])
def test_the_presets_pass_the_bounds(preset):
    from cskws_jax import train
    from experiments import common
    from experiments.configs import cskws as cskws_configs
    from experiments.configs import multiqt as multiqt_configs

    config = cskws_configs.get_config(preset)
    for unknown in (True, False):
        common.build(
            cskws_model.AfKwsConfig, config.model, "model", num_keywords=20, unknown_class=unknown
        )
    common.build(train.PeakDecodingConfig, config.decode, "decode")
    config = multiqt_configs.get_config(preset)
    for modalities in (("audio", "text"), ("audio",), ("text",)):
        common.build(
            multiqt_model.MultiQTConfig, config.model, "model", num_classes=7, modalities=modalities
        )


def test_the_bounds_leave_room_above_the_full_presets():
    """The default (= full preset) models' receptive fields are about a second, the
    stated maximum a minute: the bound is far from any model of the project."""
    from speechkit import checks

    afkws = cskws_model.streaming_spec(cskws_model.AfKwsConfig())
    assert afkws.receptive_field_s("audio") + afkws.latency_s < checks.MAX_CONTEXT_S / 10
    multiqt = multiqt_model.streaming_spec(multiqt_model.MultiQTConfig(num_classes=7))
    assert max(multiqt.receptive_field_s(name) for name in ("audio", "text")) < 2


AFKWS_CONFIGS = [
    cskws_model.AfKwsConfig(),
    cskws_model.AfKwsConfig(num_keywords=4, unknown_class=False, kernel=3, head_channels=5),
    cskws_model.AfKwsConfig(
        stem_channels=8,
        stages=(cskws_model.Stage(8, 1, 3, 2), cskws_model.Stage(6, 3, 2, 1)),
        features=10,
    ),
]


@pytest.mark.parametrize("config", AFKWS_CONFIGS)
def test_afkws_parameter_parts_count_what_init_makes(config):
    leaves = jax.tree_util.tree_leaves(cskws_bundle.expected_params(config))
    parts = config.parameter_parts()
    assert sum(arrays for arrays, _ in parts.values()) == len(leaves)
    assert sum(scalars for _, scalars in parts.values()) == sum(leaf.size for leaf in leaves)


@pytest.mark.parametrize("fusion", ["concat", "sum", "gated", "tensor"])
@pytest.mark.parametrize("modalities", [("audio", "text"), ("audio",), ("text",)])
def test_multiqt_parameter_parts_count_what_init_makes(fusion, modalities):
    config = multiqt_model.MultiQTConfig(
        num_classes=5, fusion=fusion, fusion_size=3, dense=(6, 4), modalities=modalities
    )
    leaves = jax.tree_util.tree_leaves(multiqt_bundle.expected_params(config))
    parts = config.parameter_parts()
    assert sum(arrays for arrays, _ in parts.values()) == len(leaves)
    assert sum(scalars for _, scalars in parts.values()) == sum(leaf.size for leaf in leaves)


def test_the_size_checks_name_the_field_and_never_overflow():
    from speechkit import checks

    checks.require_context("x", 6000, 0.01, "the receptive field")  # exactly a minute
    with pytest.raises(ValueError, match=r"^x: the receptive field spans 60\.01 s of audio"):
        checks.require_context("x", 6001, 0.01, "the receptive field")
    with pytest.raises(ValueError, match=r"spans 1\.000e\+3998 s .*\(1\.000e\+4000 frames"):
        checks.require_context("x", 10**4000, 0.01, "the receptive field")
    with pytest.raises(ValueError, match=r"^y: the arrays would take 4\.4 TB; .* available"):
        checks.require_memory("y", 4 << 40, "the arrays")
    checks.require_memory("y", 1 << 20, "a megabyte")
    assert checks.byte_text(10**4000).endswith(" TB") and checks.byte_text(999) == "999 bytes"
    assert checks.receptive_field([(5, 2, 1, 1), (5, 1, 2, 3), (3, 1, 1, 0)]) == 1 + 4 + 3 * 16


def test_the_closed_form_receptive_field_is_the_models():
    from speechkit import checks

    for config in AFKWS_CONFIGS:
        layers = [(config.kernel, 1, 1, 1)]
        for stage in config.stages:
            layers += [(config.kernel, stage.stride, 1, 1), (config.kernel, 1, stage.dilation, 1)]
            layers += [(config.kernel, 1, 1, stage.blocks - 1)]
            layers += [(config.kernel, 1, stage.dilation, stage.blocks - 1)]
        layers.append((3, 1, 1, 1))
        spec = cskws_model.streaming_spec(config)
        assert checks.receptive_field(layers) == spec.inputs["audio"].receptive_field
    config = multiqt_model.MultiQTConfig(num_classes=4)
    spec = multiqt_model.streaming_spec(config)
    for name in ("audio", "text"):
        sizes = (getattr(config, f"{name}_{part}") for part in ("kernels", "strides", "dilations"))
        layers = [(k, s, d, 1) for k, s, d in zip(*sizes, strict=True)]
        assert checks.receptive_field(layers) == spec.inputs[name].receptive_field


# ------------------------------------------------------------------ params.npz members


def _rewrite_npz(folder: Path, members: dict[str, bytes], compress: bool = False) -> None:
    """params.npz as exactly `members` ({member name: .npy bytes}), sha256 forged."""
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(folder / bundle.PARAMS, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    _forge_sha256(folder)


def _npy(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _npy_header(shape, dtype="<f4") -> bytes:
    import io

    buffer = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def _members(folder: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(folder / bundle.PARAMS) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


HEATMAP = "params/heatmap/kernel"


@pytest.mark.timeout(GUARD_S)
def test_a_header_claiming_4_tib_is_refused_naming_the_member(afkws_folder, tmp_path):
    folder = _copy(afkws_folder, tmp_path)
    members = _members(folder)
    members[f"{HEATMAP}.npy"] = _npy_header((2**40,))  # 4 TiB of float32, no data
    _rewrite_npz(folder, members)
    with pytest.raises(BundleError, match=rf"params.npz: {HEATMAP}.npy: the .npy header declares "):
        cskws_bundle.load(folder)


@pytest.mark.timeout(GUARD_S)
def test_a_manifest_listing_4_tib_is_refused_for_memory(afkws_folder, tmp_path):
    folder = _copy(afkws_folder, tmp_path)
    members = _members(folder)
    members[f"{HEATMAP}.npy"] = _npy_header((2**40,))
    _rewrite_npz(folder, members)
    _edit(folder, f"params.arrays.{HEATMAP}.shape", [2**40])
    with pytest.raises(BundleError, match=rf"bundle.json: params.arrays: .*{HEATMAP}.* memory"):
        cskws_bundle.load(folder)


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize("change", ["extra", "missing", "not npy", "size", "dtype", "garbage"])
def test_members_that_differ_from_the_manifest_are_refused(afkws_folder, tmp_path, change):
    folder = _copy(afkws_folder, tmp_path)
    members = _members(folder)
    kernel = members[f"{HEATMAP}.npy"]
    if change == "extra":
        members["params/planted.npy"] = _npy(np.zeros(3, np.float32))
        message = r"params.npz: params/planted.npy: not an array bundle.json lists"
    elif change == "missing":
        del members[f"{HEATMAP}.npy"]
        message = rf"params.npz: {HEATMAP}: missing \(listed in bundle.json\)"
    elif change == "not npy":
        members["notes.txt"] = b"hello"
        message = r"params.npz: notes.txt: not an array bundle.json lists"
    elif change == "size":  # a header that fits the manifest, and 1 MB behind it (deflated)
        members[f"{HEATMAP}.npy"] = kernel + bytes(1 << 20)
        message = rf"params.npz: {HEATMAP}.npy: 1.05 MB uncompressed in the zip directory"
    elif change == "dtype":
        members[f"{HEATMAP}.npy"] = _npy(np.zeros((8, 4), ">f4"))
        message = rf"{HEATMAP}.npy: the .npy header declares >f4 \(8, 4\)"
    else:
        (folder / bundle.PARAMS).write_bytes(b"PK\x03\x04 not a zip really" * 10)
        _forge_sha256(folder)
        message = r"params.npz: not an .npz \(a zip of .npy arrays\)"
    if change != "garbage":
        _rewrite_npz(folder, members, compress=change == "size")
    with pytest.raises(BundleError, match=message):
        cskws_bundle.load(folder)


@pytest.mark.timeout(GUARD_S)
def test_a_params_npz_longer_than_its_arrays_can_be_is_refused_before_hashing(
    afkws_folder, tmp_path
):
    folder = _copy(afkws_folder, tmp_path)
    with open(folder / bundle.PARAMS, "ab") as params:
        params.write(bytes(1 << 20))
    with pytest.raises(BundleError, match=r"params.npz: 1.\d+ MB; an .npz of the arrays"):
        cskws_bundle.load(folder)


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_parameters_are_refused_naming_the_array(afkws_folder, tmp_path, value):
    folder = _copy(afkws_folder, tmp_path)
    with np.load(folder / bundle.PARAMS) as archive:
        flat = dict(archive)
    flat[HEATMAP][2, 1] = value
    np.savez(folder / bundle.PARAMS, **flat)
    _forge_sha256(folder)
    message = rf"params.npz: {HEATMAP}: 1 of 32 values are not finite .* at \(2, 1\)"
    with pytest.raises(BundleError, match=message):
        cskws_bundle.load(folder)


# ------------------------------------------------------------------------- the zip bomb

BOMB_CHILD = r"""
import dataclasses, json, sys, zipfile
import numpy as np
from speechkit import bundle

@dataclasses.dataclass(frozen=True)
class BombConfig:
    width: int = 2**17  # 512 kB of float32: a params.npz may be that long

@dataclasses.dataclass(frozen=True)
class BombDecoding:
    threshold: float = 0.5

def expected(config):
    return {"params": {"w": np.zeros(config.width, np.float32)}}

def peak_mb():  # this process's peak resident memory (VmHWM starts afresh at exec,
    # unlike ru_maxrss, which keeps the forking parent's)
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024

folder, variant, megabytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
bundle.save(folder, task="bomb", params=expected(BombConfig()), model_config=BombConfig(),
            features=bundle.FeatureConfig(), labels=["x"], decoding=BombDecoding(), corpus="")
# params/w.npy: a header declaring `megabytes` MB of float32, and that many zero bytes,
# deflated to a fraction of a megabyte (written in pieces: the writer stays small too)
count = megabytes * 2**20 // 4
with zipfile.ZipFile(f"{folder}/params.npz", "w", zipfile.ZIP_DEFLATED) as archive:
    with archive.open("params/w.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array_header_1_0(
            member, {"descr": "<f4", "fortran_order": False, "shape": (count,)}
        )
        chunk = bytes(2**20)
        for _ in range(megabytes):
            member.write(chunk)
import hashlib, os
manifest = json.load(open(f"{folder}/bundle.json"))
manifest["params"]["sha256"] = hashlib.sha256(open(f"{folder}/params.npz", "rb").read()).hexdigest()
if variant == "manifest agrees":  # the manifest lists the bomb's shape too
    manifest["params"]["arrays"]["params/w"]["shape"] = [count]
json.dump(manifest, open(f"{folder}/bundle.json", "w"))
before = peak_mb()
try:
    bundle.load(folder, task="bomb", model_config_type=BombConfig, decoding_type=BombDecoding,
                expected_params=expected)
    error = None
except bundle.BundleError as err:
    error = str(err)
after = peak_mb()
print(json.dumps({"error": error, "grew_mb": after - before, "peak_mb": after,
                  "file_mb": os.path.getsize(f"{folder}/params.npz") / 2**20}))
"""


@pytest.mark.parametrize("variant", ["manifest tiny", "manifest agrees"])
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc's VmHWM")
def test_a_zip_bomb_is_refused_before_it_is_decompressed(tmp_path, variant):
    """A 0.2 MB params.npz (no longer than the 0.5 MB of arrays bundle.json lists) whose
    one member inflates to 200 MB: refused, and the loading process's peak memory
    (measured in it, around the load) grows by far less than that."""
    done = subprocess.run(
        [sys.executable, "-c", BOMB_CHILD, str(tmp_path / "bomb"), variant, "200"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["file_mb"] < 1
    assert result["error"] is not None and "params.npz: params/w" in result["error"]
    if variant == "manifest tiny":
        assert "the .npy header declares float32 (52428800,) (210 MB)" in result["error"]
    else:
        assert "shape (52428800,); the config expects (131072,)" in result["error"]
    assert result["grew_mb"] < 50, result


# ------------------------------------------------------- the shipped bundles still load

SHIPPED_BUNDLES = [  # (folder, the task's loader): every bundle the project ships or freezes
    ("cskws_jax/models/afkws-top20", cskws_bundle.load),
    ("multiqt_jax/models/multiqt-questions", multiqt_bundle.load),
    ("multiqt_jax/models/multiqt-questions-audio", multiqt_bundle.load),
    ("ctc_jax/models/quick", ctc_bundle.load),
    ("tests/fixtures/frozen/cskws-bundle", cskws_bundle.load),
    ("tests/fixtures/frozen/multiqt-bundle", multiqt_bundle.load),
]


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize("folder, load", SHIPPED_BUNDLES, ids=[f for f, _ in SHIPPED_BUNDLES])
def test_the_shipped_bundles_pass_the_file_and_field_checks(folder, load):
    """Regular files, only known fields (issue 59): what the project ships still loads."""
    _, params, info = load(ROOT / folder)
    assert info.path == str(ROOT / folder) and jax.tree_util.tree_leaves(params)
