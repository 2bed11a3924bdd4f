"""The demo (make demo) runs end to end on small data and writes what it promises."""

import json

from experiments import metrics_demo


def test_demo_writes_table_plots_and_results(tmp_path, capsys):
    code = metrics_demo.main(
        ["--out", str(tmp_path), "--calls", "3", "--timesteps", "800", "--utterances", "12"]
    )
    assert code == 0
    table = capsys.readouterr().out
    assert "TIMESTEP P/R/F1" in table and "difficulty 0.9" in table
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["max_abs_difference_vs_reference"] <= 1e-5
    assert [row["system"] for row in results["systems"]] == [
        f"difficulty {d}" for d in metrics_demo.DIFFICULTIES
    ]
    for image in ("frr_vs_fa.png", "timeline.png"):
        assert (tmp_path / image).read_bytes()[:4] == b"\x89PNG"
