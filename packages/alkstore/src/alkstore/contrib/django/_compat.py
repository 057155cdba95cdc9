"""The Tasks framework: ``django.tasks`` when Django has it (6.0 and later),
else the ``django-tasks`` package, which has the same API. When Django has
it, it is the only one used, even with the package installed too: tasks
and backends must come from one framework."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Typed as Any: the two frameworks' classes are alike but not the same types.
if TYPE_CHECKING:
    BaseTaskBackend: Any
    InvalidTaskError: Any
    Task: Any
    TaskContext: Any
    TaskError: Any
    TaskResult: Any
    TaskResultDoesNotExist: Any
    TaskResultStatus: Any
    normalize_json: Any
    task_backends: Any
    task_enqueued: Any
    task_finished: Any
    task_started: Any
else:
    try:  # Django 6 and later
        from django.tasks import TaskResultStatus, task_backends
    except ImportError:  # the backport package, before Django 6
        from django_tasks import TaskResultStatus, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskContext, TaskError, TaskResult
        from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
        from django_tasks.utils import normalize_json
    else:
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskContext, TaskError, TaskResult
        from django.tasks.exceptions import InvalidTask as InvalidTaskError
        from django.tasks.exceptions import TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json


__all__ = [
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
