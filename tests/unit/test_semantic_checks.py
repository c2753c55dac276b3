"""`uwf workflow put` checks what a workflow means, as united-workforce does at
registration (issue 34): a role no thread reaches (refused when wired into the graph,
warned when in no edge at all), a multi-exit role whose statuses are not all routed
or cannot be checked, `oneOf` branches that do not say their status where an edge
prompt needs them to, and a prompt that reads a field the branch its status selects
does not have; every problem of a file in one report. Each check has a workflow that
trips it and one that does not (docs/workflows.md#what-the-graph-means)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.conftest import Cli, snapshot
from tests.threadkit import one_line_error
from tests.unit.test_put_checks import put, review


def problems(cli: Cli, tmp_path: Path, document: dict[str, Any]) -> list[str]:
    """The problems of a refused put, in order (one line, exit 1, nothing written)."""
    before = snapshot(cli.home)
    line = one_line_error(put(cli, tmp_path, document), 1, "fix them and run `uwf "
                          "workflow put` again")
    assert snapshot(cli.home) == before
    body = line.split(" problems: " if " problems: " in line else " problem: ", 1)[1]
    return body.rsplit("; fix them", 1)[0].split("; ")


def warnings(cli: Cli, tmp_path: Path, document: dict[str, Any]) -> list[str]:
    """The warnings of an accepted put: registered, each on stderr and in the JSON."""
    result = put(cli, tmp_path, document)
    assert result.code == 0, result
    found: list[str] = json.loads(result.out).get("warnings", [])
    assert result.err.splitlines() == [f"warning: {warning}" for warning in found]
    return found


# -- who reaches whom ------------------------------------------------------------------

def test_a_role_no_edge_leads_to_is_refused(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["graph"]["reviewer"] = {"approved": "$END", "rejected": "$END"}
    assert problems(cli, tmp_path, document) == [
        "graph.fixer: unreachable: no edge from another role or $START leads to it, so "
        "no thread runs it (lead one to it, or remove it)"]
    assert warnings(cli, tmp_path, review()) == []  # the edge to fixer restored


def test_a_role_only_unreached_roles_lead_to_is_refused(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["roles"]["linter"] = {}
    document["graph"]["reviewer"]["approved"] = "$END"
    document["graph"]["reviewer"]["rejected"] = "$END"
    document["graph"]["fixer"] = {"_": "linter"}
    document["graph"]["linter"] = {"_": "fixer"}  # a loop nothing enters
    assert problems(cli, tmp_path, document) == [
        "graph.fixer: unreachable from $START: the edges leading to it leave linter, "
        "which no thread reaches",
        "graph.linter: unreachable from $START: the edges leading to it leave fixer, "
        "which no thread reaches"]
    document["graph"]["reviewer"]["rejected"] = "linter"  # the loop entered
    assert warnings(cli, tmp_path, document) == []


def test_a_role_only_its_own_edge_leads_to_is_refused(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["graph"]["reviewer"]["rejected"] = "$END"
    document["graph"]["fixer"] = {"_": "fixer"}
    assert problems(cli, tmp_path, document)[0].startswith(
        "graph.fixer: unreachable: no edge from another role or $START leads to it")


def test_a_role_in_no_edge_is_a_warning(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["roles"]["draft"] = {"goal": "Not wired yet."}
    assert warnings(cli, tmp_path, document) == [
        "roles.draft: in no edge of the graph: no thread runs it (a draft?); lead an "
        "edge to it, or remove it"]


def test_list_form_entries_are_edges_too(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["conditions"] = {"stuck": {"expression": "$count(steps) > 5"}}
    document["graph"]["reviewer"] = [{"role": "$END", "condition": "stuck"},
                                     {"role": "fixer", "condition": None}]
    assert warnings(cli, tmp_path, document) == []
    document["graph"]["reviewer"][1]["role"] = "$END"
    assert problems(cli, tmp_path, document)[0].startswith("graph.fixer: unreachable")


def test_reach_is_not_judged_on_a_graph_refused_for_its_shape(cli: Cli,
                                                              tmp_path: Path) -> None:
    """An edge refused for its shape is one mistake, not also its target's reach."""
    document = review()
    document["graph"]["reviewer"]["rejected"] = ["not", "a", "target"]
    assert [problem.split(":", 1)[0] for problem in problems(cli, tmp_path, document)] == [
        "graph.reviewer.rejected"]


# -- statuses a multi-exit role reports ----------------------------------------------

def test_a_listed_status_with_no_edge_is_a_warning(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["roles"]["reviewer"]["meta"]["properties"]["status"]["enum"].append("unsure")
    assert warnings(cli, tmp_path, document) == [
        "graph.reviewer: status 'unsure' (allowed by roles.reviewer.meta) has no edge: a "
        "thread whose reviewer reports it will block"]


def test_statuses_a_schema_does_not_list_are_a_warning(cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["roles"]["reviewer"]["meta"]["properties"]["status"] = {"type": "string"}
    assert warnings(cli, tmp_path, document) == [
        "graph.reviewer: routes the statuses approved, rejected, but roles.reviewer.meta "
        "does not list the status values, so whether each one it reports has an edge is "
        "not checked; list them (`status: {enum: [...]}`, or `oneOf` branches with "
        "`status: {const: ...}`)"]
    # One status edge: nothing to route apart, nothing said.
    document["graph"]["reviewer"] = {"done": "fixer"}
    assert warnings(cli, tmp_path, document) == []


# -- a status's own branch -------------------------------------------------------------

APPROVED: dict[str, Any] = {
    "type": "object", "required": ["status", "summary"], "additionalProperties": False,
    "properties": {"status": {"const": "approved"}, "summary": {"type": "string"}}}
REJECTED: dict[str, Any] = {
    "type": "object", "required": ["status", "reason"], "additionalProperties": False,
    "properties": {"status": {"const": "rejected"}, "reason": {"type": "string"}}}


def branched(approved: dict[str, Any], rejected: dict[str, Any], prompt: str
             ) -> dict[str, Any]:
    document = review()
    document["roles"]["reviewer"]["meta"] = {"type": "object", "oneOf": [approved, rejected]}
    document["graph"]["reviewer"]["rejected"]["prompt"] = prompt
    return document


def test_a_prompt_is_checked_against_the_branch_its_status_selects(
        cli: Cli, tmp_path: Path) -> None:
    document = branched(APPROVED, REJECTED, "Fix: {{reason}} (was {{summary}})")
    assert problems(cli, tmp_path, document) == [
        "graph.reviewer.rejected.prompt: {{summary}} is not a field of roles.reviewer.meta "
        "for status 'rejected', which allows no others (available: {{prompt}}, {{reason}}, "
        "{{status}})"]
    assert warnings(cli, tmp_path, branched(APPROVED, REJECTED, "Fix: {{reason}}")) == []


def test_on_an_open_branch_an_undeclared_name_is_a_warning(cli: Cli, tmp_path: Path) -> None:
    open_rejected = {key: value for key, value in REJECTED.items()
                     if key != "additionalProperties"}
    document = branched(APPROVED, open_rejected, "Fix: {{reason}} (was {{summary}})")
    assert warnings(cli, tmp_path, document) == [
        "graph.reviewer.rejected.prompt: {{summary}} is not a property of "
        "roles.reviewer.meta for status 'rejected': it renders empty unless the output "
        "has it"]


def test_branches_beside_an_enum_status_are_a_warning(cli: Cli, tmp_path: Path) -> None:
    """`enum` where `oneOf` + `const` is needed: the status is listed beside the
    branches, so no edge's prompt can be checked against its own branch."""
    approved, rejected = copy.deepcopy(APPROVED), copy.deepcopy(REJECTED)
    del approved["properties"]["status"], rejected["properties"]["status"]
    approved["additionalProperties"] = rejected["additionalProperties"] = True
    document = branched(approved, rejected, "Fix: {{reason}}")
    document["roles"]["reviewer"]["meta"]["properties"] = {
        "status": {"enum": ["approved", "rejected"]}}
    document["roles"]["reviewer"]["meta"]["required"] = ["status"]
    assert warnings(cli, tmp_path, document) == [
        "roles.reviewer.meta: its oneOf/anyOf branches do not each give `status` a const "
        "(or enum) of their own, so an edge's prompt is checked against every branch, not "
        "the one its status selects; give each branch `properties: {status: {const: ...}}`"]
    # Each branch with its own const: the same workflow, checked per status, is clean.
    assert warnings(cli, tmp_path, branched(APPROVED, REJECTED, "Fix: {{reason}}")) == []


# -- every problem at once -------------------------------------------------------------

def test_several_problems_are_reported_together(cli: Cli, tmp_path: Path) -> None:
    document = branched(APPROVED, REJECTED, "Fix: {{summary}}")
    document["roles"]["linter"] = {}
    document["graph"]["linter"] = {"_": "fixer"}  # wired, but nothing leads to it
    document["roles"]["fixer"]["goal"] = ["not", "text"]
    found = problems(cli, tmp_path, document)
    assert [problem.split(": ", 1)[0] for problem in found] == [
        "roles.fixer.goal", "graph.reviewer.rejected.prompt", "graph.linter"]
    assert found[0] == "roles.fixer.goal: must be a string"
    assert "{{summary}} is not a field of roles.reviewer.meta for status 'rejected'" in found[1]
    assert found[2].startswith("graph.linter: unreachable")
