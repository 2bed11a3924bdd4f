"""Hostile arrays and bundle files (issue 59, items 6 and 7): a .npy or .npz someone sent
(an annotated call's `<call>.npy` posteriors, a CTC cache in a data folder, a bundle's
params.npz) is read header first (`speechkit.arrays`): a fake zip, a header claiming
terabytes, a description nested 100,000 deep, a deflate bomb, a string or complex dtype,
a FIFO, a link out of a bundle, an unknown bundle.json field and a 99 MB bundle.json are
each a named error (`speechkit.errors.InvalidInput`) or, for a cache, "not a usable
cache" (None: recomputed), never a traceback, a hang or a gigabyte of memory.

The tests reach the code through entry points that exist before `speechkit.arrays` did
(`speechkit.arrays` itself is imported inside the tests that use it), so that the file
can be run against the parent commit to count the cases it fails."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import jax
import numpy as np
import pytest

from cskws_jax import bundle as cskws_bundle
from cskws_jax import model as cskws_model
from ctc_jax import recognise
from multiqt_jax.datasets import annotated_calls as ac
from speechkit import asr, errors
from speechkit import bundle as bundle_lib

ROOT = Path(__file__).resolve().parents[2]
GUARD_S = 60  # a hang fails the test (pytest-timeout) instead of stalling the suite
FIFO_GUARD_S = 20  # reading a FIFO blocks until a writer comes: none ever does
PEAK_LIMIT_MB = 1024  # the bound on a process given a hostile file
FRAMES = 50  # the posteriors' rows an annotated call of 1 s has (20 ms)

PEAK_CHILD = r"""
import json, sys
case, path = sys.argv[1], sys.argv[2]
try:
    if case == "posteriors cache":
        from ctc_jax import recognise
        result = repr(recognise._read_posteriors(path, "a"))[:200]
    else:
        from cskws_jax import bundle
        bundle.load(path)
        result = "loaded"
except Exception as err:  # the parent reads what it was
    result = f"{type(err).__name__}: {err}"[:300]
with open("/proc/self/status") as status:  # VmHWM starts afresh at exec
    peak_kib = int(next(line for line in status if line.startswith("VmHWM:")).split()[1])
print(json.dumps({"result": result, "peak_mb": peak_kib / 1024}))
"""


def _peak(case: str, path: Path) -> dict:
    """{"result": what loading `path` gave, "peak_mb": the process's peak resident
    memory}, loaded in a fresh Python (`PEAK_CHILD`)."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK_CHILD, case, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def _npy_header(shape, descr: str = "<f4") -> bytes:
    buffer = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def _npy_text(text: str) -> bytes:
    """A version 1.0 .npy header of the dict text `text`, padded as NumPy pads."""
    body = text.encode("latin1") + b"\n"
    body += b" " * (-(len(body) + 10) % 64)
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body


def _zip(path: Path, members: dict[str, bytes], method=zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _set_directory_sizes(path: Path, member: str, compressed: int, uncompressed: int) -> None:
    """Rewrites `member`'s sizes in the zip's central directory (what zipfile believes)."""
    data = bytearray(path.read_bytes())
    start = data.index(b"PK\x01\x02")
    while True:
        name_length = int.from_bytes(data[start + 28 : start + 30], "little")
        if data[start + 46 : start + 46 + name_length].decode() == member:
            break
        start = data.index(b"PK\x01\x02", start + 4)
    data[start + 20 : start + 24] = compressed.to_bytes(4, "little")
    data[start + 24 : start + 28] = uncompressed.to_bytes(4, "little")
    path.write_bytes(bytes(data))


def _needing_zip_version(path: Path, version: int) -> Path:
    """The zip at `path` with its first central directory record asking for a reader of
    zip `version` (64: 6.4, which Python's zipfile lacks: a NotImplementedError)."""
    data = bytearray(path.read_bytes())
    data[data.index(b"PK\x01\x02") + 6] = version
    path.write_bytes(bytes(data))
    return path


UNCLOSED = _npy_text("({'descr': '<f4', 'fortran_order': False, 'shape': (50, 29), }")
"""A header NumPy rewrites as Python 2's and tokenizes: a tokenize.TokenError."""


def _make_fifo(path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(path)
    return path


# ------------------------------------------------- an annotated call's <call>.npy posteriors


def _wrong_npy_cases():
    rows = np.full((FRAMES, asr.NUM_SYMBOLS), 0.5, np.float32)
    nested = "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 3000 + ")" * 3000
    return [  # (id, the file's bytes, what the error says)
        (
            "2^40 rows",
            _npy_header((2**40, 29)),
            r"declares float32 \(1099511627776, 29\) .*0 bytes",
        ),
        ("string dtype", _npy(np.full(rows.shape, "a")), r"dtype str32 \(<U1\); expected one"),
        ("complex64", _npy(rows.astype(np.complex64)), r"dtype complex64 \(<c8\); expected one of"),
        ("int64", _npy(rows.astype(np.int64)), r"dtype int64 \(<i8\); expected one of float16"),
        ("pickled objects", _npy(rows.astype(object), allow_pickle=True), r"not a data-only .npy"),
        ("records", _npy(np.zeros(FRAMES, "<f4,<f4")), r"expected one of float16, float32"),
        (
            "a 4 GB header length",
            b"\x93NUMPY\x02\x00" + (2**32 - 1).to_bytes(4, "little") + b"{" * 100,
            r"a header of 4294967295 bytes; at most 10000 are read",
        ),
        ("a header nested 3000 deep", _npy_text(nested + "}"), r"not a readable .npy header"),
        ("a negative size", _npy_header((-1, 29)), r"shape \(-1, 29\); sizes are >= 0"),
        ("half its data", _npy(rows)[: -rows.nbytes // 2], r"holds 2.9 kB after its 128-byte"),
        ("data past its shape", _npy(rows) + bytes(1000), r"holds 6.8 kB after its 128-byte"),
        ("8 bytes", b"\x93NUMPY\x01\x00", r"not a readable .npy header"),
        ("empty", b"", r"not a readable .npy header"),
        ("version 3.0", b"\x93NUMPY\x03\x00" + _npy(rows)[8:], r"format version \(3, 0\)"),
        ("an unclosed header", UNCLOSED + rows.tobytes(), r"not a readable .npy header"),
    ]


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize(
    "data, message", [pytest.param(d, m, id=i) for i, d, m in _wrong_npy_cases()]
)
def test_a_wrong_posteriors_npy_is_an_annotation_error_naming_it(tmp_path, data, message):
    path = tmp_path / "c1.npy"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)  # complex64 was taken
        with pytest.raises(ac.AnnotationError, match=message) as caught:
            ac.read_posteriors(str(path), FRAMES)
    assert str(caught.value).startswith(f"{path}: ")


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize("dtype", ["<f2", "<f4", "<f8", ">f4"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_real_float_posteriors_of_either_order_are_read(tmp_path, dtype, order):
    rows = np.random.default_rng(0).random((FRAMES, asr.NUM_SYMBOLS)).astype(dtype)
    path = tmp_path / "c1.npy"
    np.save(path, np.asarray(rows, order=order))
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        warnings.simplefilter("error", RuntimeWarning)
        matrix = ac.read_posteriors(str(path), FRAMES)
    assert matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix, rows.astype(np.float32))


@pytest.mark.timeout(GUARD_S)
def test_float64_posteriors_past_float32s_range_are_refused(tmp_path):
    """1e300 is finite as float64 and infinite as the float32 the model reads."""
    rows = np.full((FRAMES, asr.NUM_SYMBOLS), 0.5)
    rows[3, 4] = 1e300
    path = tmp_path / "c1.npy"
    np.save(path, rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "overflow encountered in cast"
        with pytest.raises(ac.AnnotationError, match=r"c1.npy: values must be finite"):
            ac.read_posteriors(str(path), FRAMES)


@pytest.mark.timeout(FIFO_GUARD_S)
def test_a_fifo_for_posteriors_is_refused_without_blocking(tmp_path):
    path = _make_fifo(tmp_path / "c1.npy")
    with pytest.raises(ac.AnnotationError, match=r"c1.npy: not a regular file \(a FIFO\)"):
        ac.read_posteriors(str(path), FRAMES)


@pytest.mark.timeout(FIFO_GUARD_S)
def test_a_fifo_for_an_annotation_is_refused_without_blocking(tmp_path):
    path = _make_fifo(tmp_path / "c1.json")
    with pytest.raises(ac.AnnotationError, match=r"c1.json: not a regular file \(a FIFO\)"):
        ac.read_annotation(str(path), "questions", 2.0)


@pytest.mark.timeout(GUARD_S)
def test_an_annotation_over_the_json_limit_is_refused_unparsed(tmp_path):
    path = tmp_path / "c1.json"
    path.write_text(json.dumps({"segments": [], "notes": "x" * (17 << 20)}))
    with pytest.raises(ac.AnnotationError, match=r"c1.json: \d+ bytes, more than a JSON file"):
        ac.read_annotation(str(path), "questions", 2.0)


# ------------------------------------------------------------------------- the CTC caches

WORDS = {"k": (asr.TimedWord("hi", 0.1, 0.2, 0.3),), "l": ()}


def _words_cache(path: Path, members: dict[str, bytes] | None = None, **description) -> Path:
    """A words cache as `recognise._save` writes it for recogniser "a", with `members`
    ({name: .npy bytes}) and `description`'s fields put in its place."""
    recognise._save(str(path), "a", WORDS)
    with zipfile.ZipFile(path) as archive:
        found = {name: archive.read(name) for name in archive.namelist()}
    text = json.loads(np.load(io.BytesIO(found["description.npy"])).tobytes())
    text.update(description)
    found["description.npy"] = _npy(np.frombuffer(json.dumps(text).encode(), np.uint8))
    found.update(members or {})
    _zip(path, found)
    return path


def _description_bytes(text: bytes) -> bytes:
    return _npy(np.frombuffer(text, np.uint8))


CACHE_CASES = [  # (id, the words cache's file given its path) -> not a usable cache (None)
    ("a fake zip", lambda p: p.write_bytes(b"PK\x03\x04 not a zip really" * 10)),
    ("a pickle", lambda p: p.write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00N.")),
    ("2^40 counts", lambda p: _words_cache(p, {"counts.npy": _npy_header((2**40,), "<i8")})),
    (
        "a description 100000 deep",
        lambda p: _words_cache(
            p, {"description.npy": _description_bytes(b"[" * 100_000 + b"]" * 100_000)}
        ),
    ),
    (
        "a 5000-digit integer",
        lambda p: _words_cache(p, {"description.npy": _description_bytes(b"9" * 5000)}),
    ),
    ("not UTF-8", lambda p: _words_cache(p, {"description.npy": _description_bytes(b"\xff{")})),
    ("unhashable keys", lambda p: _words_cache(p, keys=[[1], {}])),
    (
        "counts that wrap around int64",  # 2 * (2**63 - 1) + 3 is 1 modulo 2**64
        lambda p: _words_cache(
            p,
            {"counts.npy": _npy(np.array([2**63 - 1, 2**63 - 1, 3], np.int64))},
            keys=["a", "b", "c"],
            words=["hi"],
        ),
    ),
    ("string counts", lambda p: _words_cache(p, {"counts.npy": _npy(np.array(["1", "0"]))})),
    (
        "complex times",
        lambda p: _words_cache(p, {"times.npy": _npy(np.zeros((1, 3), np.complex128))}),
    ),
    ("another member", lambda p: _words_cache(p, {"extra.npy": _npy(np.zeros(3))})),
    ("zip version 6.4", lambda p: _needing_zip_version(_words_cache(p), 64)),
    ("an unclosed header", lambda p: _words_cache(p, {"counts.npy": UNCLOSED + bytes(16)})),
]


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in CACHE_CASES])
def test_a_hostile_words_cache_is_not_a_usable_cache(tmp_path, make):
    path = tmp_path / "ctc_words.npz"
    make(path)
    assert recognise._read(str(path), "a") is None


@pytest.mark.timeout(GUARD_S)
def test_a_cache_member_larger_than_its_archive_is_not_read(tmp_path):
    path = _words_cache(tmp_path / "ctc_words.npz")
    _set_directory_sizes(path, "counts.npy", 2**31, 2**31)  # what zipfile will read
    assert recognise._read(str(path), "a") is None


@pytest.mark.timeout(GUARD_S)
def test_the_words_and_posteriors_caches_written_are_read_back(tmp_path):
    """What `_save` and `_save_posteriors` write passes every check, a link to it too."""
    words_path = _words_cache(tmp_path / "ctc_words.npz")
    assert recognise._read(str(words_path), "a") == WORDS
    assert recognise._read(str(words_path), "b") is None  # another recogniser's
    posteriors_path = str(tmp_path / "ctc_posteriors.npz")
    kept = recognise._save_posteriors(
        posteriors_path, "a", ["k"], [np.full((4, asr.NUM_SYMBOLS), 0.25, np.float32)]
    )
    found = recognise._read_posteriors(posteriors_path, "a")
    assert found.keys() == {"k"} and np.array_equal(found["k"], kept["k"])
    (tmp_path / "linked.npz").symlink_to(words_path)
    assert recognise._read(str(tmp_path / "linked.npz"), "a") == WORDS


@pytest.mark.timeout(FIFO_GUARD_S)
def test_a_fifo_at_a_cache_path_is_a_named_error_without_blocking(tmp_path):
    path = _make_fifo(tmp_path / "ctc_words.npz")
    with pytest.raises(errors.InvalidInput, match=r"ctc_words.npz: not a regular file \(a FIFO"):
        recognise._read(str(path), "a")


@pytest.mark.timeout(GUARD_S)
def test_a_folder_at_a_cache_path_is_a_named_error(tmp_path):
    """Recomputing could not replace a folder (os.replace refuses): say so first."""
    path = tmp_path / "ctc_posteriors.npz"
    path.mkdir()
    with pytest.raises(errors.InvalidInput, match=r"ctc_posteriors.npz: not a regular file"):
        recognise._read_posteriors(str(path), "a")


class _Recogniser:
    """A stand-in with what `cached_outputs` uses: a digest, and `recognise`, counted."""

    digest = "a"

    def __init__(self):
        self.passes = 0

    def recognise(self, recordings, batch_size, pad_multiple):
        from ctc_jax import decode

        self.passes += 1
        transcripts = [decode.Transcript("hi", (), WORDS["k"]) for _ in recordings]
        posteriors = [np.full((len(r) // 2, asr.NUM_SYMBOLS), 0.5, np.float32) for r in recordings]
        return transcripts, posteriors


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in CACHE_CASES[:4]])
def test_a_hostile_cache_is_recomputed_and_replaced(tmp_path, make):
    words_path, posteriors_path = tmp_path / "w.npz", tmp_path / "p.npz"
    make(words_path)
    make(posteriors_path)
    features = {"k": np.zeros((10, 40), np.float32)}
    recogniser = _Recogniser()
    words, posteriors = recognise.cached_outputs(
        recogniser, features, str(words_path), str(posteriors_path)
    )
    assert recogniser.passes == 1 and words == {"k": WORDS["k"]}
    assert recognise._read(str(words_path), "a") == words
    assert np.array_equal(
        recognise._read_posteriors(str(posteriors_path), "a")["k"], posteriors["k"]
    )


def _posteriors_bomb(path: Path, megabytes: int) -> None:
    """A posteriors cache whose one member inflates to `megabytes` MB of float16 zeros
    (a header declaring them, then the zeros, deflated to about a thousandth)."""
    rows = (megabytes << 20) // (asr.NUM_SYMBOLS * 2)
    description = json.dumps({"format": 1, "digest": "a", "keys": ["k"]}).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("description.npy", _description_bytes(description))
        archive.writestr("offsets.npy", _npy(np.array([0, rows], np.int64)))
        with archive.open("posteriors.npy", "w", force_zip64=True) as member:
            header = {"descr": "<f2", "fortran_order": False, "shape": (rows, asr.NUM_SYMBOLS)}
            np.lib.format.write_array_header_1_0(member, header)
            left, chunk = rows * asr.NUM_SYMBOLS * 2, bytes(1 << 20)
            while left:
                member.write(chunk[: min(left, len(chunk))])
                left -= min(left, len(chunk))


@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc's VmHWM")
def test_a_deflate_bomb_cache_is_not_read_and_memory_stays_small(tmp_path):
    """A 0.5 MB posteriors cache that inflates to 512 MB (read whole and converted to
    float32, that took 1.5 GB): not a usable cache, its reader's peak under 1 GB."""
    path = tmp_path / "ctc_posteriors.npz"
    _posteriors_bomb(path, 512)
    assert path.stat().st_size < 1 << 20
    found = _peak("posteriors cache", path)
    assert found["result"] == "None", found
    assert found["peak_mb"] < PEAK_LIMIT_MB, found


# ------------------------------------------------------------------------ bundle folders


@pytest.fixture(scope="module")
def afkws_folder(tmp_path_factory, tiny_afkws_config):
    """A tiny 3-keyword AF-KWS bundle (the conftest's config), random parameters."""
    config = tiny_afkws_config(3)
    rng = np.random.default_rng(0)
    params = jax.tree_util.tree_map(
        lambda leaf: rng.normal(size=leaf.shape).astype(leaf.dtype),
        cskws_bundle.expected_params(config),
    )
    folder = tmp_path_factory.mktemp("afkws") / "bundle"
    cskws_bundle.save(folder, cskws_model.AfKws(config), params, ["a", "b", "c"], corpus="toy")
    return folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(folder, copy)
    return copy


def _edit_manifest(folder: Path, edit) -> None:
    path = folder / bundle_lib.MANIFEST
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


@pytest.mark.timeout(GUARD_S)
def test_params_linked_to_proc_pagemap_is_refused_before_hashing(afkws_folder, tmp_path):
    """/proc/self/pagemap says it is 0 bytes long and reads for ever: hashed, it hung."""
    if not Path("/proc/self/pagemap").exists():
        pytest.skip("no /proc/self/pagemap here")
    folder = _copy(afkws_folder, tmp_path)
    (folder / bundle_lib.PARAMS).unlink()
    (folder / bundle_lib.PARAMS).symlink_to("/proc/self/pagemap")
    with pytest.raises(bundle_lib.BundleError, match=r"params.npz: a symlink \(to /proc/self"):
        cskws_bundle.load(folder)


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize("name", [bundle_lib.PARAMS, bundle_lib.MANIFEST])
def test_a_bundle_file_linked_out_of_its_folder_is_refused(afkws_folder, tmp_path, name):
    """Even a link to the very same bytes: a bundle's files live in its folder."""
    folder = _copy(afkws_folder, tmp_path)
    elsewhere = tmp_path / f"elsewhere-{name}"
    (folder / name).rename(elsewhere)
    (folder / name).symlink_to(elsewhere)
    with pytest.raises(bundle_lib.BundleError, match=rf"{name}: a symlink \(to .*elsewhere"):
        cskws_bundle.load(folder)


@pytest.mark.timeout(FIFO_GUARD_S)
@pytest.mark.parametrize("name", [bundle_lib.PARAMS, bundle_lib.MANIFEST])
def test_a_bundle_file_that_is_a_fifo_is_refused_without_blocking(afkws_folder, tmp_path, name):
    folder = _copy(afkws_folder, tmp_path)
    (folder / name).unlink()
    _make_fifo(folder / name)
    with pytest.raises(bundle_lib.BundleError, match=rf"{name}: not a regular file \(a FIFO\)"):
        cskws_bundle.load(folder)


@pytest.mark.timeout(GUARD_S)
@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.update(extra=1), r"bundle.json: extra: not a field of bundle.json"),
        (lambda m: m.update(Task="cskws"), r"bundle.json: Task: not a field of bundle.json"),
        (lambda m: m["params"].update(note="x"), r"bundle.json: params.note: not a field of"),
    ],
    ids=["extra", "Task", "params.note"],
)
def test_an_unknown_bundle_json_field_is_refused_naming_it(afkws_folder, tmp_path, edit, message):
    folder = _copy(afkws_folder, tmp_path)
    _edit_manifest(folder, edit)
    with pytest.raises(bundle_lib.BundleError, match=message):
        cskws_bundle.load(folder)


def _forge_sha256(folder: Path) -> None:
    """A sender can rewrite bundle.json's sha256 along with params.npz."""
    digest = hashlib.sha256((folder / bundle_lib.PARAMS).read_bytes()).hexdigest()
    _edit_manifest(folder, lambda manifest: manifest["params"].update(sha256=digest))


@pytest.mark.timeout(GUARD_S)
def test_params_npz_needing_zip_version_6_4_is_refused(afkws_folder, tmp_path):
    """Found by tests/speechkit/test_array_fuzz.py: zipfile's NotImplementedError."""
    folder = _copy(afkws_folder, tmp_path)
    _needing_zip_version(folder / bundle_lib.PARAMS, 64)
    _forge_sha256(folder)
    with pytest.raises(bundle_lib.BundleError, match=r"params.npz: not an .npz .*version 6.4"):
        cskws_bundle.load(folder)


@pytest.mark.timeout(GUARD_S)
def test_a_params_member_header_numpy_tokenizes_is_refused(afkws_folder, tmp_path):
    """Found by tests/speechkit/test_array_fuzz.py: NumPy's tokenize.TokenError."""
    folder = _copy(afkws_folder, tmp_path)
    with zipfile.ZipFile(folder / bundle_lib.PARAMS) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["params/heatmap/kernel.npy"] = UNCLOSED + bytes(16)
    _zip(folder / bundle_lib.PARAMS, members)
    _forge_sha256(folder)
    with pytest.raises(bundle_lib.BundleError, match=r"kernel.npy: not a readable .npy header"):
        cskws_bundle.load(folder)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc's VmHWM")
def test_a_99_mb_bundle_json_is_refused_unparsed(afkws_folder, tmp_path):
    """33 million empty lists (parsed, that took 2.6 GB): refused by its size, its
    loader's peak under 1 GB."""
    folder = _copy(afkws_folder, tmp_path)
    manifest = json.loads((folder / bundle_lib.MANIFEST).read_text())
    text = json.dumps({**manifest, "padding": "PADDING"})
    padding = "[" + "[]," * (33 * 10**6) + "[]]"
    (folder / bundle_lib.MANIFEST).write_text(text.replace('"PADDING"', padding))
    found = _peak("bundle", folder)
    assert "bundle.json: not readable JSON" in found["result"], found
    assert "more than a JSON file's limit" in found["result"], found
    assert found["peak_mb"] < PEAK_LIMIT_MB, found


# ------------------------------------------------- speechkit.arrays: the .npz checks alone


@pytest.mark.timeout(GUARD_S)
def test_an_npz_of_stored_members_only_refuses_a_deflated_one(tmp_path):
    from speechkit import arrays

    path = tmp_path / "a.npz"
    _zip(path, {"x.npy": _npy(np.zeros(3))}, zipfile.ZIP_DEFLATED)
    with pytest.raises(arrays.ArrayFileError, match=r"a.npz: x.npy: encrypted or compressed"):
        arrays.Npz(path, names=["x"], lister="the test", compressions=arrays.STORED)
    with arrays.Npz(path, names=["x"], lister="the test") as archive:
        np.testing.assert_array_equal(archive.read("x"), np.zeros(3))


@pytest.mark.timeout(GUARD_S)
def test_a_stored_member_whose_sizes_differ_is_refused(tmp_path):
    from speechkit import arrays

    path = tmp_path / "a.npz"
    data = _npy(np.zeros(3))
    _zip(path, {"x.npy": data})
    _set_directory_sizes(path, "x.npy", len(data), len(data) + 8)
    with pytest.raises(arrays.ArrayFileError, match=r"x.npy: stored, yet 160 bytes uncompressed"):
        arrays.Npz(path, names=["x"], lister="the test")


@pytest.mark.timeout(GUARD_S)
def test_a_member_whose_header_and_directory_disagree_is_refused_before_reading(tmp_path):
    from speechkit import arrays

    path = tmp_path / "a.npz"
    _zip(path, {"x.npy": _npy_header((2**40,), "<f8")})
    with arrays.Npz(path, names=["x"], lister="the test") as archive:
        assert archive.header("x") == arrays.Declared((2**40,), np.dtype("<f8"))
        with pytest.raises(arrays.ArrayFileError, match=r"x.npy: 128 bytes uncompressed in the"):
            archive.read("x")
