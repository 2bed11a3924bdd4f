"""Where the main job (`experiments.reproduce`) runs MultiQT: the tasks of
`config.multiqt_tasks`, each task's sub-workdir and config. The job runs them there and
its report reads them back from there."""

from __future__ import annotations

import copy

from multiqt_jax import labels


def multiqt_tasks(config) -> list[str]:
    """config.multiqt_tasks: comma-separated MultiQT tasks, questions first if run."""
    tasks = [t.strip() for t in config.multiqt_tasks.split(",") if t.strip()]
    known = list(labels.TASKS)
    if not tasks or set(tasks) - set(known) or len(set(tasks)) < len(tasks):
        raise ValueError(
            f"config.multiqt_tasks: expected distinct tasks of {tuple(known)}, "
            f"got {config.multiqt_tasks!r}"
        )
    return sorted(tasks, key=known.index)


def multiqt_folder(task: str) -> str:
    """A task's MultiQT sub-workdir: "multiqt" (questions), "multiqt-<task>" otherwise."""
    return "multiqt" if task == "questions" else f"multiqt-{task}"


def task_config(config, task: str):
    """A copy of the main job's `config.multiqt` set to run `task`."""
    sub = copy.deepcopy(config.multiqt)
    sub.task = task
    return sub
