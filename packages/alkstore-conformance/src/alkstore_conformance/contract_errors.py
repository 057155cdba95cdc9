"""The error hierarchy and the wrapping of driver errors (E-1, E-2)."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

import alkstore
from alkstore import (
    AlkstoreError,
    EngineError,
    InvalidSpec,
    QueueFull,
    ReservedName,
    SchemaVersionError,
    Store,
    TransientError,
)

from ._base import ContractBase

#: SPEC §2's error tree under ``AlkstoreError``: each error, the class it
#: derives from, and whether that class is its only base.
_SPEC_TREE: dict[str, tuple[str, bool]] = {
    "InvalidArgument": ("AlkstoreError", False),  # a ValueError too
    "ReservedName": ("InvalidArgument", False),
    "InvalidSpec": ("InvalidArgument", False),
    "QueueFull": ("AlkstoreError", True),
    "StoreClosed": ("AlkstoreError", True),
    "UnsupportedOperation": ("AlkstoreError", True),
    "SchemaVersionError": ("AlkstoreError", True),
    "EngineError": ("AlkstoreError", True),
    "TransientError": ("EngineError", True),
}


class ErrorContract(ContractBase):
    """E-1, E-2 and the shape of SPEC §2."""

    @pytest.mark.clause("E-1")
    def test_hierarchy_is_the_one_of_the_spec(self) -> None:
        errors = alkstore.errors
        assert set(errors.__all__) == {"AlkstoreError", *_SPEC_TREE}
        for name, (parent, only_base) in _SPEC_TREE.items():
            cls, base = getattr(errors, name), getattr(errors, parent)
            if only_base:
                assert cls.__bases__ == (base,), name
            else:
                assert issubclass(cls, base), name
        assert issubclass(errors.InvalidArgument, ValueError)

    @pytest.mark.clause("E-1")
    def test_errors_pickle_with_their_attributes(self) -> None:
        spec = pickle.loads(pickle.dumps(InvalidSpec("@never")))
        assert isinstance(spec, InvalidSpec) and spec.spec == "@never"
        reserved = pickle.loads(pickle.dumps(ReservedName("__alkstore.x")))
        assert isinstance(reserved, ReservedName) and reserved.name == "__alkstore.x"
        version = pickle.loads(pickle.dumps(SchemaVersionError(9, 1)))
        assert (version.found, version.supported) == (9, 1)
        full = pickle.loads(pickle.dumps(QueueFull("emails", 10)))
        assert isinstance(full, QueueFull) and (full.queue, full.max_depth) == ("emails", 10)
        transient = pickle.loads(pickle.dumps(TransientError("busy")))
        assert isinstance(transient, EngineError) and str(transient) == "busy"

    @pytest.mark.clause("E-1", "T-2")
    def test_driver_errors_in_caller_sql_are_wrapped(self, store: Store) -> None:
        with pytest.raises(EngineError) as info, store.transaction() as tx:
            tx.execute("THIS IS NOT SQL")
        exc = info.value
        assert exc.__cause__ is not None
        assert not isinstance(exc.__cause__, AlkstoreError)
        # The store is still usable afterwards.
        with store.transaction() as tx:
            tx.execute("SELECT 1")

    @pytest.mark.clause("E-2")
    def test_busy_or_dropped_connection_is_transient(
        self, transient_failure: Callable[[], object]
    ) -> None:
        with pytest.raises(TransientError) as info:
            transient_failure()
        assert isinstance(info.value, EngineError)
        assert info.value.__cause__ is not None
        assert not isinstance(info.value.__cause__, AlkstoreError)
