"""`uwf workflow put` reports every problem of a workflow at once, each with its YAML
path down into a role's schema (issue 17); reads a `status` listed by `oneOf` /
`anyOf` branches as it reads an `enum`; and checks an edge prompt's Mustache names
against every branch of the previous role's output schema: a name no branch may
have is an error when the schema is closed, a warning when it is open."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE, Cli, Result, snapshot
from tests.threadkit import one_line_error
from tests.unit.test_put_checks import put, review


def refused(cli: Cli, tmp_path: Path, document: dict[str, Any], count: int) -> list[str]:
    """The problems of a refused put, in order: one line on stderr, exit 1, `count`
    problems, nothing written."""
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    before = snapshot(cli.home)
    line = one_line_error(put(cli, tmp_path, document), 1,
                          f"workflow has {count} problem{'s' if count > 1 else ''}: ",
                          "; fix them and run `uwf workflow put` again")
    assert snapshot(cli.home) == before
    body = line.split(" problems: " if count > 1 else " problem: ", 1)[1]
    problems = body.rsplit("; fix them", 1)[0].split("; ")
    assert len(problems) == count, problems
    return problems


def accepted(cli: Cli, tmp_path: Path, document: dict[str, Any]) -> list[str]:
    """The warnings of an accepted put: each one line on stderr and in the result."""
    result = put(cli, tmp_path, document)
    assert result.code == 0, result
    warnings: list[str] = json.loads(result.out).get("warnings", [])
    assert result.err.splitlines() == [f"warning: {warning}" for warning in warnings]
    return warnings


# -- 1. every problem at once, each with its path ---------------------------------------

def test_every_problem_of_a_schema_is_reported_at_its_own_path(cli: Cli,
                                                                tmp_path: Path) -> None:
    document = review()
    document["roles"]["reviewer"]["meta"] = {
        "type": "object", "pattern": "x", "required": "status",
        "properties": {"status": {"type": "strin", "enum": []}, "comments": 5}}
    problems = refused(cli, tmp_path, document, 5)
    assert [problem.split(": ", 1)[0] for problem in problems] == [
        "roles.reviewer.meta", "roles.reviewer.meta.required",
        "roles.reviewer.meta.properties.comments", "roles.reviewer.meta.properties.status.type",
        "roles.reviewer.meta.properties.status.enum"]
    assert problems[0].startswith("roles.reviewer.meta: invalid JSON Schema: 'pattern' is "
                                  "not a keyword of json-cas's schema subset")
    assert problems[2] == ('roles.reviewer.meta.properties.comments: invalid JSON Schema: '
                           '5 is not of type "object"')  # once, not again as a schema
    assert problems[4] == ("roles.reviewer.meta.properties.status.enum: invalid JSON Schema: "
                           "an enum must list at least one value")


def test_problems_in_several_schemas_and_the_graph_all_show(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["roles"]["reviewer"]["meta"]["properties"]["status"] = {"oneOf": [{"konst": "a"}]}
    document["roles"]["fixer"]["meta"]["items"] = {"anyOf": []}
    document["graph"]["fixer"]["_"]["role"] = "ghost"
    problems = refused(cli, tmp_path, document, 3)
    assert [problem.split(": ", 1)[0] for problem in problems] == [
        "roles.reviewer.meta.properties.status.oneOf[0]",
        "roles.fixer.meta.items.anyOf", "graph.fixer._.role"]


def test_every_key_that_is_not_a_string_is_named(cli: Cli, tmp_path: Path) -> None:
    text = ("name: keys\nroles:\n  a:\n    meta:\n      properties:\n"
            "        1: {type: string}\n        nested: {properties: {2: {type: string}}}\n"
            "      required: [status]\n  b:\n    meta: {properties: {true: {}}}\n"
            "graph:\n  $START: {_: a}\n  a: {_: b}\n  b: {_: $END}\n")
    path = tmp_path / "keys.yaml"
    path.write_text(text, "utf-8")
    line = one_line_error(cli.run("workflow", "put", str(path)), 1, "workflow has 3 problems")
    assert re.findall(r"(?:problems: |; )([\w.$\[\]]+): ", line) == [
        "roles.a.meta.properties", "roles.a.meta.properties.nested.properties",
        "roles.b.meta.properties"]
    assert "key 1 is not a string: quote it" in line
    assert "key True is not a string" in line
    assert cli.log_bytes() == b""


def test_a_refused_role_is_not_reported_again_at_each_edge_naming_it(
        cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["roles"]["fixer"] = ["not", "a", "mapping"]
    assert refused(cli, tmp_path, document, 1) == ["roles.fixer: must be a mapping"]


# -- 2. a status listed by oneOf / anyOf branches is an enum ----------------------------

def with_status(status: dict[str, Any], edges: dict[str, Any]) -> dict[str, Any]:
    """review() with the reviewer's status schema and edges replaced."""
    document = review()
    document["roles"]["reviewer"]["meta"]["properties"]["status"] = status
    document["graph"]["reviewer"] = edges
    return document


CONSTS = {"oneOf": [{"const": "approved"}, {"const": "rejected"}]}
EDGES = {"approved": "$END", "rejected": {"role": "fixer", "prompt": "Fix: {{comments}}"}}


@pytest.mark.parametrize("keyword", ["oneOf", "anyOf"])
def test_a_status_not_among_the_branches_is_an_error(cli: Cli, tmp_path: Path,
                                                     keyword: str) -> None:
    status = {keyword: CONSTS["oneOf"]}
    document = with_status(status, {**EDGES, "lgtm": "$END"})
    assert refused(cli, tmp_path, document, 1) == [
        "graph.reviewer.lgtm: status 'lgtm' is not one that roles.reviewer.meta allows "
        "(approved, rejected)"]


def test_a_branch_with_no_edge_is_a_warning(cli: Cli, tmp_path: Path) -> None:
    status = {"oneOf": [*CONSTS["oneOf"], {"enum": ["unsure", "later"]}]}
    assert accepted(cli, tmp_path, with_status(status, EDGES)) == [
        f"graph.reviewer: status {value!r} (allowed by roles.reviewer.meta) has no edge: a "
        "thread whose reviewer reports it will block" for value in ("unsure", "later")]


def test_under_a_required_branch_status_the_fallback_is_never_taken(
        cli: Cli, tmp_path: Path) -> None:
    document = with_status(CONSTS, {**EDGES, "_": "fixer"})
    assert refused(cli, tmp_path, document, 1) == [
        "graph.reviewer._: never taken: roles.reviewer.meta requires a string status "
        "(approved, rejected), so it is never `_`"]


def test_branches_that_cover_every_status_are_clean(cli: Cli, tmp_path: Path) -> None:
    nested = {"anyOf": [{"const": "approved"}, {"oneOf": [{"enum": ["rejected"]}]}]}
    assert accepted(cli, tmp_path, with_status(nested, EDGES)) == []


def test_a_branch_that_lists_no_values_leaves_the_status_open(cli: Cli,
                                                              tmp_path: Path) -> None:
    status = {"oneOf": [{"const": "approved"}, {"type": "string"}]}
    # No status is refused; that the routing cannot be checked is said (issue 34).
    assert accepted(cli, tmp_path, with_status(status, {**EDGES, "lgtm": "$END"})) == [
        "graph.reviewer: routes the statuses approved, rejected, lgtm, but "
        "roles.reviewer.meta does not list the status values, so whether each one it "
        "reports has an edge is not checked; list them (`status: {enum: [...]}`, or "
        "`oneOf` branches with `status: {const: ...}`)"]


def union(*branches: dict[str, Any]) -> dict[str, Any]:
    """A reviewer whose output is one of `branches` (a discriminated union)."""
    return {"type": "object", "oneOf": list(branches)}


APPROVED: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["status"],
    "properties": {"status": {"const": "approved"}, "note": {"type": "string"}}}
REJECTED: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["status", "comments"],
    "properties": {"status": {"const": "rejected"}, "comments": {"type": "string"}}}


def test_a_union_of_output_schemas_lists_the_status_of_each(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["roles"]["reviewer"]["meta"] = union(APPROVED, REJECTED)
    document["graph"]["reviewer"] = {"approved": "$END", "lgtm": "$END", "_": "fixer"}
    assert refused(cli, tmp_path, document, 2) == [
        "graph.reviewer.lgtm: status 'lgtm' is not one that roles.reviewer.meta allows "
        "(approved, rejected)",
        "graph.reviewer._: never taken: roles.reviewer.meta requires a string status "
        "(approved, rejected), so it is never `_`"]
    document["graph"]["reviewer"] = {"approved": "fixer"}  # fixer still reached
    assert accepted(cli, tmp_path, document) == [
        "graph.reviewer: status 'rejected' (allowed by roles.reviewer.meta) has no edge: a "
        "thread whose reviewer reports it will block"]


# -- 3. Mustache names against every schema of the previous role ------------------------

def fixing(meta: dict[str, Any], prompt: str) -> dict[str, Any]:
    """review() with the reviewer's schema `meta` and the prompt of its edge to fixer."""
    document = review()
    document["roles"]["reviewer"]["meta"] = meta
    document["graph"]["reviewer"] = {
        "approved": "$END", "rejected": {"role": "fixer", "prompt": prompt}}
    return document


def test_a_name_no_closed_branch_defines_is_an_error(cli: Cli, tmp_path: Path) -> None:
    # The edge of `rejected` is checked against the branch that status selects (issue
    # 34): `note`, a field of the approved branch only, is not available on it.
    document = fixing(union(APPROVED, REJECTED), "Fix: {{remarks}} {{note}} ({{prompt}})")
    assert refused(cli, tmp_path, document, 2) == [
        f"graph.reviewer.rejected.prompt: {{{{{name}}}}} is not a field of roles.reviewer.meta "
        "for status 'rejected', which allows no others (available: {{comments}}, "
        "{{prompt}}, {{status}})" for name in ("note", "remarks")]


def test_a_name_some_branch_defines_is_accepted(cli: Cli, tmp_path: Path) -> None:
    # A branch that does not say its status may be the one `rejected` selects.
    open_status = copy.deepcopy(APPROVED)
    del open_status["properties"]["status"]
    document = fixing(union(open_status, REJECTED), "Fix: {{comments}} {{note}}")
    assert accepted(cli, tmp_path, document) == [
        "roles.reviewer.meta: its oneOf/anyOf branches do not each give `status` a const "
        "(or enum) of their own, so an edge's prompt is checked against every branch, not "
        "the one its status selects; give each branch `properties: {status: {const: ...}}`"]


def test_a_name_required_by_every_branch_may_stand_alone(cli: Cli, tmp_path: Path) -> None:
    both = [copy.deepcopy(APPROVED), copy.deepcopy(REJECTED)]
    both[0]["properties"]["comments"] = {"type": "string"}
    both[0]["required"].append("comments")
    assert accepted(cli, tmp_path, fixing(union(*both), "{{comments}}")) == []


def test_a_name_no_open_branch_defines_is_a_warning(cli: Cli, tmp_path: Path) -> None:
    branches = [{key: value for key, value in branch.items() if key != "additionalProperties"}
                for branch in (APPROVED, REJECTED)]
    document = fixing(union(*branches), "Fix: {{comments}} {{remarks}}")
    assert accepted(cli, tmp_path, document) == [
        "graph.reviewer.rejected.prompt: {{remarks}} is not a property of "
        "roles.reviewer.meta for status 'rejected': it renders empty unless the output has it"]


@pytest.mark.parametrize("meta", [
    {"type": "object", "additionalProperties": False, "properties": {"status": {}}},
    union(APPROVED, REJECTED),
    {"type": "object"},
], ids=["closed", "closed branches", "no properties"])
def test_the_users_prompt_is_never_flagged(cli: Cli, tmp_path: Path,
                                           meta: dict[str, Any]) -> None:
    document = fixing(meta, "{{prompt}} {{#prompt}}again{{/prompt}} {{prompt.length}}")
    document["graph"]["$START"]["_"]["prompt"] = "{{prompt}}"
    result: Result = put(cli, tmp_path, document)
    assert result.code == 0, result
    assert "prompt" not in result.err, result  # (a status list may be asked for)
