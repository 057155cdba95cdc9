"""What the handles on a named primitive share (SPEC §5, §7, Q-20): a queue,
a stream or an outbox handle is its name, made without I/O."""

from __future__ import annotations

__all__ = ["NamedHandle"]


class NamedHandle:
    """A handle on the queue, stream or outbox called :attr:`name`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r})"

    @property
    def name(self) -> str:
        """The name of the queue, stream or outbox this handle is on."""
        return self._name
