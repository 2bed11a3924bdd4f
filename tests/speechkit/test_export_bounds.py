"""Export folders whose files or modules are forged to exhaust the machine (issue 59,
items 3 to 5): every checksum and size in export.json recomputed, as an attacker
would, so that only the bounds stand in the way. Each is refused while the folder is
read, before a module runs, with a `BundleError` naming the file, the op or array and
the bound; the command line exits with status 2 and one line, quickly, in bounded
memory (`test_detect_refuses_each_in_bounded_memory` measures VmHWM).

- export.json past `files.JSON_LIMIT`, or a FIFO (it was read whole with `json.load`);
- a module file past its recorded size or the cap (a sparse 64 GiB step.stablehlo, a
  MemoryError traceback before; a 1 GiB one, 1.2 GB of memory before "sha256 differs");
- StableHLO: a `while` that never ends, loops whose trips grow with the square of the
  input, nested loops, recursive calls, a 2^29-float array (2.5 GB and exit 0 before),
  2^36 floats (a JaxRuntimeError traceback before), an array sized by the batch, arrays
  too large together; our own modules' loop and sizes still pass (the tests of
  test_frozen_files.py and the export tests);
- ONNX: Scans nested over the audio (they ran for hours before).

The forged StableHLO modules are made as an attacker would make them: a jax function
that calls the genuine module and adds the hostile part, exported with `jax.export`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import flatbuffers  # noqa: F401  # jax.export serialization: a dependency, never skipped
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cskws_jax import bundle, model
from cskws_jax import export as kws_export
from speechkit import export_format, export_read, stablehlo_bounds
from speechkit.bundle import BundleError

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
PEAK_BOUND_KIB = 600 * 1024  # "well under 1 GB": the process, jax and all (210 MB of it)


@pytest.fixture(scope="module")
def exported(tiny_afkws_config, tmp_path_factory) -> Path:
    """An export folder of a tiny 3-keyword AF-KWS ("cmn": its modules hold a loop, the
    running mean) with steps of 2 output frames; tests copy it (`folder`)."""
    root = tmp_path_factory.mktemp("bounds")
    config = tiny_afkws_config(3)
    net = model.AfKws(type(config)(**{**config.__dict__, "normalise": "cmn"}))
    params = jax.jit(net.init)(jax.random.key(0), {"audio": np.zeros((1, 16, 64), np.float32)})
    bundle.save(root / "bundle", net, params, ("alpha", "beta", "gamma"))
    assert kws_export.main([str(root / "bundle"), str(root / "out"), "--block-outputs=2"]) == 0
    return root / "out"


@pytest.fixture
def folder(exported, tmp_path) -> Path:
    """A fresh copy of the export folder."""
    return Path(shutil.copytree(exported, tmp_path / "exported"))


@pytest.fixture(scope="module")
def wav(tmp_path_factory) -> Path:
    import soundfile

    path = tmp_path_factory.mktemp("audio") / "call.wav"
    soundfile.write(path, 0.1 * np.random.default_rng(0).normal(size=8000), 16000)
    return path


def _forge_manifest(folder: Path, edit=None) -> None:
    """export.json with every module's sha256 and bytes and every field's sha256
    recomputed from the files as they are, after `edit(payload)`."""
    payload = json.loads((folder / "export.json").read_text())
    if edit is not None:
        edit(payload)
    for field, suffix in (("modules", ".stablehlo"), ("onnx_modules", ".onnx")):
        for name, entry in payload[field].items():
            data = (folder / f"{name}{suffix}").read_bytes()
            entry["sha256"] = hashlib.sha256(data).hexdigest()
            if "bytes" in entry:  # (recorded from format version 5)
                entry["bytes"] = len(data)
    fields = {key: value for key, value in payload.items() if key != "fields_sha256"}
    payload["fields_sha256"] = export_format.fields_sha256(fields)
    (folder / "export.json").write_text(json.dumps(payload, indent=2))


def _refused(folder: Path, *fragments: str, backend: str = "jax") -> str:
    """The BundleError of reading `folder`, checked to hold each fragment."""
    with pytest.raises(BundleError) as caught:
        kws_export.read_folder(folder, backend=backend)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# ------------------------------------------------------------------ forged modules


def _forged(path: Path, extra) -> bytes:
    """The module at `path` as an attacker rewrites it: a function of the same arguments
    and results that calls the genuine module and adds `extra(first argument)` (a
    float32 scalar) to its first result, exported and serialized with jax.export."""
    genuine = jax.export.deserialize(bytearray(path.read_bytes()))

    def forged(*args):
        results = genuine.call(*args)
        leaves, tree = jax.tree_util.tree_flatten(results)
        leaves[0] = leaves[0] + extra(args[0])
        return jax.tree_util.tree_unflatten(tree, leaves)

    specs = [jax.ShapeDtypeStruct(aval.shape, aval.dtype) for aval in genuine.in_avals]
    args, kwargs = jax.tree_util.tree_unflatten(genuine.in_tree, specs)
    return jax.export.export(jax.jit(forged))(*args, **kwargs).serialize()


def _spin(x):
    """A loop that never ends: a counter cycling 0..6 while it is >= 0."""
    _, total = jax.lax.while_loop(
        lambda c: c[0] >= 0, lambda c: ((c[0] + 1) % 7, c[1] + 1.0), (0, x.sum())
    )
    return total * 0


def _buffer(elements):
    """An array of `elements` float32 (an int, or elements(x) for a symbolic size), held
    in memory: one element written at a place the input picks, then all summed (XLA
    fuses a mere broadcast away)."""

    def extra(x):
        size = elements(x) if callable(elements) else elements
        total = x.sum()
        place = (total > 0).astype(jnp.int32)
        written = jax.lax.dynamic_update_slice(jnp.full((size,), total), total[None], (place,))
        return written.sum() * 0

    return extra


def _square_loop(x):
    """A loop of (input frames)^2 trips: 36 million at a minute of a forward's input."""
    frames = x.shape[1]
    return jax.lax.fori_loop(0, frames * frames, lambda i, c: c + 1.0, x.sum()) * 0


def _nested_loops(outer: int, inner: int | None):
    """A loop of `outer` trips, each running a loop of `inner` (None: no inner loop)."""

    def extra(x):
        def body(i, c):
            if inner is None:
                return c + 1.0
            return jax.lax.fori_loop(0, inner, lambda j, d: d + 1.0, c)

        return jax.lax.fori_loop(0, outer, body, x.sum()) * 0

    return extra


def _arrays_together(x):
    """Five arrays of 2^25 float32 (128 MiB each): each under the cap, 640 MiB together."""
    first = jnp.full((1 << 25,), x.sum())
    second = jnp.sin(first)
    third = jnp.cos(second)
    fourth = jnp.exp(third)
    return (first[0] + second[1] + third[2] + fourth[3] + jnp.tanh(fourth)[4]) * 0


FORGED = {
    # name: (module, extra, fragments of the refusal)
    "endless while": (
        "step",
        _spin,
        ("step.stablehlo: a stablehlo.while whose condition is not `counter < constant`",),
    ),
    "2^29 floats": (
        "step",
        _buffer(1 << 29),
        ("step.stablehlo: stablehlo.", "tensor<536870912xf32> (2.15 GB); refused (an array of "),
    ),
    "2^36 floats": (
        "step",
        _buffer(1 << 36),
        ("step.stablehlo: stablehlo.", "tensor<68719476736xf32>", "MAX_ARRAY_BYTES"),
    ),
    "batch x 2^27 floats": (
        "step",
        _buffer(lambda x: x.shape[0] * (1 << 27)),
        ("step.stablehlo: stablehlo.", "tensor<134217728xf32> (537 MB) at {'b': 1, 't': 1500}"),
    ),
    "640 MiB together": (
        "step",
        _arrays_together,
        ("step.stablehlo: its arrays take", "together at {'b': 1, 't': 1500}", "MAX_VALUES"),
    ),
    "length^2 loop": (
        "forward",
        _square_loop,
        ("forward.stablehlo: its stablehlo.while loops run 36006000 times", "MAX_LOOP_TRIPS"),
    ),
    "300 x 300 loops": (
        "step",
        _nested_loops(300, 300),
        ("step.stablehlo: its stablehlo.while loops run 90308 times", "at most 65536"),
    ),
}


@pytest.fixture(scope="module")
def forged_modules(exported) -> dict[str, tuple[str, bytes]]:
    """{case: (module name, forged bytes)} of `FORGED`, made once."""
    return {
        case: (name, _forged(exported / f"{name}.stablehlo", extra))
        for case, (name, extra, _) in FORGED.items()
    }


def _plant(folder: Path, name: str, data: bytes) -> Path:
    """`data` in place of `<name>.stablehlo`, export.json forged to match."""
    (folder / f"{name}.stablehlo").write_bytes(data)
    _forge_manifest(folder)
    return folder / f"{name}.stablehlo"


@pytest.mark.parametrize("case", list(FORGED))
def test_a_forged_module_past_a_bound_is_refused_naming_it(folder, forged_modules, case):
    name, data = forged_modules[case]
    path = _plant(folder, name, data)
    _refused(folder, str(path), *FORGED[case][2])
    with pytest.raises(BundleError, match="refused"):
        export_read.read(path)  # the single-module reader bounds it too


def test_a_forged_module_within_the_bounds_is_read(folder):
    """A forged step with a loop of 300 trips beside the genuine one (8 trips): within
    the bounds, so read (the bounds refuse what could exhaust, not every change)."""
    _plant(folder, "step", _forged(folder / "step.stablehlo", _nested_loops(300, None)))
    kws_export.read_folder(folder)


def test_the_own_modules_loop_is_read_and_bounded_by_the_input(exported):
    """The genuine modules hold one loop (the running mean), counted once per input
    frame at the reference sizes: 6000 for the forward (4 x 1500), 8 for the step."""
    for name, trips in (("forward", 6000), ("step", 8)):
        module = export_read.read(exported / f"{name}.stablehlo")
        assert module.mlir_module().count("stablehlo.while") == 1
        assert stablehlo_bounds.loop_trips(module, name) == trips


def test_recursive_calls_are_refused_before_lowering(folder):
    """A private function that calls itself, called from main: refused before jax lowers
    (inlining it would not end)."""
    from jax.extend.mlir import serialize_portable_artifact
    from jax.extend.mlir.dialects import stablehlo

    step = folder / "step.stablehlo"
    genuine = jax.export.deserialize(bytearray(step.read_bytes()))
    text = genuine.mlir_module()
    spin = (
        "  func.func private @spin(%arg0: tensor<f32>) -> tensor<f32> {\n"
        "    %0 = func.call @spin(%arg0) : (tensor<f32>) -> tensor<f32>\n"
        "    return %0 : tensor<f32>\n  }\n"
    )
    end = text.rindex("}")
    crafted = text[:end] + spin + text[end:]
    main = crafted.index("func.func public @main")
    back = crafted.index("    return ", main)
    call = (
        "    %spun_c = stablehlo.constant dense<1.0> : tensor<f32>\n"
        "    %spun = func.call @spin(%spun_c) : (tensor<f32>) -> tensor<f32>\n"
    )
    crafted = crafted[:back] + call + crafted[back:]
    module = serialize_portable_artifact(crafted, stablehlo.get_current_version())
    _plant(folder, "step", dataclasses.replace(genuine, mlir_module_serialized=module).serialize())
    _refused(folder, f"{step}: @spin calls @spin, which calls it again (recursion); refused")


# StableHLO loops as jax's refinement leaves them: one function, every size known.
_LOOP = """
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {{
  %c0 = stablehlo.constant dense<{start}> : tensor<i32>
  %c1 = stablehlo.constant dense<{step}> : tensor<i32>
  %n = stablehlo.constant dense<{bound}> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %m = %n, %x = %arg0) : tensor<i32>, tensor<i32>, tensor<4xf32>
  cond {{
    %p = stablehlo.compare {direction}, %i, {limit}, {kind} : {compared}
    stablehlo.return %p : tensor<i1>
  }} do {{
    %j = stablehlo.add %i, %c1 : tensor<i32>
    %g = stablehlo.add %m, %c1 : tensor<i32>
    %y = {body} : tensor<4xf32>
    stablehlo.return %j, {carried}, %y : tensor<i32>, tensor<i32>, tensor<4xf32>
  }}
  return %r#2 : tensor<4xf32>
}}
func.func private @twice(%arg0: tensor<4xf32>) -> tensor<4xf32> {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<2> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, tensor<4xf32>
  cond {{
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }} do {{
    %j = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %j, %x : tensor<i32>, tensor<4xf32>
  }}
  return %r#1 : tensor<4xf32>
}}
"""
_PLAIN = {
    "start": 0,
    "step": 1,
    "bound": 10,
    "direction": "LT",
    "kind": "SIGNED",
    "compared": "(tensor<i32>, tensor<i32>) -> tensor<i1>",
    "limit": "%n",
    "carried": "%m",
}
_ADD = "stablehlo.add %x, %x"
_CALL = "func.call @twice(%x) : (tensor<4xf32>) -> tensor<4xf32>\n    %z = stablehlo.add %y, %y"
_PER_ELEMENT_CALL = (
    "stablehlo.add %x, %x : tensor<4xf32>\n"
    "    %k = stablehlo.constant dense<0.0> : tensor<f32>\n"
    "    %s = stablehlo.reduce(%x init: %k) across dimensions = [0] : (tensor<4xf32>, "
    "tensor<f32>) -> tensor<f32>\n     reducer(%a: tensor<f32>, %b: tensor<f32>) {{\n"
    "      %w = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<4xf32>\n"
    "      %v = func.call @twice(%w) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "      stablehlo.return %a : tensor<f32>\n     }}\n    %q = stablehlo.add %y, %y"
)
NOT_READ = "m.stablehlo: a stablehlo.while whose condition is not `counter < constant`"


@pytest.mark.parametrize(
    ("form", "trips"),
    [
        (dict(body=_ADD), 10),
        (dict(start=3, body=_ADD), 7),
        (dict(start=10, bound=0, body=_ADD), 0),
        (dict(body=_CALL), 30),  # 10 trips, each calling a loop of 2
        (dict(bound=12, limit="%m", body=_ADD), 12),  # a bound carried unchanged
        (dict(limit="%m", carried="%g", body=_ADD), NOT_READ),  # a bound that grows
        (dict(direction="GE", body=_ADD), NOT_READ),
        (dict(bound=-1, kind="UNSIGNED", body=_ADD), NOT_READ),
        (dict(step=2, body=_ADD), NOT_READ),
        (dict(step=0, body=_ADD), NOT_READ),
        (dict(body=_PER_ELEMENT_CALL), "a stablehlo.while inside stablehlo.reduce's body"),
    ],
)
def test_loop_forms_are_counted_or_refused(form, trips):
    """Only `counter < bound` (signed; the bound a constant, or carried unchanged from
    one), the counter from a constant up by 1, is counted (a call's loops times the
    trips around it); any other loop, or one run per element of a reduce, is refused."""
    text = _LOOP.format(**{**_PLAIN, **form}).replace("{{", "{").replace("}}", "}")
    if isinstance(trips, str):
        with pytest.raises(BundleError, match=re.escape(trips)):
            stablehlo_bounds.refined_loop_trips(text, "m.stablehlo")
    else:
        assert stablehlo_bounds.refined_loop_trips(text, "m.stablehlo") == trips


# ------------------------------------------------------------------- file sizes


@pytest.mark.parametrize("recorded", ["genuine", "forged", "none"])
def test_a_sparse_64_gib_module_is_refused_before_reading(folder, recorded):
    """step.stablehlo truncated up to 64 GiB (sparse: no disk, but reading it whole was a
    MemoryError traceback): refused from its size alone, against export.json's record
    (the genuine one, or one forged to match) or, a folder from before the sizes were
    recorded (format 4), against the cap."""
    step = folder / "step.stablehlo"
    payload = json.loads((folder / "export.json").read_text())
    genuine = payload["modules"]["step"]["bytes"]
    os.truncate(step, 64 * GIB)
    expected = {
        "genuine": f"{step}: {64 * GIB} bytes; export.json's modules.step.bytes is {genuine}",
        "forged": "modules.step.bytes: expected a size in bytes from 1 to 33554432, got 6871",
        "none": f"{step}: {64 * GIB} bytes; refused before reading it (a module file of at "
        "most 33554432 bytes)",
    }[recorded]
    if recorded != "genuine":
        payload["modules"]["step"]["bytes"] = 64 * GIB
        if recorded == "none":
            payload["format_version"] = 4
            for entry in [*payload["modules"].values(), *payload["onnx_modules"].values()]:
                del entry["bytes"]
        fields = {key: value for key, value in payload.items() if key != "fields_sha256"}
        payload["fields_sha256"] = export_format.fields_sha256(fields)
        (folder / "export.json").write_text(json.dumps(payload))
    _refused(folder, expected)


def test_an_onnx_module_past_its_recorded_size_is_refused_before_reading(folder):
    detector = folder / "detector.onnx"
    with open(detector, "ab") as out:
        out.write(b"\0")
    _refused(
        folder, f"{detector}: ", "export.json's onnx_modules.detector.bytes is", backend="onnx"
    )


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_module_that_is_not_a_regular_file_is_refused(folder, kind):
    step = folder / "step.stablehlo"
    step.unlink()
    os.mkfifo(step) if kind == "fifo" else step.mkdir()
    _refused(folder, f"{step}: not a regular file")


def test_a_symlink_to_a_device_is_refused(folder):
    step = folder / "step.stablehlo"
    step.unlink()
    step.symlink_to("/dev/zero")
    _refused(folder, f"{step}: a symlink to /dev/zero, outside the export folder; refused")


def test_an_export_json_past_the_json_limit_is_refused_before_parsing(folder):
    """The genuine export.json padded with spaces to 17 MiB: valid JSON, read whole and
    parsed before; refused from its size now (files.JSON_LIMIT, 16 MiB)."""
    manifest = folder / "export.json"
    with open(manifest, "a") as out:
        out.write(" " * (17 << 20))
    _refused(folder, f"{manifest}: not readable JSON: ", "bytes, more than a JSON file's limit")


@pytest.mark.timeout(60)  # opening a FIFO waits for a writer: the parent hung here
def test_an_export_json_that_is_a_fifo_is_refused_without_opening_it(folder):
    manifest = folder / "export.json"
    manifest.unlink()
    os.mkfifo(manifest)
    _refused(folder, f"{manifest}: not readable JSON: not a regular file (a FIFO)")


def test_a_missing_or_linked_export_json_is_named(folder, tmp_path):
    manifest = folder / "export.json"
    outside = tmp_path / "elsewhere.json"
    shutil.move(manifest, outside)
    _refused(folder, f"{manifest}: missing (not an export folder)")
    manifest.symlink_to(outside)
    _refused(folder, f"{manifest}: a symlink to {outside}, outside the export folder")


# ------------------------------------------------------------------------- ONNX


def _nested_scans(path: Path, depth: int) -> None:
    """frontend.onnx with Scans nested `depth` deep, each over the audio's samples (the
    outer graph's input, read by name from inside the bodies), their sum added to the
    features: only allowed operators, and it runs samples^depth bodies."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load_from_string(path.read_bytes())

    def scan(level: int, state: str, out: str) -> onnx.NodeProto:
        body_in, body_out, sample = f"s{level}_in", f"s{level}_out", f"x{level}"
        if level == depth:
            nodes = [
                helper.make_node("ReduceSum", [sample], [f"r{level}"], keepdims=0),
                helper.make_node("Add", [body_in, f"r{level}"], [body_out]),
            ]
        else:
            nodes = [scan(level + 1, body_in, body_out)]
        body = helper.make_graph(
            nodes,
            f"body{level}",
            [
                helper.make_tensor_value_info(body_in, TensorProto.FLOAT, []),
                helper.make_tensor_value_info(sample, TensorProto.FLOAT, ["b"]),
            ],
            [helper.make_tensor_value_info(body_out, TensorProto.FLOAT, [])],
        )
        return helper.make_node(
            "Scan", [state, "audio"], [out], body=body, num_scan_inputs=1, scan_input_axes=[1]
        )

    graph = model.graph
    produce = next(node for node in graph.node if "features" in node.output)
    produce.output[list(produce.output).index("features")] = "features_genuine"
    graph.initializer.append(helper.make_tensor("spin_start", TensorProto.FLOAT, [], [0.0]))
    graph.node.extend(
        [
            scan(1, "spin_start", "spun"),
            helper.make_node("Mul", ["spun", "spin_start"], ["spun_zero"]),
            helper.make_node("Add", ["features_genuine", "spun_zero"], ["features"]),
        ]
    )
    path.write_bytes(model.SerializeToString())


@pytest.mark.parametrize(
    ("depth", "fragments"),
    [
        (2, ("frontend.onnx: its Scans run their bodies", "times at", "at most 65536")),
        (3, ("frontend.onnx: Scan", "sits 3 Scans deep; refused (at most 2")),
    ],
)
def test_nested_onnx_scans_over_the_audio_are_refused(folder, depth, fragments):
    _nested_scans(folder / "frontend.onnx", depth)
    _forge_manifest(folder)
    _refused(folder, *fragments, backend="onnx")


def test_an_onnx_initializer_past_the_element_cap_is_refused(folder):
    """A tensor declared with 2^28 elements (and none stored) in step.onnx."""
    import onnx

    step = onnx.load_from_string((folder / "step.onnx").read_bytes())
    huge = onnx.TensorProto(name="huge", data_type=onnx.TensorProto.FLOAT, dims=[1 << 28])
    step.graph.initializer.append(huge)
    (folder / "step.onnx").write_bytes(step.SerializeToString())
    _forge_manifest(folder)
    _refused(folder, "step.onnx: tensor 'huge' holds 268435456 elements; refused", backend="onnx")


# ---------------------------------------------------------------- command line

_PEAK = textwrap.dedent(
    """
    import sys
    from cskws_jax import detect
    wav, *folders = sys.argv[1:]
    for folder in folders:
        backend = folder.rsplit("@", 1)[1] if "@" in folder else "jax"
        code = detect.main([folder.rsplit("@", 1)[0], wav, "--backend", backend])
        print("exit", code, flush=True)
        print("---", file=sys.stderr, flush=True)
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    print("peak", peak)
    """
)


def test_detect_refuses_each_in_bounded_memory(exported, forged_modules, tmp_path, wav):
    """One `detect` process given each hostile folder in turn (the arrays of 2^29 and
    2^36 floats and one sized by the batch, a sparse 1 GiB step.stablehlo and
    export.json, an endless loop, Scans nested over the audio): each a one-line error
    and exit status 2, within seconds, its peak memory (VmHWM) well under 1 GB."""
    cases = {}

    def copy(case: str) -> Path:
        cases[case] = Path(shutil.copytree(exported, tmp_path / case.replace(" ", "_")))
        return cases[case]

    for case in ("2^29 floats", "2^36 floats", "batch x 2^27 floats", "endless while"):
        name, data = forged_modules[case]
        _plant(copy(case), name, data)
    os.truncate(copy("sparse step") / "step.stablehlo", GIB)
    os.truncate(copy("sparse export.json") / "export.json", GIB)
    nested = copy("nested scans")
    _nested_scans(nested / "frontend.onnx", 3)
    _forge_manifest(nested)
    folders = [
        str(path) + ("@onnx" if case == "nested scans" else "") for case, path in cases.items()
    ]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(wav), *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    codes = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("exit ")]
    errors = done.stderr.split("---\n")[: len(cases)]
    assert codes == ["2"] * len(cases), (codes, done.stderr[-3000:])
    for (case, path), error in zip(cases.items(), errors, strict=True):
        assert error.startswith(f"error: {path}/") and error.count("\n") == 1, (case, error)
        assert "Traceback" not in error and ("refused" in error or "limit" in error), error
    peak = int(done.stdout.split("peak ")[-1])
    print(f"peak {peak / 1024:.0f} MB over {len(cases)} hostile folders")
    assert peak < PEAK_BOUND_KIB, f"peak {peak / 1024:.0f} MB"
