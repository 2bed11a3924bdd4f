"""The report layer: the documents that `experiments.reproduce` (report.md,
`reproduce_md`) and `experiments.studies` (studies.md, `studies_md`) write from their
results, with their shared parts: `figures` (every figure, through one atomic writer),
`claims` (the papers' claims and their verdicts), `markdown` (number formats, table
lines), `models` (model names, scores over folds) and `layout` (where the main job runs
MultiQT); `results_doc` writes docs/results.md from the committed result JSON, its
sections declared as data in `results_sections` and drawn by `results_tables`."""
