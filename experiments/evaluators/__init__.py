"""Evaluators: each takes a prediction function and batches and returns scores (and
curves), the same for the runners, the report and the studies.

- `experiments.evaluators.tracking`: MultiQT label streams -> TIMESTEP / INSTANCE scores.
- `experiments.evaluators.detection`: keyword detections -> AP, mAP, FRR and curves.
"""
