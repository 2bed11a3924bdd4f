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
            "--batch",
            "2",
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
    assert set(record["ratios"]) >= {
        "sklearn_timestep_over_jit_timestep_plus_instance",
        "numpy_ap_peer_over_jit_detection_scores",
    }
    assert record["machine"]["backend"] in ("cpu", "gpu", "tpu")
    assert not list(path.parent.glob("*.tmp"))  # written atomically
