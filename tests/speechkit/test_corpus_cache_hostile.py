"""The render cache holds data only (issue 31, item 3): a cache file replaced by a pickle
is never unpickled, an old `.pkl` item is never opened, and a truncated or crafted item
is rendered again with a line naming the file, never a traceback or code run."""

from __future__ import annotations

import dataclasses
import glob
import io
import json
import math
import os
import pickle
import shutil
import zipfile

import numpy as np
import pytest
import tensorflow_datasets as tfds

from speechkit import corpus


@dataclasses.dataclass(frozen=True)
class Word:
    word: str
    start: float
    emitted: float | None


@dataclasses.dataclass(frozen=True)
class Item:
    features: np.ndarray
    words: tuple[Word, ...]
    labels: dict[str, np.ndarray]
    duration: float
    scale: np.float32
    names: list[str]
    attempts: int
    stage_seconds: dict[str, float]


TYPES = (Item, Word)


def render_one(index: int) -> Item:
    """A small item of every kind of value the cache holds (a worker's job)."""
    rng = np.random.default_rng(index)
    return Item(
        features=rng.normal(size=(5 + index, 4)).astype(np.float32),
        words=(Word("people", 0.1 * index, None), Word("hundred", 1 / 3, math.nan)),
        labels={"questions": np.arange(index + 2, dtype=np.int32), "empty": np.zeros(0)},
        duration=2.5 + index,
        scale=np.float32(0.1),
        names=["a", "é"],
        attempts=index,
        stage_seconds={"text": 0.25},
    )


def assert_same(a, b, where="item") -> None:
    """a and b equal, of the same types all the way down (NaN equals NaN)."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if dataclasses.is_dataclass(a):
        for field in dataclasses.fields(a):
            assert_same(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    elif isinstance(a, np.ndarray | np.generic):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


class Marker:
    """Unpickling this creates the file `path` (as a command run by a pickle would)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def render(cache, count=3) -> list:
    return corpus.render_cached(render_one, list(range(count)), str(cache), "toy", 1, types=TYPES)


def item_file(cache, index: int) -> str:
    """The file of item `index`, whatever its suffix."""
    (path,) = glob.glob(os.path.join(cache, f"item-{index:06d}.*"))
    return path


def test_items_read_back_as_rendered_and_as_data_only(tmp_path):
    cache = tmp_path / "cache"
    first = render(cache)
    for index, item in enumerate(first):
        assert_same(item, render_one(index))
    assert sorted(os.listdir(cache)) == [f"item-{i:06d}.npz" for i in range(3)]
    with np.load(cache / "item-000001.npz", allow_pickle=False) as data:
        assert all(data[name].dtype != object for name in data.files)
    for index, item in enumerate(render(cache)):  # read from the cache
        assert_same(item, render_one(index))


def test_a_pickle_in_place_of_an_item_is_never_unpickled(tmp_path, capfd):
    cache, marker = tmp_path / "cache", tmp_path / "code-ran"
    render(cache)
    hostile = item_file(cache, 0)
    with open(hostile, "wb") as out:
        pickle.dump(Marker(marker), out)
    items = render(cache)
    assert not marker.exists(), "the cache ran code"
    assert_same(items[0], render_one(0))
    assert f"[toy] rendering again: {hostile}: not a readable cache item" in capfd.readouterr().err


def test_an_old_pickle_item_is_never_opened(tmp_path, capfd):
    cache, marker = tmp_path / "cache", tmp_path / "code-ran"
    cache.mkdir()
    for index in range(2):
        with open(cache / f"item-{index:06d}.pkl", "wb") as out:
            pickle.dump(Marker(marker), out)
    items = render(cache, count=2)
    assert not marker.exists(), "the cache ran code"
    for index, item in enumerate(items):
        assert_same(item, render_one(index))
    assert (cache / "item-000000.npz").exists() and (cache / "item-000000.pkl").exists()
    said = "[toy] rendering again 2 items cached as pickles by an older version "
    said += f"(item-*.pkl in {cache}: never opened"
    assert said in capfd.readouterr().err


def _rewrite(path, change) -> None:
    """The npz at `path` with its members {name: array} passed through `change`."""
    with np.load(path, allow_pickle=False) as data:
        members = {name: data[name] for name in data.files}
    change(members)
    with open(path, "wb") as out:
        np.savez(out, **members)


def _describe(change):
    """A `_rewrite` change of the item's JSON description."""

    def rewrite(members):
        description = json.loads(members["item"].tobytes())
        description = change(description) or description
        members["item"] = np.frombuffer(json.dumps(description).encode(), np.uint8)

    return rewrite


def _replace(path, data: bytes) -> None:
    with open(path, "wb") as out:
        out.write(data)


def _truncate(path):
    with open(path, "rb") as source:
        data = source.read()
    with open(path, "wb") as out:
        out.write(data[: len(data) // 2])


def _object_member(marker):
    def write(path):
        with open(path, "wb") as out:
            np.savez(out, item=np.zeros(3, np.uint8), a0=np.array([Marker(marker)], dtype=object))

    return write


def _compressed(path):
    with np.load(path, allow_pickle=False) as data:
        members = {name: data[name] for name in data.files}
    with open(path, "wb") as out:
        np.savez_compressed(out, **members)


def _lying_header(path):
    """a0's header claims 10^12 float32s: refused before anything that size is made."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "<f4", "fortran_order": False, "shape": (10**12,)}
    )
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["a0.npy"] = buffer.getvalue() + b"\0" * 64
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _field(name, value):
    def change(description):
        description["fields"][name] = value

    return _describe(change)


def _nested(members):
    """The description nested 100000 lists deep (JSON text: too deep to build as objects)."""
    depth = 100_000
    text = '{"list":[' * depth + '"x"' + "]}" * depth
    members["item"] = np.frombuffer(text.encode(), np.uint8)


def _foreign_type(description):
    description["dataclass"] = "subprocess.Popen"
    description["fields"] = {"args": ["touch", "code-ran"]}


BREAKAGES = {
    "truncated": (_truncate, "not a readable cache item (File is not a zip file)"),
    "empty": (lambda path: _replace(path, b""), "not a readable cache item"),
    "text": (lambda path: _replace(path, b"not an npz"), "not a readable cache item"),
    "compressed": (_compressed, "member 'item.npy': compressed"),
    "lying header": (_lying_header, "member 'a0.npy': its header says (1000000000000,)"),
    "foreign type": (
        lambda path: _rewrite(path, _describe(_foreign_type)),
        "type 'subprocess.Popen' is not one of",
    ),
    "field of another type": (
        lambda path: _rewrite(path, _field("duration", "long")),
        "item.duration: str 'long' does not fit the annotation <class 'float'>",
    ),
    "missing field": (
        lambda path: _rewrite(path, _describe(lambda d: d["fields"].pop("words") and None)),
        "needs fields",
    ),
    "missing array": (
        lambda path: _rewrite(path, lambda members: members.pop("a0")),
        "item.features: no array 'a0' in the file",
    ),
    "deep nesting": (lambda path: _rewrite(path, _nested), "not a readable cache item"),
    "not json": (
        lambda path: _rewrite(path, lambda m: m.update(item=np.frombuffer(b"{", np.uint8))),
        "member 'item' is not JSON",
    ),
}


def test_broken_items_are_rendered_again_naming_the_file(tmp_path, capfd):
    cache, marker = tmp_path / "cache", tmp_path / "code-ran"
    breakages = {**BREAKAGES, "object array": (_object_member(marker), "an object array")}
    count = len(breakages)
    render(cache, count)
    capfd.readouterr()
    for index, (breakage, _) in enumerate(breakages.values()):
        breakage(item_file(cache, index))
    items = render(cache, count)
    assert not marker.exists(), "the cache ran code"
    err = capfd.readouterr().err
    for index, (name, (_, message)) in enumerate(breakages.items()):
        assert_same(items[index], render_one(index), name)
        line = f"[toy] rendering again: {item_file(cache, index)}: "
        assert line in err, f"{name}: no line {line!r} in {err}"
        said = err.split(line, 1)[1].split("\n", 1)[0]
        assert message in said, f"{name}: {said!r}"
    for index, item in enumerate(render(cache, count)):  # the rendered items are good now
        assert_same(item, render_one(index))
    assert "rendering again" not in capfd.readouterr().err


@dataclasses.dataclass(frozen=True)
class Unlisted:
    value: int


def render_unlisted(index: int):
    return Item(np.zeros(1), (), {}, 1.0, np.float32(0), [], index, {"x": Unlisted(1)})


def test_an_item_of_a_type_not_listed_is_a_named_error(tmp_path):
    with pytest.raises(TypeError, match="holds a .*Unlisted, not one of its types"):
        corpus.render_cached(render_unlisted, [0], str(tmp_path), "toy", 1, types=TYPES)


def _kws_records(data_dir) -> dict:
    sources = tfds.data_source("synthetic_kws/smoke", data_dir=str(data_dir))
    return {
        split: [sources[split][i] for i in range(len(sources[split]))] for split in sorted(sources)
    }


@pytest.mark.slow
def test_a_hostile_and_a_truncated_item_in_a_built_corpus(smoke_build, tmp_path, capfd):
    """synthetic_kws built again from its render cache, one item replaced by a pickle
    that would run code and one truncated: no code runs, the two items are rendered
    again, the records are those of the first build."""
    from cskws_jax.datasets import synthetic_kws

    data_dir, _ = smoke_build
    copy, marker = tmp_path / "tfds", tmp_path / "code-ran"
    shutil.copytree(
        data_dir / "synthetic_kws" / "render_cache", copy / "synthetic_kws" / "render_cache"
    )
    (train,) = glob.glob(f"{copy}/synthetic_kws/render_cache/*/train")
    hostile = item_file(train, 0)
    with open(hostile, "wb") as out:
        pickle.dump(Marker(marker), out)
    truncated = item_file(train.replace("/train", "/test"), 1)
    _truncate(truncated)
    synthetic_kws.SyntheticKws(config="smoke", data_dir=str(copy)).download_and_prepare()
    assert not marker.exists(), "the cache ran code"
    err = capfd.readouterr().err
    assert f"rendering again: {hostile}: not a readable cache item" in err
    assert f"rendering again: {truncated}: not a readable cache item" in err
    built, again = _kws_records(data_dir), _kws_records(copy)
    assert built.keys() == again.keys()
    for split in built:
        assert len(built[split]) == len(again[split])
        for record, other in zip(built[split], again[split], strict=True):
            assert record.keys() == other.keys()
            for key in record:
                np.testing.assert_array_equal(record[key], other[key], err_msg=f"{split} {key}")
