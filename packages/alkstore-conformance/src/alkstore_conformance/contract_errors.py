"""The error hierarchy and the wrapping of driver errors (E-1, E-2)."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

import alkstore
from alkstore import (
    AlkstoreError,
    EngineError,
    InvalidArgument,
    InvalidSpec,
    QueueFull,
    ReservedName,
    SchemaVersionError,
    Store,
    StoreClosed,
    TransientError,
    UnsupportedOperation,
)

from ._base import ContractBase


class ErrorContract(ContractBase):
    """E-1, E-2 and the shape of SPEC §2."""

    @pytest.mark.clause("E-1")
    def test_hierarchy_is_the_one_of_the_spec(self) -> None:
        assert issubclass(InvalidArgument, AlkstoreError) and issubclass(
            InvalidArgument, ValueError
        )
        assert issubclass(ReservedName, InvalidArgument)
        assert issubclass(InvalidSpec, InvalidArgument)
        for cls in (QueueFull, StoreClosed, UnsupportedOperation, SchemaVersionError, EngineError):
            assert cls.__bases__ == (AlkstoreError,)
        assert TransientError.__bases__ == (EngineError,)
        assert set(alkstore.errors.__all__) == {
            "AlkstoreError",
            "InvalidArgument",
            "ReservedName",
            "InvalidSpec",
            "QueueFull",
            "StoreClosed",
            "UnsupportedOperation",
            "SchemaVersionError",
            "EngineError",
            "TransientError",
        }

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
