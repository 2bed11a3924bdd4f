"""folder_kws label files someone sent (issue 59, items 3 and 7): read with bounds (a
link to /dev/zero, a file over the cap, nesting deeper than the parser recurses, a
5000-digit number) and checked for repeated keys in linear time; each a FolderKwsError
naming the file."""

from __future__ import annotations

import json
import os
import threading

import pytest

from cskws_jax.datasets import folder_kws
from speechkit import files

from .test_folder_kws_links import recording


@pytest.fixture()
def manual(tmp_path):
    root = tmp_path / "manual"
    root.mkdir()
    recording(root / "a.wav")
    return root


_HUGE_START = '[{"keyword": "people", "start": 1' + "0" * 400 + ', "end": 0.4}]'  # > float


def _sparse(path, size: int) -> None:
    with open(path, "wb") as out:
        out.truncate(size)


@pytest.mark.parametrize(
    "plant, message",
    [
        (lambda p: (p.unlink(), p.symlink_to("/dev/zero")), "not a regular file \\(a character"),
        (lambda p: (p.unlink(), os.mkfifo(p)), "not a regular file \\(a FIFO\\)"),
        (
            lambda p: _sparse(p, files.JSON_LIMIT + 1),
            f"{(1 << 24) + 1} bytes, more than a JSON file.s limit of {1 << 24}",
        ),
        (lambda p: p.write_text("[" * 100_000), "not valid JSON \\(nested deeper than read\\)"),
        (lambda p: p.write_text("9" * 5000), "not valid JSON \\(Exceeds the limit"),
        (lambda p: p.write_bytes(b"\xff\xfe[]"), "not valid JSON"),
        (lambda p: p.write_text(_HUGE_START), r"intervals\[0\]\.start must be a finite number"),
    ],
)
def test_a_label_file_is_read_with_bounds(manual, plant, message):
    plant(manual / "a.json")
    with pytest.raises(folder_kws.FolderKwsError, match=rf"a\.json: {message}"):
        list(folder_kws.folder_records(str(manual), ("people",)))


def test_the_folders_keywords_json_is_read_with_bounds(manual):
    (manual / "a.json").unlink()
    (manual / "keywords.json").symlink_to("/dev/zero")
    with pytest.raises(folder_kws.FolderKwsError, match="keywords.json: not a regular file"):
        list(folder_kws.folder_records(str(manual), ("people",)))


def test_repeated_keys_are_found_in_linear_time(tmp_path):
    """40,000 keys took 31 s with the quadratic check; 400,000 must finish well inside
    the guard (a quadratic check would take about an hour)."""
    keys = [f"k{i}.wav" for i in range(400_000)] + ["k7.wav"]
    text = "{" + ", ".join(f"{json.dumps(k)}: []" for k in keys) + "}"
    path = tmp_path / "keywords.json"
    path.write_text(text)
    found = {}

    def read():
        try:
            folder_kws.read_json(str(path))
        except folder_kws.FolderKwsError as err:
            found["error"] = str(err)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the repeated-key check did not finish in 60 s"
    assert found["error"].endswith("the key 'k7.wav' appears twice")
