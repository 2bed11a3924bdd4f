"""The scoring API, one module per task: a trained model (a predict / detect function or
a bundle) on a split -> scores and curves. The runners, `experiments.evaluate` and the
studies all score through it; the evaluators (`experiments.evaluators`) are its core.

- `experiments.scoring.calls`: MultiQT label streams (TIMESTEP / INSTANCE, raw and
  smoothed, summaries over folds).
- `experiments.scoring.keywords`: keyword detections (AP, mAP, FRR, bootstrap intervals,
  DET curves and operating points, the streaming detector's latency).
"""
