"""Fuzzing the arrays a user can be sent (issue 59): an annotated call's `<call>.npy`
posteriors, the CTC words and posteriors caches a data folder holds, and a bundle's
params.npz, each mutated at a random place: the .npy header's dict text, its shape
values, its dtype string, the zip directory's sizes of a member, the cache's description
JSON (a value swapped for another type, a key removed, nesting 100,000 deep, a
5000-digit integer), random bytes, a truncated or lengthened file, a member deflated.
Reading one must return (the array; the cache's contents, or None: "not a usable cache",
recomputed; the bundle) or raise the named error (`speechkit.errors.InvalidInput`),
never another exception, and never hang (a 30 s guard per example).

In the suite the examples are derandomised (the same 40 per target on every run, so a
run fails only for a change in the code); `FUZZ_EXAMPLES=2000 pytest
tests/speechkit/test_array_fuzz.py` draws that many fresh random ones."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import os
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctc_jax import recognise
from multiqt_jax.datasets import annotated_calls
from speechkit import asr, bundle, files
from speechkit.frontend import FeatureConfig

from . import json_mutations

FRAMES = 50  # the posteriors' rows of an annotated call of 1 s (20 ms)
DIGEST = "a"  # the recogniser the caches were written for

# ------------------------------------------------------------------------ the mutations

SIZES = st.one_of(
    st.sampled_from([0, 1, 2, 3, 29, FRAMES, 2**31 - 1, 2**32, 2**40, 2**63, 2**64]),
    st.integers(-3, 2**70),
)
DESCRS = st.sampled_from(
    ["<f4", ">f4", "<f2", "<f8", "<c8", "<U3", "|S5", "|O", "<i8", "|u1", "|b1", "<M8[s]"]
    + ["|V8", "<f16", "f4", "", "<f0", "[('a', '<f4')]", "('<f4', (2,))", "<q", "xyz"]
)
TOKENS = st.sampled_from(
    ["(", ")", "[", "]", "{", "}", ",", ":", "'", "True", "None", "-1", "2**40", "1e9"]
    + ["'descr'", "'shape'", "'fortran_order'", "'<f4'", "'|O'", "\x00", "\n", " " * 50]
    + ["(" * 3000, "9" * 5000, "'x' * 10**9", "__import__('os')"]
)
DIRECTORY_VALUES = st.one_of(
    st.sampled_from([0, 1, 2**31, 2**32 - 1]), st.integers(0, 2**32 - 1), st.integers(-64, 64)
)


def _header_text(descr: str, shape) -> str:
    return f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"


def _npy_of_text(text: str, data: bytes, version: int = 1) -> bytes:
    """A .npy of header dict text `text` (padded as NumPy pads) followed by `data`."""
    field = 2 if version == 1 else 4
    body = text.encode("latin1", "replace") + b"\n"
    body += b" " * (-(len(body) + 8 + field) % 64)
    length = len(body).to_bytes(field, "little") if len(body) < 256**field else b"\xff" * field
    return b"\x93NUMPY" + bytes([version, 0]) + length + body + data


def _split_npy(npy: bytes) -> tuple[str, bytes]:
    """(header dict text, data) of a version 1.0 .npy."""
    length = int.from_bytes(npy[8:10], "little")
    return npy[10 : 10 + length].decode("latin1").rstrip(), npy[10 + length :]


def _mutated_npy(data, npy: bytes) -> bytes:
    """`npy` changed at one place `data` (hypothesis) draws."""
    text, payload = _split_npy(npy)
    kind = data.draw(
        st.sampled_from(["text", "shape", "dtype", "bytes", "length", "version"]), label="npy"
    )
    if kind == "text":  # a token in place of a slice of the dict text
        start = data.draw(st.integers(0, len(text)), label="start")
        end = data.draw(st.integers(start, min(len(text), start + 12)), label="end")
        text = text[:start] + data.draw(TOKENS, label="token") + text[end:]
        return _npy_of_text(text, payload, data.draw(st.sampled_from([1, 2]), label="version"))
    if kind == "shape":
        shape = data.draw(st.lists(SIZES, max_size=4), label="shape")
        descr = ast.literal_eval(text)["descr"]
        return _npy_of_text(_header_text(descr, shape), payload)
    if kind == "dtype":
        shape = ast.literal_eval(text)["shape"]
        return _npy_of_text(_header_text(data.draw(DESCRS, label="descr"), shape), payload)
    if kind == "version":
        version = data.draw(st.integers(0, 255), label="major")
        return npy[:6] + bytes([version, npy[7]]) + npy[8:]
    return _mutated_bytes(data, npy, kind)


def _mutated_bytes(data, blob: bytes, kind: str) -> bytes:
    """`blob` with 1-4 bytes overwritten ("bytes"), or cut or lengthened ("length")."""
    if kind == "bytes":
        blob = bytearray(blob)
        for _ in range(data.draw(st.integers(1, 4), label="count")):
            at = data.draw(st.integers(0, len(blob) - 1), label="at")
            blob[at] = data.draw(st.integers(0, 255), label="byte")
        return bytes(blob)
    cut = data.draw(st.integers(0, len(blob) + 64), label="cut")
    return blob[:cut] + bytes(max(0, cut - len(blob)))


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _zip(members: dict[str, bytes], method=zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _mutated_directory(data, blob: bytes) -> bytes:
    """A zip with one size field of one member's record changed: the central directory's
    (what zipfile believes) or the local header's, compressed or uncompressed."""
    records = [("central", i, 20) for i in _offsets(blob, b"PK\x01\x02")]
    records += [("local", i, 18) for i in _offsets(blob, b"PK\x03\x04")]
    _, start, sizes_at = data.draw(st.sampled_from(records), label="record")
    field = start + sizes_at + data.draw(st.sampled_from([0, 4]), label="which size")
    old = int.from_bytes(blob[field : field + 4], "little")
    value = data.draw(DIRECTORY_VALUES, label="size")
    value = (old + value) % 2**32 if -64 <= value <= 64 else value  # near the truth, or far
    return blob[:field] + value.to_bytes(4, "little") + blob[field + 4 :]


def _offsets(blob: bytes, signature: bytes) -> list[int]:
    found, start = [], blob.find(signature)
    while start >= 0:
        found.append(start)
        start = blob.find(signature, start + 1)
    return found


def _mutated_description(data, npy: bytes) -> bytes:
    """A cache's description member with one JSON value replaced or removed."""
    tree = json.loads(np.load(io.BytesIO(npy)).tobytes())
    text = json_mutations.draw_mutation(data, tree)
    return _npy(np.frombuffer(text.encode(), np.uint8))


def _mutated_npz(data, path: Path) -> bytes:
    """The archive at `path` changed at one place `data` draws."""
    members = _members(path)
    kind = data.draw(
        st.sampled_from(["member", "directory", "description", "bytes", "length", "deflated"]),
        label="npz",
    )
    if kind == "member":
        name = data.draw(st.sampled_from(sorted(members)), label="member")
        members[name] = _mutated_npy(data, members[name])
        return _zip(members)
    if kind == "directory":
        return _mutated_directory(data, path.read_bytes())
    if kind == "description" and "description.npy" in members:
        members["description.npy"] = _mutated_description(data, members["description.npy"])
        return _zip(members)
    if kind == "deflated":
        return _zip(members, zipfile.ZIP_DEFLATED)
    return _mutated_bytes(data, path.read_bytes(), "length" if kind == "length" else "bytes")


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


# ---------------------------------------------------------------------------- the checks


def _reads_or_names_the_error(read) -> None:
    """`json_mutations.reads_or_names_the_error`, a value taken wrong or cast to
    infinity (a ComplexWarning, a RuntimeWarning) counting as an exception."""

    def strict():
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.ComplexWarning)
            warnings.simplefilter("error", RuntimeWarning)
            read()

    json_mutations.reads_or_names_the_error(strict)


_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_EXAMPLES or 40,
    derandomize=not _EXAMPLES,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    """A valid `<call>.npy`, words and posteriors caches and a tiny bundle."""
    root = tmp_path_factory.mktemp("array-fuzz")
    rng = np.random.default_rng(0)
    np.save(root / "c1.npy", rng.random((FRAMES, asr.NUM_SYMBOLS)).astype(np.float32))
    words = {"k": (asr.TimedWord("hi", 0.1, 0.2, 0.3), asr.TimedWord("yo", 0.3, 0.4, 0.5))}
    recognise._save(str(root / "words.npz"), DIGEST, {**words, "l": ()})
    found = [rng.random((n, asr.NUM_SYMBOLS)).astype(np.float32) for n in (3, 0, 5)]
    recognise._save_posteriors(str(root / "posteriors.npz"), DIGEST, ["k", "l", "m"], found)
    bundle.save(
        root / "bundle",
        task="fuzz",
        params=_expected(FuzzConfig(), rng),
        model_config=FuzzConfig(),
        features=FeatureConfig(),
        labels=["x"],
        decoding=FuzzDecoding(),
        corpus="",
    )
    return root


@dataclasses.dataclass(frozen=True)
class FuzzConfig:
    width: int = 6


@dataclasses.dataclass(frozen=True)
class FuzzDecoding:
    threshold: float = 0.5


def _expected(config: FuzzConfig, rng=None) -> dict:
    """The parameters a `FuzzConfig` has (random values where `rng` is given)."""
    rng = rng or np.random.default_rng(0)
    return {
        "params": {
            "w": rng.normal(size=(config.width, 3)).astype(np.float32),
            "b": np.arange(3, dtype=np.int32),
        }
    }


@FUZZ
@given(data=st.data())
def test_posteriors_npy(sources, tmp_path, data):
    path = tmp_path / "c1.npy"
    path.write_bytes(_mutated_npy(data, (sources / "c1.npy").read_bytes()))
    _reads_or_names_the_error(lambda: annotated_calls.read_posteriors(str(path), FRAMES))


def _cache_read_or_none(read, path: Path) -> None:
    """`read(path, DIGEST)` gives the cache's contents, or None, or a named error."""
    found = read(str(path), DIGEST)
    assert found is None or isinstance(found, dict)


@FUZZ
@given(data=st.data())
def test_words_cache(sources, tmp_path, data):
    path = tmp_path / "words.npz"
    path.write_bytes(_mutated_npz(data, sources / "words.npz"))
    _reads_or_names_the_error(lambda: _cache_read_or_none(recognise._read, path))


@FUZZ
@given(data=st.data())
def test_posteriors_cache(sources, tmp_path, data):
    path = tmp_path / "posteriors.npz"
    path.write_bytes(_mutated_npz(data, sources / "posteriors.npz"))
    _reads_or_names_the_error(lambda: _cache_read_or_none(recognise._read_posteriors, path))


@FUZZ
@given(data=st.data())
def test_bundle_params_npz(sources, tmp_path, data):
    """params.npz mutated and its sha256 in bundle.json forged to match (a sender can)."""
    folder = tmp_path / "bundle"
    folder.mkdir(exist_ok=True)
    params = folder / bundle.PARAMS
    params.write_bytes(_mutated_npz(data, sources / "bundle" / bundle.PARAMS))
    manifest = json.loads((sources / "bundle" / bundle.MANIFEST).read_text())
    manifest["params"]["sha256"] = files.sha256(params)
    (folder / bundle.MANIFEST).write_text(json.dumps(manifest))
    _reads_or_names_the_error(
        lambda: bundle.load(
            folder,
            task="fuzz",
            model_config_type=FuzzConfig,
            decoding_type=FuzzDecoding,
            expected_params=_expected,
        )
    )
