"""Evaluators: the core of `experiments.scoring`, under the runners, the report and the
studies, most of it reached through `experiments.scoring.calls` and
`experiments.scoring.keywords`.

- `experiments.scoring.evaluators.tracking`: a MultiQT label predictor and batches ->
  TIMESTEP / INSTANCE scores, latency, early frames and bootstrap intervals
  (`experiments.scoring.calls`, `experiments.ship`, `experiments.studies`,
  `experiments.report.models`).
- `experiments.scoring.evaluators.detection`: a keyword detector and batches -> AP, mAP,
  FRR, curves and bootstrap intervals (`experiments.scoring.keywords`).
- `experiments.scoring.evaluators.transcription`: timed hypothesis and reference words ->
  CER, WER and emission lag (`experiments.multiqt`, `experiments.recogniser`).
"""
