"""folder_kws and symbolic links (issue 31, item 5): a linked-in folder of recordings is
read once, as if it were there; a link that loops, or a second path to one folder, is a
FolderKwsError naming the link, never recordings counted again and again."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from cskws_jax.datasets import folder_kws
from speechkit import audio_io

RATE = 16_000


def recording(path, seconds: float = 0.5, seed: int = 0) -> None:
    """A short tone over a little noise, with an empty interval list beside it."""
    t = np.arange(int(seconds * RATE)) / RATE
    noise = 0.01 * np.random.default_rng(seed).normal(size=t.size)
    audio_io.write_audio(path, (0.3 * np.sin(2 * np.pi * 440 * t) + noise).astype(np.float32), RATE)
    path.with_suffix(".json").write_text(json.dumps([]))


def speaker_folder(root):
    """root/spk1/{a,b,c}.wav: three recordings."""
    (root / "spk1").mkdir(parents=True)
    for seed, name in enumerate("abc"):
        recording(root / "spk1" / f"{name}.wav", seed=seed)
    return root


def audio_ids(manual) -> list[str]:
    return [
        os.path.splitext(os.path.relpath(item.audio, manual))[0]
        for item in folder_kws.find_files(str(manual))
    ]


def test_a_link_to_the_folder_itself_is_refused_naming_the_link(tmp_path):
    manual = speaker_folder(tmp_path / "manual")
    os.symlink(".", manual / "spk1" / "loop")
    link = str(manual / "spk1" / "loop")
    with pytest.raises(folder_kws.FolderKwsError, match=f"^{link}: a symbolic link to .*loop"):
        folder_kws.find_files(str(manual))
    with pytest.raises(folder_kws.FolderKwsError, match=f"^{link}: "):
        list(folder_kws.folder_records(str(manual), ("people",)))


def test_a_link_to_a_folder_above_is_refused_naming_the_link(tmp_path):
    manual = speaker_folder(tmp_path / "manual")
    os.symlink("../..", manual / "spk1" / "up")  # -> tmp_path, which holds manual
    link = str(manual / "spk1" / "up")
    with pytest.raises(folder_kws.FolderKwsError, match=f"^{link}: a symbolic link to "):
        folder_kws.find_files(str(manual))


def test_a_second_path_to_one_folder_is_refused_naming_the_link(tmp_path):
    manual = speaker_folder(tmp_path / "manual")
    os.symlink("spk1", manual / "again")  # "again" sorts before "spk1": read first
    with pytest.raises(folder_kws.FolderKwsError, match=f"symbolic link {manual / 'again'};"):
        folder_kws.find_files(str(manual))


def test_a_linked_in_folder_is_read_once_as_if_it_were_there(tmp_path):
    speaker_folder(tmp_path / "elsewhere")
    recording(tmp_path / "elsewhere" / "spk1" / "d.wav", seed=3)
    manual = tmp_path / "manual"
    manual.mkdir()
    recording(manual / "own.wav", seed=4)
    os.symlink(tmp_path / "elsewhere" / "spk1", manual / "spk1")
    assert audio_ids(manual) == ["own", "spk1/a", "spk1/b", "spk1/c", "spk1/d"]
    ids = [key for key, _ in folder_kws.folder_records(str(manual), ("people",))]
    assert ids == ["own", "spk1/a", "spk1/b", "spk1/c", "spk1/d"]


def test_a_manual_dir_that_is_a_looping_link_says_so(tmp_path):
    manual = tmp_path / "manual"
    os.symlink("manual", manual)  # a link to itself
    with pytest.raises(folder_kws.FolderKwsError, match=f"^{manual}: .*symbolic link .*loop"):
        folder_kws.find_files(str(manual))
