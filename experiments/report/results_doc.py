"""docs/results.md, written from the result JSON committed in the repository (`render`).

    python -m experiments.report.results_doc            # writes docs/results.md
    python -m experiments.report.results_doc --check    # exit 1 when it differs
    python -m experiments.report.results_doc --record docs/results/studies.json \\
        --date 2026-12-04 --commit 0123abc --command "make studies"

The sources and their date, commit and command are in docs/results/provenance.json (the
result files do not record them); each entry holds the file's sha256, and a file whose
content differs from its entry is refused until `--record` records the new run.

`DOCUMENT` is the order of the sections. Those that share a shape are data in
`results_sections` (rendered by `results_tables`), each shown once its source is recorded;
the few of their own shape are below, among them the studies' section, which says how to
add docs/results/studies.json while it is absent.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from experiments.report import results_sections as sections
from experiments.report.markdown import header, row
from experiments.report.results_tables import link, minutes, source_line
from speechkit import files

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = "docs/results.md"
PROVENANCE = "docs/results/provenance.json"
STUDIES = "docs/results/studies.json"
STUDIES_COMMAND = (
    "make studies  # python -m experiments.studies --config=experiments/configs/studies.py:quick "
    "--workdir=outputs/studies --config.data_dir=outputs/tensorflow_datasets"
)
PREAMBLE = [
    "# Results",
    "",
    "<!-- Written by `python -m experiments.report.results_doc` from the JSON files it names; "
    "do not edit by hand. tests/test_results_doc.py fails when this file and the generator's "
    "output differ. -->",
    "",
    "Every measured number of the project's documentation is here, read from result files "
    "committed in the repository. All scores are on synthetic speech (see the README's "
    "limitations); compare numbers measured on one machine (XLA:CPU picks its kernels per "
    "processor, and training amplifies last-bit differences).",
    "",
]


class ProvenanceError(ValueError):
    """A cited result file without a provenance entry, or changed since it was recorded."""


def load(root: pathlib.Path = ROOT) -> tuple[dict, dict]:
    """(provenance, {source name: its JSON}), each file checked against its sha256."""
    provenance = json.loads((root / PROVENANCE).read_text())
    data = {}
    for name, source in provenance["sources"].items():
        path = root / source["path"]
        if files.sha256(path) != source["sha256"]:
            raise ProvenanceError(
                f"{source['path']}: its content differs from the run recorded in {PROVENANCE}; "
                "record the run that wrote it: python -m experiments.report.results_doc "
                f"--record {source['path']} --date ... --commit ... --command ..."
            )
        data[name] = json.loads(path.read_text())
    if (root / STUDIES).exists() and "studies" not in data:
        raise ProvenanceError(
            f"{STUDIES} has no entry in {PROVENANCE}: python -m experiments.report.results_doc "
            f"--record {STUDIES} --date ... --commit ... --command 'make studies'"
        )
    return provenance, data


def _sources(provenance: dict, data: dict) -> list[str]:
    return [
        "## Sources",
        "",
        "Each table below names the file it is read from. The files do not record their "
        f"commit or date; {link(PROVENANCE)} does. For the main job the commit is the "
        "code that ran; for the benchmarks it is the commit that recorded the file.",
        "",
        *header("file | what | date | commit | command"),
        *(
            row(link(s["path"]), s["what"], s["date"], f"`{s['commit'][:7]}`", f"`{s['command']}`")
            for s in provenance["sources"].values()
        ),
        "",
    ]


def _demo_run(provenance: dict, data: dict) -> list[str]:
    run, compiled = provenance["runs"]["demo"], data["demo-compilation"]
    stages = ", ".join(f"{k} {minutes(v)}" for k, v in run["stage_seconds"].items())
    programs = ", ".join(
        f"{stage} {r['programs']} in {r['compile_seconds']:.0f} s, {r['cache_hits']} from the cache"
        for stage, r in compiled.items()
    )
    return [
        "## The main job (`make demo`)",
        "",
        f"The run: {run['what']}. Wall time {minutes(run['wall_seconds'])} (user CPU "
        f"{minutes(run['user_seconds'])}, system {minutes(run['system_seconds'])}), peak memory "
        f"{run['max_rss_kb'] / 1e6:.1f} GB; stages: {stages}. "
        f"{sum(r['programs'] for r in compiled.values())} programs compiled in "
        f"{sum(r['compile_seconds'] for r in compiled.values()):.0f} s ({programs}). The times "
        f"are transcribed from {run['transcribed_from']} into {link(PROVENANCE)}, the "
        "compilation counts read from its compilation.json. "
        + source_line(provenance["sources"]["demo-compilation"]),
        "",
    ]


def _studies(provenance: dict, data: dict) -> list[str]:
    lines = ["## The studies (`make studies`)", ""]
    payload = data.get("studies")
    if payload is None:
        return lines + [
            f"Not recorded yet: {STUDIES} is absent. To add it, run `{STUDIES_COMMAND}`, copy "
            f"outputs/studies/studies.json to {STUDIES}, record its run with "
            f"`python -m experiments.report.results_doc --record {STUDIES} --date DATE "
            "--commit COMMIT --command 'make studies'` and run "
            "`python -m experiments.report.results_doc` again.",
            "",
        ]
    from experiments.report import studies_md  # only when there are studies to show

    seconds = ", ".join(f"{k} {v:.0f}" for k, v in payload["seconds"].items())
    lines += [
        f"Preset `{payload['preset']}`; corpora `{payload['corpora']['multiqt']}` and "
        f"`{payload['corpora']['cskws']}`. MultiQT scores: mean ± std over "
        f"{payload['num_folds']} folds. Seconds per study: {seconds}. "
        + source_line(provenance["sources"]["studies"]),
        "",
        *header("claim", "verdict", "evidence"),
        *(row(c["claim"], f"**{c['verdict']}**", c["evidence"]) for c in payload["claims"]),
        "",
    ]
    figureless = {study: "" for study in studies_md.SECTIONS}
    for study, section in studies_md.SECTIONS.items():
        if study in payload["studies"]:
            lines += [
                line.replace("## ", "### ", 1) if line.startswith("## ") else line
                for line in section(payload["studies"][study], payload, figureless)
                if not line.startswith("![")
            ]
    return lines + [""]


def _multiqt_by_text(provenance: dict, data: dict) -> list[str]:
    """MultiQT fed each recogniser's text (sources multiqt-TASK-RECOGNISER), once the
    recogniser's run is recorded."""
    names = [name for name in provenance["sources"] if name.startswith("multiqt-")]
    if "recogniser-quick" not in data or not names:
        return []
    order = list(sections.TEXT_SOURCES)
    names.sort(key=lambda name: (data[name]["task"], order.index(data[name]["text_recogniser"])))
    return [
        "### MultiQT fed the CTC recogniser's text",
        "",
        "Quick corpora, 5 folds; the text input: the causal words of each recogniser "
        "(greedy for the CTC recogniser), or the CTC recogniser's 20 ms character "
        "posteriors; mean ± std over the folds.",
        "",
        sections.MULTIQT_BY_TEXT([data[name] for name in names]),
        "",
        *(f"- {source_line(provenance['sources'][name])}" for name in names),
        "",
    ]


OUTCOMES = {True: "yes", False: "no", None: "not measured"}


def _gpu_run(run: dict, source: dict) -> list[str]:
    """One run of the device check: its machine, tests, contract, determinism, streaming."""
    machine, tests = run["machine"], run["tests"]
    if isinstance(machine, dict):
        machine = (
            f"{machine['device_kind']}, jax {machine['jax']} ({machine['platform_version']}), "
            f"Python {machine['python']}"
        )
    failed = ", ".join(t.rsplit("::", 1)[-1] for t in tests.get("failed_tests") or [])
    lines = [
        f"### {source['what']}",
        "",
        f"{machine}.",
        "",
        f"- Tests: {tests['passed']} passed, {tests['failed']} failed, {tests['skipped']} skipped"
        + (f" (failed: {failed})." if failed else "."),
    ]
    if "contract" in run:
        holds = OUTCOMES[run["contract"].get("holds")]
        lines.append(f"- Streaming contract within 1e-5: {holds}.")
    if "determinism" in run:
        identical = OUTCOMES[run["determinism"].get("identical")]
        lines.append(f"- Training bit-identical in fresh processes: {identical}.")
    blocks = (run.get("streaming") or {}).get("summary")
    table = ["", sections.GPU_STREAMING(blocks)] if blocks else []
    return lines + table + ["", source_line(source), ""]


def _accelerators(provenance: dict, data: dict) -> list[str]:
    """The device check's runs (`benchmarks.gpu_check`): sources named gpu-*, each a whole
    check or a later call's summary."""
    names = [name for name in provenance["sources"] if name.startswith("gpu-")]
    if not names:
        return []
    return [
        "## Accelerators (`benchmarks.gpu_check`)",
        "",
        *(line for name in names for line in _gpu_run(data[name], provenance["sources"][name])),
        "What failed there and why: [gpu.md](gpu.md#measured-on-an-nvidia-h200).",
        "",
    ]


DOCUMENT = (
    _sources,
    _demo_run,
    sections.CORPORA,
    sections.MULTIQT_QUESTIONS,
    sections.MULTIQT_SYMPTOMS,
    sections.CSKWS,
    sections.ENGINE_TRANSFER,
    _studies,
    sections.RECOGNISER,
    _multiqt_by_text,
    sections.BENCHMARKS,
    _accelerators,
)


def render(root: pathlib.Path = ROOT) -> str:
    """docs/results.md's text from the result files under `root`."""
    provenance, data = load(root)
    lines = PREAMBLE + [line for section in DOCUMENT for line in section(provenance, data)]
    while lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def record(root: pathlib.Path, path: str, date: str, commit: str, command: str, what: str):
    """Adds or updates the provenance entry of the result file `path` (relative to root)."""
    provenance = json.loads((root / PROVENANCE).read_text())
    name = next(
        (n for n, s in provenance["sources"].items() if s["path"] == path),
        "studies" if path == STUDIES else pathlib.Path(path).stem,
    )
    entry = provenance["sources"].get(name, {"path": path, "what": what or "the studies"})
    entry.update(date=date, commit=commit, command=command, sha256=files.sha256(root / path))
    if what:
        entry["what"] = what
    entry.setdefault("commit_is", "the code that ran")
    provenance["sources"][name] = entry
    (root / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/results.md differs")
    parser.add_argument("--record", metavar="PATH", help="record the run that wrote PATH")
    parser.add_argument("--date", help="with --record: the run's date (YYYY-MM-DD)")
    parser.add_argument("--commit", help="with --record: the commit that ran")
    parser.add_argument("--command", help="with --record: the command that wrote the file")
    parser.add_argument("--what", default="", help="with --record: what the file holds")
    args = parser.parse_args(argv)
    if args.record:
        if not (args.date and args.commit and args.command):
            parser.error("--record needs --date, --commit and --command")
        record(ROOT, args.record, args.date, args.commit, args.command, args.what)
    try:
        text = render(ROOT)
    except ProvenanceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    path = ROOT / DOC
    if args.check:
        same = path.exists() and path.read_text() == text
        print(f"{DOC} is {'up to date' if same else 'out of date: run without --check'}")
        return 0 if same else 1
    path.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
