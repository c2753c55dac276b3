"""What `pgjson.Splice` (uwf/queue/pgjson.py) refuses to generate: a field it could not
find by its bytes alone; when `renamed_first` reuses a record's JSON. Their SQL against
msgspec's bytes: tests/contract/test_pgcalls.py."""

from __future__ import annotations

import msgspec
import pytest

from uwf.queue.pgjson import Splice, json_text, renamed_first


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


class Named(msgspec.Struct, rename="camel"):
    lease_id: str
    attempt: int


class Renamed(msgspec.Struct, rename="camel"):
    id: str
    attempt: int


class Other(msgspec.Struct, rename="camel"):
    id: str
    tries: int


def test_a_record_differing_only_in_its_first_name_is_the_others_json_renamed() -> None:
    values = {"attempt": "a"}
    made = json_text(Named, {"lease_id": "x", **values})
    assert renamed_first(made, json_text(Renamed, {"id": "x", **values}), "d") == (
        """('{"id":' || substr(d, 12))""")  # after the 11 characters of {"leaseId":
    other = json_text(Other, {"id": "x", "tries": "a"})
    assert renamed_first(made, other, "d") == other
    assert renamed_first(made, json_text(Renamed, {"id": "y", "attempt": "a"}), "d") != (
        """('{"id":' || substr(d, 12))""")  # another value: written anew
