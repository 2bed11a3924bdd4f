"""Scoring, one package: a trained model (a predict / detect function or a bundle) on a
split -> scores and curves. The runners, the studies, `experiments.ship`,
`experiments.measure_points` and `experiments.evaluate` all score through it; it imports
no runner.

- `experiments.scoring.calls`, `experiments.scoring.keywords`: the API per task (MultiQT
  label streams raw and smoothed, summaries over folds; keyword AP, mAP, FRR, intervals,
  DET curves, operating points, streaming latency); `experiments.scoring.latency`.
- `experiments.scoring.evaluators`: their core (tracking, detection, transcription).
- `experiments.scoring.evals`: the evaluations a runner's `config.evals` declares.
- `experiments.scoring.bundles`: a saved bundle on a corpus (what stj-evaluate runs), with
  `experiments.scoring.corpora`, `experiments.scoring.bundle_keywords` and
  `experiments.scoring.bundle_calls`.
- `experiments.scoring.text_inputs`: the CTC recogniser's text that MultiQT models read.
"""
