"""experiments.fingerprint: the batch digests and the results comparison a refactor is
checked with."""

import json

import numpy as np

from experiments import fingerprint


def test_digest_sees_every_byte_name_dtype_and_shape_of_the_first_batches():
    batches = [{"audio": np.zeros((2, 3), np.float32), "labels": np.arange(2)} for _ in range(3)]
    base = fingerprint.digest(batches, count=2)
    assert base == fingerprint.digest([dict(b) for b in batches], count=2)
    assert base == fingerprint.digest(batches[:2] + [{"other": np.ones(1)}], count=2)
    changed = [dict(b) for b in batches]
    changed[1] = {**changed[1], "labels": np.array([0, 2])}
    assert fingerprint.digest(changed, count=2) != base
    assert (
        fingerprint.digest([{**b, "audio": b["audio"].reshape(3, 2)} for b in batches], 2) != base
    )
    assert (
        fingerprint.digest([{**b, "audio": b["audio"].astype(np.float64)} for b in batches], 2)
        != base
    )


def test_differences_skip_wall_clock_fields_and_name_every_other_change(tmp_path):
    old = {"models": {"a": {"mAP": 0.5, "RTF": 0.01, "seconds": 3.0, "ap": [0.1, None]}}}
    same = json.loads(json.dumps(old))
    same["models"]["a"].update(RTF=0.02, seconds=9.0)
    assert fingerprint.differences(old, same) == []
    moved = json.loads(json.dumps(old))
    moved["models"]["a"]["ap"][1] = 0.2
    moved["models"]["a"]["mAP"] = float("nan")
    assert fingerprint.differences(old, moved) == [
        ".models.a.mAP: 0.5 != nan",
        ".models.a.ap[1]: None != 0.2",
    ]
    assert fingerprint.differences({"x": float("nan")}, {"x": float("nan")}) == []
    assert fingerprint.differences({"a": 1, "b": 2}, {"b": 2, "a": 1}) == [
        ": keys ['a', 'b'] != ['b', 'a']"
    ]
    for name, payload in (("old", old), ("new", moved)):
        (tmp_path / f"{name}.json").write_text(json.dumps(payload))
    assert (
        fingerprint.main(["compare", str(tmp_path / "old.json"), str(tmp_path / "old.json")]) == 0
    )
    assert (
        fingerprint.main(["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    )


def test_compare_names_a_file_it_cannot_read(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text("{}")
    bad.write_text("{")
    cases = ((tmp_path, "Is a directory"), (bad, "Expecting"), (tmp_path / "no", "No such file"))
    for other, reason in cases:
        assert fingerprint.main(["compare", str(good), str(other)]) == 2
        err = capsys.readouterr().err
        assert f"{other}: not a readable JSON file (" in err and reason in err


def test_pipelines_fingerprint_every_runner_pipeline_on_the_smoke_corpora(smoke_build):
    data_dir, _ = smoke_build
    found = fingerprint.pipelines(str(data_dir), count=2)
    for task in ("questions", "symptoms"):
        for part in ("train-fold0", "train-fold4", "eval-fold0", "eval-heldout"):
            assert f"multiqt-{task}-{part}" in found
    for part in ("train-unknownTrue", "train-unknownFalse", "eval-test", "eval-heldout"):
        assert f"cskws-{part}" in found
    assert len(set(found.values())) == len(found)  # every pipeline its own batches
    assert all(len(value) == 64 for value in found.values())
