"""The moderator: status routing, `_`, NoTransition, and Mustache edge prompts."""

from __future__ import annotations

from typing import Any

import pytest

from uwf.errors import EXIT_REJECTED, Rejected
from uwf.language.moderator import END, START, NoTransition, evaluate

GRAPH: dict[str, dict[str, dict[str, str]]] = {
    "$START": {"_": {"role": "planner", "prompt": "{{prompt}}"}},
    "planner": {
        "ready": {"role": "developer", "prompt": "Implement: {{plan}}"},
        "unclear": {"role": "$END", "prompt": ""},
    },
    "developer": {"done": {"role": "reviewer", "prompt": "Review {{files}}: {{summary}}"}},
    "reviewer": {
        "approved": {"role": "$END", "prompt": "Done."},
        "rejected": {"role": "developer", "prompt": "Fix: {{comments}}"},
    },
    "free": {"_": {"role": "reviewer", "prompt": "anything: {{status}}"}},
}


def edge(template: str, status: str = "_") -> dict[str, dict[str, dict[str, str]]]:
    """A graph where role `r` with `status` goes to `next` with `template`."""
    return {"r": {status: {"role": "next", "prompt": template}}}


def render(template: str, output: Any, user_prompt: str = "the task") -> str:
    return evaluate(edge(template), "r", output, user_prompt).prompt


# -- routing ----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("role", "output", "expected_role", "expected_prompt"),
    [
        ("planner", {"status": "ready", "plan": "P"}, "developer", "Implement: P"),
        ("planner", {"status": "unclear", "question": "?"}, END, ""),
        ("developer", {"status": "done", "files": ["a.py"], "summary": "S"}, "reviewer",
         "Review a.py: S"),
        ("reviewer", {"status": "approved"}, END, "Done."),
        ("reviewer", {"status": "rejected", "comments": "C"}, "developer", "Fix: C"),
    ],
)
def test_routes_by_the_output_status(role: str, output: dict[str, Any], expected_role: str,
                                     expected_prompt: str) -> None:
    decision = evaluate(GRAPH, role, output, "the task")
    assert decision.role == expected_role
    assert decision.prompt == expected_prompt
    assert decision.status == output["status"]
    assert decision.ends == (expected_role == END)


@pytest.mark.parametrize("output", [None, {}, {"status": "ready"}, {"status": 5}, "text"])
def test_start_always_uses_underscore(output: Any) -> None:
    decision = evaluate(GRAPH, START, output, "Fix the bug")
    assert (decision.role, decision.prompt, decision.status) == ("planner", "Fix the bug", "_")
    assert not decision.ends


@pytest.mark.parametrize(
    "output",
    [{}, {"other": 1}, {"status": 5}, {"status": None}, {"status": True}, {"status": ["a"]},
     {"status": {"a": "b"}}, {"status": 1.5}, None, "done", ["done"], 7],
)
def test_output_without_a_string_status_routes_by_underscore(output: Any) -> None:
    decision = evaluate(GRAPH, "free", output, "task")
    assert decision.status == "_"
    assert decision.role == "reviewer"


def test_a_string_status_never_falls_back_to_underscore() -> None:
    graph = {"r": {"_": {"role": "fallback", "prompt": ""}}}
    with pytest.raises(NoTransition) as raised:
        evaluate(graph, "r", {"status": "odd"}, "task")
    assert str(raised.value) == 'no transition for role "r" with status "odd"'


@pytest.mark.parametrize(
    ("role", "output", "message"),
    [
        ("reviewer", {"status": "maybe"}, 'no transition for role "reviewer" with status "maybe"'),
        ("developer", {"status": 5}, 'no transition for role "developer" with status "_"'),
        ("developer", {"files": []}, 'no transition for role "developer" with status "_"'),
        ("ghost", {"status": "done"}, 'no transition for role "ghost" with status "done"'),
        ("$END", {"status": "approved"}, 'no transition for role "$END" with status "approved"'),
    ],
)
def test_missing_transition_is_no_transition(role: str, output: Any, message: str) -> None:
    with pytest.raises(NoTransition) as raised:
        evaluate(GRAPH, role, output, "task")
    error = raised.value
    assert str(error) == message
    assert error.what == message
    assert isinstance(error, Rejected)
    assert error.exit_code == EXIT_REJECTED
    assert error.next_action  # says what to do next
    assert error.line().startswith(message + "; ")


def test_no_transition_from_start_without_underscore() -> None:
    with pytest.raises(NoTransition) as raised:
        evaluate({"$START": {"go": {"role": "a", "prompt": ""}}}, START, None, "task")
    assert str(raised.value) == 'no transition for role "$START" with status "_"'


# -- edge prompts -----------------------------------------------------------------

def test_double_mustache_does_not_html_escape() -> None:
    value = '<T> & "q" \'s\''
    assert render("{{x}}", {"x": value}) == value
    assert render("Fix: {{x}}!", {"x": value}) == f"Fix: {value}!"


def test_triple_and_ampersand_mustache_are_raw_too() -> None:
    value = '<T> & "q"'
    assert render("{{{x}}}", {"x": value}) == value
    assert render("{{& x}}", {"x": value}) == value
    assert render("[{{x}}|{{{x}}}]", {"x": value}) == f"[{value}|{value}]"


def test_dotted_paths_reach_nested_fields() -> None:
    output = {"a": {"b": {"c": "deep <value>"}, "n": 3}, "status": "_"}
    assert render("{{a.b.c}}", output) == "deep <value>"
    assert render("{{{a.b.c}}} / {{a.n}}", output) == "deep <value> / 3"
    assert render("[{{a.b.missing}}][{{nope.x.y}}]", output) == "[][]"


def test_prompt_is_the_user_prompt_unless_the_output_has_one() -> None:
    assert render("Task: {{prompt}}", {"other": "x"}, "Fix <it> & \"now\"") == \
        'Task: Fix <it> & "now"'
    assert render("Task: {{prompt}}", {"prompt": "from output"}, "user") == "Task: from output"
    assert render("{{prompt}}", None, "user") == "user"
    assert render("{{prompt}}", "not a dict", "user") == "user"
    assert evaluate(GRAPH, START, None, "<b>raw</b>").prompt == "<b>raw</b>"


def test_prompt_field_shadows_even_when_empty() -> None:
    assert render("[{{prompt}}]", {"prompt": ""}, "user") == "[]"


def test_missing_fields_render_empty_and_plain_text_is_kept() -> None:
    assert render("Fix: {{comments}}", {}) == "Fix: "
    assert render("No tags at all: {x} <b> &amp;", {"x": 1}) == "No tags at all: {x} <b> &amp;"


def test_values_are_shown_as_javascript_would() -> None:
    assert render("{{files}}", {"files": ["a.py", "b.py"]}) == "a.py,b.py"
    assert render("{{n}} {{f}} {{t}} {{b}}", {"n": 5, "f": 2.0, "t": True, "b": False}) == \
        "5 2 true false"
    assert render("{{x}}", {"x": 1.5}) == "1.5"


def test_rendered_values_are_not_rendered_again() -> None:
    assert render("Fix: {{comments}}", {"comments": "{{prompt}}"}, "user") == "Fix: {{prompt}}"


def test_sections_iterate_lists() -> None:
    output = {"files": [{"path": "a.py"}, {"path": "b.py"}]}
    assert render("{{#files}}<{{path}}>{{/files}}", output) == "<a.py><b.py>"
    assert render("{{^files}}none{{/files}}", {"files": []}) == "none"


def test_unicode_passes_through() -> None:
    assert render("{{x}}", {"x": "修复 — ünïcode ✓"}) == "修复 — ünïcode ✓"


def test_evaluate_does_not_modify_its_inputs() -> None:
    output = {"status": "rejected", "comments": "C"}
    graph_before = repr(GRAPH)
    evaluate(GRAPH, "reviewer", output, "user")
    assert output == {"status": "rejected", "comments": "C"}
    assert repr(GRAPH) == graph_before
