"""The metrics benchmark runs on tiny inputs and writes a complete JSON record."""

import json

from benchmarks import metrics as metrics_benchmark


def test_benchmark_json_on_tiny_inputs(tmp_path):
    path = tmp_path / "out" / "metrics.json"
    code = metrics_benchmark.main(
        [
            "--json",
            str(path),
            "--repeats",
            "2",
            "--sequence-repeats",
            "2",
            "--batch",
            "3",
            "--length",
            "300",
            "--det-batch",
            "4",
            "--dets",
            "6",
            "--gts",
            "3",
            "--kws-classes",
            "3",
        ]
    )
    assert code == 0
    record = json.loads(path.read_text())
    assert record["values_agree_within_1e-6"] is True
    sequence = record["sequence"]
    # The before/after of issue 30: today's sequence metrics and the frozen copy of the
    # earlier ones, timed in the same run, with the same values.
    for key in ("jit_timestep_plus_instance", "jit_timestep_plus_instance_pre_issue_30"):
        assert sequence["seconds"][key] > 0 and sequence["min_seconds"][key] > 0
    assert sequence["max_abs_difference"]["instance_vs_pre_issue_30"] == 0
    assert sequence["max_abs_difference"]["timestep_vs_pre_issue_30"] == 0
    ratios = {
        "sklearn_timestep_over_jit_timestep_plus_instance",
        "sklearn_timestep_over_jit_timestep_plus_instance_pre_issue_30",
        "pre_issue_30_over_jit_timestep_plus_instance",
        "numpy_ap_peer_over_jit_detection_scores",
    }
    assert set(record["ratios"]) >= ratios
    assert set(record["ratios_of_minimums"]) >= ratios
    assert set(record["targets"]) == {
        "sequence_vs_sklearn_10x_median",
        "detection_vs_numpy_peer_10x",
    }
    assert record["machine"]["backend"] in ("cpu", "gpu", "tpu")
    assert not list(path.parent.glob("*.tmp"))  # written atomically
