"""What `pgjson.Splice` (uwf/queue/pgjson.py) refuses to generate: a field it could not
find by its bytes alone. Its SQL against msgspec's bytes: tests/contract/test_pgcalls.py."""

from __future__ import annotations

import msgspec
import pytest

from uwf.queue.pgjson import Splice


class Inner(msgspec.Struct):
    status: str


class Outer(msgspec.Struct):
    id: str
    inner: Inner | None
    status: str
    after: int = 0


class Sparse(msgspec.Struct, omit_defaults=True):
    id: str
    status: str = ""


def test_a_field_a_nested_record_before_it_may_hold_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Outer\.inner may hold a field named 'status'"):
        Splice(Outer, "raw", "at", changed=("status",), read=())
    Splice(Outer, "raw", "at", changed=("after",), read=())  # no record holds an `after`


def test_the_first_field_and_a_struct_leaving_fields_out_are_refused() -> None:
    with pytest.raises(TypeError, match="first field"):
        Splice(Outer, "raw", "at", changed=("id",), read=())
    with pytest.raises(TypeError, match="leaves fields out"):
        Splice(Sparse, "raw", "at", changed=("status",), read=())
