"""A small Django project for the FW-1 tests: a view enqueues a task inside
``transaction.atomic()``, and ``manage.py alkstore_worker`` runs it."""
