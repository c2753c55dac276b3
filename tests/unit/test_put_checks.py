"""`uwf workflow put` catches workflow mistakes: conditions, list-form entries, statuses
against the role's enum, Mustache names against the role's output, and prompts that
would reach their agent empty. Errors refuse the file (exit 1, one line, each
problem with its YAML path, nothing written); warnings are printed on stderr, one
line each, and the workflow is registered."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLE, ROOT, Cli, Result, snapshot
from tests.threadkit import one_line_error

SEED = ROOT / "examples" / "seed-conditions.yaml"
DOCS = ROOT / "docs" / "workflows.md"

REVIEWER = {"type": "object", "additionalProperties": False, "required": ["status"],
            "properties": {"status": {"enum": ["approved", "rejected"]},
                           "comments": {"type": "string"}}}


def review(**changes: Any) -> dict[str, Any]:
    """A small status-map workflow: a closed reviewer schema, an open fixer one."""
    document: dict[str, Any] = {
        "name": "review",
        "roles": {
            "reviewer": {"meta": copy.deepcopy(REVIEWER)},
            "fixer": {"meta": {"type": "object", "required": ["files"],
                               "properties": {"files": {"type": "array"},
                                              "note": {"type": "string"}}}},
        },
        "graph": {
            "$START": {"_": {"role": "reviewer", "prompt": "Review: {{prompt}}"}},
            "reviewer": {"approved": "$END",
                         "rejected": {"role": "fixer", "prompt": "Fix: {{comments}}"}},
            "fixer": {"_": {"role": "reviewer", "prompt": "Changed {{files}}"}},
        },
    }
    document.update(changes)
    return document


def seed() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SEED.read_text("utf-8"))
    return loaded


def put(cli: Cli, tmp_path: Path, document: dict[str, Any] | str) -> Result:
    path = tmp_path / "wf.yaml"
    path.write_text(document if isinstance(document, str)
                    else yaml.safe_dump(document, sort_keys=False),
                    "utf-8")
    return cli.run("workflow", "put", str(path))


def with_graph(document: dict[str, Any], source: str, edges: Any) -> dict[str, Any]:
    document["graph"][source] = edges
    return document


def with_seed_entry(index: int, **fields: Any) -> dict[str, Any]:
    document = seed()
    document["graph"]["reviewer"][index].update(fields)
    return document


def seed_condition(**fields: Any) -> dict[str, Any]:
    document = seed()
    document["conditions"]["notApproved"] = fields
    return document


REFUSED: dict[str, tuple[Any, tuple[str, ...]]] = {
    "unknown condition": (
        with_seed_entry(0, condition="rejected"),
        ("graph.reviewer[0].condition: unknown condition 'rejected' "
         "(conditions: needsClarification, notApproved)",)),
    "bad JSONata": (
        seed_condition(expression="steps[-1].output.approved = "),
        ("conditions.notApproved.expression: does not parse as JSONata: Unexpected end of "
         "expression (S0207, at character 28)",)),
    "unknown field in a condition": (
        seed_condition(expression="true", when="always"),
        ("conditions.notApproved.when: unknown field (allowed: description, expression)",)),
    "a condition without an expression": (
        seed_condition(description="no expression"),
        ("conditions.notApproved.expression: required: a JSONata expression",)),
    "a bad condition name": (
        {**seed(), "conditions": {**seed()["conditions"], "_": {"expression": "true"}}},
        ("conditions._: '_' is not a valid condition name",)),
    "an entry without condition": (
        with_graph(seed(), "developer", [{"role": "reviewer"}]),
        ("graph.developer[0].condition: required: a condition's name, or null for the "
         "fallback",)),
    "an unknown field in an entry": (
        with_seed_entry(1, when="always"),
        ("graph.reviewer[1].when: unknown field (allowed: condition, prompt, role)",)),
    "an entry that is not a mapping": (
        with_graph(seed(), "developer", ["reviewer"]),
        ("graph.developer[0]: an entry is {role, condition, prompt}",)),
    "an empty list": (
        with_graph(seed(), "developer", []),
        ("graph.developer: must map each status to a target, or list",)),
    "a status not in the enum": (
        with_graph(review(), "reviewer", {"approved": "$END", "rejected": "fixer",
                                          "lgtm": "$END"}),
        ("graph.reviewer.lgtm: status 'lgtm' is not one that roles.reviewer.meta allows "
         "(approved, rejected)",)),
    "a status not the const": (
        with_graph(review(roles={"a": {"meta": {"properties": {"status": {"const": "done"}}}}},
                          graph={"$START": {"_": "a"}}), "a", {"finished": "$END"}),
        ("graph.a.finished: status 'finished' is not one that roles.a.meta allows (done)",)),
    "_ under a required string status": (
        with_graph(review(), "reviewer", {"approved": "$END", "rejected": "fixer",
                                          "_": "fixer"}),
        ("graph.reviewer._: never taken: roles.reviewer.meta requires a string status "
         "(approved, rejected), so it is never `_`",)),
    "an unknown name on a closed schema": (
        with_graph(review(), "reviewer", {"approved": "$END", "rejected": {
            "role": "fixer", "prompt": "Fix: {{commentz}}"}}),
        ("graph.reviewer.rejected.prompt: {{commentz}} is not a field of roles.reviewer.meta,"
         " which allows no others (available: {{comments}}, {{prompt}}, {{status}})",)),
    "an unknown name behind custom delimiters": (
        with_graph(review(), "reviewer", {"approved": "$END", "rejected": {
            "role": "fixer", "prompt": "{{=<% %>=}}Fix: <% commentz %>"}}),
        ("graph.reviewer.rejected.prompt: {{commentz}} is not a field",)),
    "an unknown name in a list entry": (
        with_seed_entry(0, prompt="Fix: {{remarks}}"),
        ("graph.reviewer[0].prompt: {{remarks}} is not a field of roles.reviewer.meta",)),
    "an output field after $START": (
        with_graph(review(), "$START", {"_": {"role": "reviewer", "prompt": "{{prompt}}: "
                                                                             "{{comments}}"}}),
        ("graph.$START._.prompt: {{comments}} is not available after $START: there is no "
         "output yet, only {{prompt}}",)),
    "a prompt that renders empty without an optional field": (
        with_graph(review(), "reviewer", {"approved": "$END", "rejected": {
            "role": "fixer", "prompt": "{{comments}}"}}),
        ("graph.reviewer.rejected.prompt: renders to nothing but whitespace when the output "
         "lacks {{comments}}, which roles.reviewer.meta does not require: put text around it,"
         " require it, or use \"\" for no edge prompt",)),
    "a prompt that is only a comment": (
        with_graph(review(), "reviewer", {"approved": "$END", "rejected": {
            "role": "fixer", "prompt": "{{! fix it }}"}}),
        ("graph.reviewer.rejected.prompt: renders to nothing but whitespace whatever the "
         "output holds",)),
    "a prompt of spaces": (
        with_graph(review(), "reviewer", {"approved": "$END", "rejected": {
            "role": "fixer", "prompt": "  "}}),
        ("graph.reviewer.rejected.prompt: is only whitespace",)),
}


@pytest.mark.parametrize(("document", "fragments"), REFUSED.values(), ids=list(REFUSED))
def test_mistakes_are_refused_with_their_path_and_nothing_is_written(
        cli: Cli, tmp_path: Path, document: dict[str, Any], fragments: tuple[str, ...]) -> None:
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    before = snapshot(cli.home)
    one_line_error(put(cli, tmp_path, document), 1, "workflow has 1 problem: ", *fragments,
                   "fix them and run `uwf workflow put` again")
    assert snapshot(cli.home) == before


def test_every_problem_is_reported_at_once(cli: Cli, tmp_path: Path) -> None:
    document = seed()
    document["conditions"]["notApproved"]["expression"] = "approved ="
    document["graph"]["reviewer"][0].update(condition="ghost", prompt="{{verdict}}")
    line = one_line_error(put(cli, tmp_path, document), 1, "workflow has 4 problems")
    paths = re.findall(r"(?:problems: |; )([\w.$\[\]]+): ", line)
    assert paths == ["conditions.notApproved.expression", "graph.reviewer[0].condition",
                     "graph.reviewer[0].prompt", "graph.reviewer[0].prompt"]
    assert cli.log_bytes() == b""


ACCEPTED: dict[str, str] = {
    "a required field alone": "{{status}}",
    "an inverted section on a required field": "{{^status}}Fix it{{/status}}",
    "names inside a section are the section value's": "Fix: {{#comments}}{{line}}{{/comments}}",
    "an explicitly empty prompt": "",
    "the user's prompt": "{{prompt}}",
}


@pytest.mark.parametrize("prompt", ACCEPTED.values(), ids=list(ACCEPTED))
def test_prompts_that_always_say_something_are_accepted(cli: Cli, tmp_path: Path,
                                                        prompt: str) -> None:
    document = with_graph(review(), "reviewer", {"approved": "$END", "rejected": {
        "role": "fixer", "prompt": prompt}})
    result = put(cli, tmp_path, document)
    assert (result.code, result.err) == (0, ""), result


def test_an_end_edge_may_render_empty(cli: Cli, tmp_path: Path) -> None:
    document = with_graph(review(), "reviewer", {"approved": {"role": "$END",
                                                              "prompt": "{{comments}}"},
                                                 "rejected": "fixer"})
    result = put(cli, tmp_path, document)
    assert (result.code, result.err) == (0, ""), result


def test_warnings_are_printed_one_a_line_and_the_workflow_is_registered(
        cli: Cli, tmp_path: Path) -> None:
    document = review()
    document["roles"]["reviewer"]["meta"]["properties"]["status"]["enum"].append("unsure")
    document["graph"]["fixer"]["_"]["prompt"] = "Changed {{files}}: {{summary}}"
    document["conditions"] = {"spare": {"expression": "true"}}
    result = put(cli, tmp_path, document)
    assert result.code == 0, result
    expected = [
        "graph.reviewer: status 'unsure' (allowed by roles.reviewer.meta) has no edge: a "
        "thread whose reviewer reports it will block",
        "graph.fixer._.prompt: {{summary}} is not a property of roles.fixer.meta: it renders "
        "empty unless the output has it",
        "conditions.spare: not used by any graph entry",
    ]
    assert result.err.splitlines() == [f"warning: {warning}" for warning in expected]
    printed = json.loads(result.out)
    assert printed == {"workflow": printed["workflow"], "name": "review", "warnings": expected}
    listed = json.loads(cli.run("workflow", "list").out)
    assert [(w["name"], w["workflow"]) for w in listed] == [("review", printed["workflow"])]
    again = put(cli, tmp_path, document)  # idempotent: the same result, warnings included
    assert (json.loads(again.out), again.err) == (printed, result.err)


def test_an_entry_after_the_fallback_is_unreachable(cli: Cli, tmp_path: Path) -> None:
    document = seed()
    document["graph"]["developer"].append({"role": "$END", "condition": "notApproved"})
    result = put(cli, tmp_path, document)
    assert result.code == 0, result
    assert result.err.splitlines() == [
        "warning: graph.developer[1]: unreachable: the fallback graph.developer[0] "
        "(condition null) comes first"]


def test_a_clean_workflow_has_no_warnings_key(cli: Cli) -> None:
    for path in (EXAMPLE, SEED):
        result = cli.run("workflow", "put", str(path))
        assert (result.code, result.err) == (0, ""), result
        assert set(json.loads(result.out)) == {"workflow", "name"}


def test_a_schema_by_hash_is_checked_too(cli: Cli, tmp_path: Path) -> None:
    stored = cli.cas("put", "--type", "meta", "-", stdin=json.dumps(REVIEWER))
    assert stored.code == 0, stored.err
    document = with_graph(review(), "reviewer", {"approved": "$END", "lgtm": "fixer"})
    document["roles"]["reviewer"]["meta"] = stored.out.strip()
    line = one_line_error(put(cli, tmp_path, document), 1, "workflow has 1 problem")
    assert "graph.reviewer.lgtm: status 'lgtm' is not one that roles.reviewer.meta" in line


def test_warnings_from_python(cli: Cli, tmp_path: Path) -> None:
    from uwf.store import Store
    from uwf.workflows.service import put_workflow

    document = seed()
    document["conditions"]["spare"] = {"expression": "false"}
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(document), "utf-8")
    store = Store.open(cli.home)
    try:
        result = put_workflow(store, path)
    finally:
        store.close()
    assert result.warnings == ["conditions.spare: not used by any graph entry"]


# -- docs/workflows.md shows real output -----------------------------------------------

DOC_CASE = re.compile(r"<!-- put: (?P<name>[\w-]+) -->\n```yaml\n(?P<yaml>.*?)```\n\n"
                      r"```\n(?P<output>.*?)```", re.DOTALL)


def test_the_documented_put_checks_print_what_the_page_says(cli: Cli, tmp_path: Path) -> None:
    cases = list(DOC_CASE.finditer(DOCS.read_text("utf-8")))
    assert {case["name"] for case in cases} >= {"refused", "warned"}
    for case in cases:
        path = tmp_path / f"{case['name']}.yaml"
        path.write_text(case["yaml"], "utf-8")
        result = cli.run("workflow", "put", str(path))
        assert result.code == (1 if case["name"] == "refused" else 0), result
        assert result.err == case["output"], case["name"]
