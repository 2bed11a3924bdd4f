"""docs/results.md is what its generator writes from the result JSON it cites, and the
generator refuses a cited file whose content changed since its run was recorded."""

import json
import pathlib
import shutil

import pytest

from experiments.report import results_doc, results_tables

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_results_md_is_generated_from_the_committed_json():
    written = (ROOT / results_doc.DOC).read_text()
    assert written == results_doc.render(ROOT), (
        "docs/results.md differs from its sources: run python -m experiments.report.results_doc"
    )


def test_every_cited_file_has_date_commit_and_command():
    provenance = json.loads((ROOT / results_doc.PROVENANCE).read_text())
    text = (ROOT / results_doc.DOC).read_text()
    for source in provenance["sources"].values():
        assert source["date"] and source["commit"] and source["command"], source["path"]
        assert source["path"] in text


def _copy(tmp_path: pathlib.Path) -> pathlib.Path:
    provenance = json.loads((ROOT / results_doc.PROVENANCE).read_text())
    for rel in [results_doc.PROVENANCE] + [s["path"] for s in provenance["sources"].values()]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_a_changed_result_file_is_refused_until_recorded(tmp_path):
    root = _copy(tmp_path)
    path = root / "docs/results/demo-cskws.json"
    data = json.loads(path.read_text())
    data["models"]["afkws"]["mAP"] = 0.5
    path.write_text(json.dumps(data))
    with pytest.raises(results_doc.ProvenanceError, match="demo-cskws.json"):
        results_doc.render(root)
    cskws = "docs/results/demo-cskws.json"
    results_doc.record(root, cskws, "2027-01-01", "f" * 40, "make demo", "")
    assert "| AF-KWS | 0.500" in results_doc.render(root)


def test_studies_json_needs_its_provenance(tmp_path):
    root = _copy(tmp_path)
    assert "## The studies (`make studies`)" in results_doc.render(root)
    (root / results_doc.STUDIES).unlink()
    provenance = root / "docs/results/provenance.json"
    recorded = json.loads(provenance.read_text())
    del recorded["sources"]["studies"]
    provenance.write_text(json.dumps(recorded))
    assert "Not recorded yet" in results_doc.render(root)
    (root / results_doc.STUDIES).write_text("{}")
    with pytest.raises(results_doc.ProvenanceError, match="studies.json"):
        results_doc.render(root)


def test_a_section_renders_its_templates_and_table_once_its_source_is_recorded():
    section = results_tables.Section(
        "toy",
        "### Toy, {d[n]} runs",
        intro="Took {d[seconds]:minutes}, {share:.0%} of it compiling.",
        columns="a | b",
        rows=lambda d: [(str(d["n"]), "x")],
        names=lambda d: {"share": d["compile"] / d["seconds"]},
    )
    toy = {"path": "docs/results/toy.json", "date": "2027-01-01", "commit": "f" * 40}
    provenance = {"sources": {"toy": {**toy, "command": "make toy"}}}
    assert section(provenance, {}) == []
    assert section(provenance, {"toy": {"n": 3, "seconds": 65, "compile": 13}}) == [
        "### Toy, 3 runs",
        "",
        "Took 1 min 5 s, 20% of it compiling.",
        "",
        "| a | b |\n|---|---|\n| 3 | x |",
        "",
        "Source: [docs/results/toy.json](results/toy.json); 2027-01-01, commit `fffffff`; "
        "`make toy`.",
        "",
    ]
