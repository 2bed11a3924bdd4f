"""Experiment scripts: configs, cross-validation runner, reports and the main job."""
