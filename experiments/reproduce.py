r"""The main job: corpora, MultiQT cross-validation, CS-KWS, and a report to open.

    python -m experiments.reproduce --config=experiments/configs/reproduce.py:quick \
        --workdir=outputs/reproduce

Stages (each timed and reported): build any missing corpus (experiments.build_data),
experiments.multiqt once per task of `config.multiqt_tasks` (questions in
WORKDIR/multiqt, symptoms in WORKDIR/multiqt-symptoms; `experiments.report.layout`),
experiments.cskws, then `WORKDIR/report.md` (`experiments.report.reproduce_md`) with the
tables beside the papers' figures, the stages' seconds and compiled programs (also in
WORKDIR/compilation.json, `speechkit.compilation.Counter`), each task's in-engine vs
held-out-engine scores (models scored on a synthesiser never heard in training, with
the transfer ratio), the KWS operating points (per-keyword thresholds for false-alarm
budgets: a DET table and figure), the studies' verdicts where `make studies` has run
(`config.studies_dir`), and
PNG figures in `WORKDIR/figures/`; training curves are in `WORKDIR/*/*/tensorboard`
(`tensorboard --logdir WORKDIR`). Rerunning resumes: finished stages are read back,
interrupted training continues from its checkpoints.
"""

from __future__ import annotations

import contextlib
import os
import time

from experiments import build_data, common, cskws, multiqt
from experiments.report.layout import multiqt_folder, multiqt_tasks, task_config
from experiments.report.reproduce_md import write_report
from speechkit import compilation, files, tts

log = common.logger("reproduce")


def run(config, workdir: str) -> str:
    """Every stage of the main job into `workdir` (see the module docstring); returns the
    report's path."""
    os.makedirs(workdir, exist_ok=True)
    data_dir = os.path.expanduser(config.data_dir or "~/tensorflow_datasets")
    seconds, compiled = {}, {}

    count = len(multiqt_tasks(config)) + 3  # corpora, MultiQT per task, CS-KWS, report
    started = job_started = time.perf_counter()
    log(f"stage 1/{count}: corpora ({config.size}, engine set {config.engine_set}) in {data_dir}")
    build = build_data.build(config.size, data_dir, engine_set=config.engine_set)
    seconds["corpora"] = time.perf_counter() - started

    config.multiqt.size, config.multiqt.engine_set = config.size, config.engine_set
    for sub in (config.multiqt, config.cskws):
        sub.data_dir, sub.build_missing = data_dir, False
    config.cskws.dataset = f"synthetic_kws/{tts.corpus_config_name(config.size, config.engine_set)}"
    multiqt_stages = [
        (multiqt_folder(task), task_config(config, task)) for task in multiqt_tasks(config)
    ]
    kws_stage = count - 1
    # The report says whether it ran beside (its RTF then shares the cores with MultiQT).
    config.kws_beside_multiqt = beside = config.kws_beside_multiqt and (os.cpu_count() or 1) > 1
    with contextlib.ExitStack() as stack:
        if beside:
            log(f"stage {kws_stage}/{count}: cskws, in a second process beside MultiQT")
            kws = stack.enter_context(
                common.Beside("experiments.cskws", config.cskws, os.path.join(workdir, "cskws"))
            )
        for stage, (name, sub) in enumerate(multiqt_stages, start=2):
            seconds[name], compiled[name] = _stage(stage, count, name, multiqt, sub, workdir)
        if beside:
            _, seconds["cskws"], compiled["cskws"] = kws.result()
        else:
            seconds["cskws"], compiled["cskws"] = _stage(
                kws_stage, count, "cskws", cskws, config.cskws, workdir
            )
    files.write_json(os.path.join(workdir, "compilation.json"), compiled)

    started = time.perf_counter()
    log(f"stage {count}/{count}: report")
    path = write_report(config, workdir, build, seconds, compiled)
    seconds["report"] = time.perf_counter() - started
    seconds["total"] = time.perf_counter() - job_started
    log(
        "done: "
        + ", ".join(f"{stage} {value:.0f} s" for stage, value in seconds.items())
        + f"; open {path}"
    )
    return path


def _stage(stage: int, count: int, name: str, module, config, workdir: str) -> tuple[float, dict]:
    """Runs one experiment stage here: (its seconds, what it compiled)."""
    started = time.perf_counter()
    log(f"stage {stage}/{count}: {name}")
    with compilation.Counter() as counted:
        module.train_and_evaluate(config, os.path.join(workdir, name))
    log(f"{name}: {counted.summary()}")
    return time.perf_counter() - started, counted.record()


if __name__ == "__main__":
    common.main(run)
