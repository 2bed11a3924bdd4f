"""speechkit.files: a failed write leaves the old file (or none) and no temporary file."""

import json

import pytest

from speechkit import files


def test_json_round_trip_and_missing_file(tmp_path):
    path = tmp_path / "sub" / "results.json"
    assert files.read_json(path) is None
    files.write_json(path, {"mAP": 0.5, "curve": [1, 2]})
    assert files.read_json(path) == {"mAP": 0.5, "curve": [1, 2]}
    assert path.read_text().endswith("}\n") and json.loads(path.read_text())["mAP"] == 0.5
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    assert path.stat().st_mode == plain.stat().st_mode  # not mkstemp's 0o600


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="killed"), files.atomic_open(path) as out:
        out.write("half of a new report")
        raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_atomic_path_keeps_the_suffix_and_refuses_reading_modes(tmp_path):
    with files.atomic_path(tmp_path / "audio.flac") as temporary:
        assert temporary.endswith(".tmp.flac")
        with open(temporary, "wb") as out:
            out.write(b"fLaC")
    assert (tmp_path / "audio.flac").read_bytes() == b"fLaC"
    with (
        pytest.raises(ValueError, match="expected a writing mode"),
        files.atomic_open(tmp_path / "x", "r"),
    ):
        pass


def test_npz_and_figures_are_written_whole_or_not_at_all(tmp_path):
    import numpy as np

    path = tmp_path / "out" / "arrays.npz"
    files.save_npz(path, a=np.arange(3), b=np.ones((2, 2), np.float32))
    with np.load(path, allow_pickle=False) as saved:
        assert saved["a"].tolist() == [0, 1, 2] and saved["b"].shape == (2, 2)
    old = path.read_bytes()
    with pytest.raises(ValueError):  # an object array is refused half-way through the zip
        files.save_npz(path, a=np.arange(3), b=np.array([object()]), allow_pickle=False)
    assert path.read_bytes() == old
    assert [p.name for p in path.parent.iterdir()] == ["arrays.npz"]

    class Figure:  # a matplotlib figure that writes half a PNG, then the disk is full
        def savefig(self, target, **kwargs):
            assert kwargs == {"dpi": 90} and str(target).endswith(".tmp.png")
            with open(target, "wb") as out:
                out.write(b"\x89PNG half")
            if self.fail:
                raise OSError("disk full")

    figure = Figure()
    figure.fail = False
    files.save_figure(figure, tmp_path / "fig" / "curve.png", dpi=90)
    figure.fail = True
    with pytest.raises(OSError, match="disk full"):
        files.save_figure(figure, tmp_path / "fig" / "other.png", dpi=90)
    assert [p.name for p in (tmp_path / "fig").iterdir()] == ["curve.png"]
