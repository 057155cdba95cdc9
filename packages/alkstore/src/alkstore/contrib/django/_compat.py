"""The Tasks framework: ``django.tasks`` when Django has it (6.0 and later),
else the ``django-tasks`` package, which has the same API."""

from __future__ import annotations

try:  # Django 6 and later
    from django.tasks import TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError, TaskResult
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    try:
        from django.tasks.exceptions import InvalidTask as InvalidTaskError
    except ImportError:  # pragma: no cover - the name some pre-releases used
        from django.tasks.exceptions import InvalidTaskError
except ImportError:  # the backport package, before Django 6
    from django_tasks import TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskContext, TaskError, TaskResult
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

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
