"""Token usage (issue 17 item 2): an agent reports `usage: {inputTokens, outputTokens,
cost}` in its output (JSON or front matter); uwf takes it out of the output (validated
against the role's schema), keeps it in the step's detail, records it in
`thread.stepped`, and `run show` and `history` sum it per run.

Through the real `uwf`, `uwf-mock`, `uwf-exec` and agent scripts on scratch stores.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLE, Cli, snapshot
from tests.threadkit import MOCK_SCRIPT, Kit, make_kit, mock_config, one_line_error
from uwf.store import event_catalog

PLANNER = {"inputTokens": 1200, "outputTokens": 340, "cost": 0.1}
DEVELOPER = {"inputTokens": 3000, "outputTokens": 900, "cost": 0.2}
REVIEWER = {"inputTokens": 800}  # tokens only: no cost


def scripted_with_usage() -> dict[str, list[dict[str, Any]]]:
    """The mock script of threadkit, each planner and developer output reporting usage,
    the first review reporting tokens only, the second nothing."""
    script = copy.deepcopy(MOCK_SCRIPT)
    for output in script["planner"]:
        output["usage"] = PLANNER
    for output in script["developer"]:
        output["usage"] = DEVELOPER
    script["reviewer"][0]["usage"] = REVIEWER
    return script


def usage_kit(cli: Cli, tmp_path: Path) -> tuple[Kit, str]:
    kit = make_kit(cli, tmp_path)
    kit.write_config(mock_config(kit.mock_script(scripted_with_usage())))
    kit.put_workflow()
    return kit, kit.start()


def stepped_usage(kit: Kit, thread: str) -> list[Any]:
    return [event["data"].get("usage") for event in kit.events("thread.stepped")
            if event["subject"] == f"thread/{thread}"]


def test_usage_is_kept_in_the_detail_and_summed_per_run(cli: Cli, tmp_path: Path) -> None:
    kit, thread = usage_kit(cli, tmp_path)
    assert kit.ok("run", "show", thread)["run"]["usage"] is None  # nothing reported yet
    kit.ok("thread", "step", thread)
    first = kit.log(thread)[0]
    assert first["output"] == MOCK_SCRIPT["planner"][0]  # not in the output
    detail = kit.payload(first["detail"])
    assert detail == ('---\nusage: {"inputTokens": 1200, "outputTokens": 340, "cost": 0.1}'
                      "\n---\nuwf-mock: planner, visit 1")
    assert stepped_usage(kit, thread) == [PLANNER]
    assert kit.ok("run", "show", thread)["run"]["usage"] == {**PLANNER, "reportedSteps": 1}
    assert kit.ok("thread", "run", thread)["done"] is True
    # planner, developer, reviewer (tokens only), developer, reviewer (nothing)
    assert stepped_usage(kit, thread) == [PLANNER, DEVELOPER, REVIEWER, DEVELOPER, None]
    total = {"inputTokens": 1200 + 3000 + 800 + 3000, "outputTokens": 340 + 900 + 900,
             "cost": 0.5, "reportedSteps": 4}  # 0.1 + 0.2 + 0.2: shown at 10 decimals
    assert kit.ok("run", "show", thread)["run"]["usage"] == total
    assert kit.ok("history")["runs"][0]["usage"] == total
    assert [entry["output"] for entry in kit.log(thread)] == [
        MOCK_SCRIPT["planner"][0], *MOCK_SCRIPT["developer"][:1], MOCK_SCRIPT["reviewer"][0],
        MOCK_SCRIPT["developer"][1], MOCK_SCRIPT["reviewer"][1]]
    # The views are derived: deleted and rebuilt, the same bytes.
    reads = [("run", "show", thread), ("history",), ("run", "search")]
    before = [kit.uwf(*args).out for args in reads]
    shutil.rmtree(kit.home / "views")
    assert [kit.uwf(*args).out for args in reads] == before
    assert kit.ok("registry", "verify")["ok"] is True
    assert kit.ok("log", "verify")["ok"] is True


def test_agent_submit_takes_usage_out_of_the_output(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    output = {"status": "ready", "plan": "p", "usage": {"inputTokens": 7, "cost": 0}}
    submitted = kit.uwf("agent", "submit", thread, "planner", "--output", "-", "--detail",
                        str(kit.workflow_file({"notes": 1}, "notes.yaml")),
                        stdin=json.dumps(output))
    assert submitted.code == 0, submitted
    step = kit.payload(submitted.out.strip())
    assert kit.payload(step["output"]) == {"status": "ready", "plan": "p"}
    assert kit.payload(step["detail"]) == ('---\nusage: {"inputTokens": 7, "cost": 0.0}\n'
                                           "---\nnotes: 1\n")


@pytest.mark.parametrize(("usage", "what"), [
    ({"inputTokens": -1}, "usage is not a usage"),
    ({"inputTokens": 1.5}, "usage is not a usage"),
    ({"tokens": 3}, "usage is not a usage"),
    ({"cost": "free"}, "usage is not a usage"),
    ({"inputTokens": True}, "usage is not a usage"),
    ({}, "usage must be a non-empty object"),
    ("lots", "usage must be a non-empty object"),
])
def test_a_usage_that_is_not_one_is_refused_and_writes_nothing(
        cli: Cli, tmp_path: Path, usage: Any, what: str) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    before = snapshot(kit.home)
    output = {"status": "ready", "usage": usage}
    one_line_error(kit.uwf("agent", "submit", thread, "planner", "--output", "-",
                           stdin=json.dumps(output)), 1, what, "inputTokens")
    assert snapshot(kit.home) == before


def test_a_schema_that_declares_usage_keeps_it_in_the_output(cli: Cli, tmp_path: Path
                                                             ) -> None:
    kit = make_kit(cli, tmp_path)
    document = yaml.safe_load(EXAMPLE.read_text("utf-8"))
    document["roles"]["planner"]["meta"]["properties"]["usage"] = {"type": "string"}
    kit.put_workflow(kit.workflow_file(document, "declares.yaml"))
    thread = kit.start()
    output = {"status": "ready", "usage": "the role's own field"}
    submitted = kit.uwf("agent", "submit", thread, "planner", "--output", "-",
                        stdin=json.dumps(output))
    assert submitted.code == 0, submitted
    step = kit.payload(submitted.out.strip())
    assert kit.payload(step["output"]) == output
    assert kit.payload(step["detail"]) == ""


def test_exec_front_matter_reports_usage(cli: Cli, tmp_path: Path) -> None:
    """A CLI agent's answer whose front matter holds usage (and whose output is a
    fenced block): uwf-exec keeps the answer as the detail, where it is read."""
    kit = make_kit(cli, tmp_path)
    answer = ("---\nusage: {inputTokens: 5, outputTokens: 7, cost: 0.25}\n---\n"
              "Done.\n```json\n{\"status\": \"ready\", \"plan\": \"x\"}\n```\n")
    (tmp_path / "answer.txt").write_text(answer)
    stub = kit.agent("stub-cli", f"sys.stdout.write(open({str(tmp_path / 'answer.txt')!r})"
                                 ".read())\n")
    kit.write_config({"agents": {"stub": {"command": "uwf-exec", "args": ["--", str(stub)]}},
                      "defaultAgent": "stub"})
    kit.put_workflow()
    thread = kit.start()
    kit.ok("thread", "step", thread)
    entry = kit.log(thread)[0]
    assert entry["output"] == {"status": "ready", "plan": "x"}
    assert kit.payload(entry["detail"]) == answer
    usage = {"inputTokens": 5, "outputTokens": 7, "cost": 0.25}
    assert stepped_usage(kit, thread) == [usage]
    assert kit.ok("run", "show", thread)["run"]["usage"] == {**usage, "reportedSteps": 1}


def test_a_detail_with_a_bad_usage_fails_the_step(cli: Cli, tmp_path: Path) -> None:
    """An agent that writes its own StepNode with a detail whose front matter holds a
    usage that is not one: the step fails (reason usage); the head stays."""
    kit = make_kit(cli, tmp_path)
    agent = kit.agent("own-node", '''
        ctx = context()
        out = put_cli(ctx["role"]["meta"], {"status": "ready", "plan": "p"})
        detail = put("Text", "---\\nusage: {inputTokens: many}\\n---\\nnotes")
        print(put("StepNode", {"start": ctx["start"], "prev": ctx["head"], "role": ROLE,
                               "output": out, "detail": detail, "agent": "own-node"}))
    ''')
    kit.put_workflow()
    thread = kit.start()
    failed = kit.step(thread, "--agent", str(agent))
    one_line_error(failed, 1, "step failed (usage)", "the detail's usage is not a usage")
    assert [e["data"]["reason"] for e in kit.events("thread.step_failed")] == ["usage"]
    assert kit.log(thread) == []
    assert kit.ok("log", "verify")["ok"] is True


def test_an_event_without_usage_still_decodes() -> None:
    """`thread.stepped` lines written before usage was kept have no `usage` field."""
    line = (b'{"seq":3,"id":"01M8AC27W7AJDTCXCNJFP9S2QM","ts":"2030-01-01T00:00:00.000Z",'
            b'"type":"thread.stepped","subject":"thread/01M8AC27W7AJDTCXCNJFP9S2QM",'
            b'"batch":[1,1],"data":{"stepId":"01M8AC27W7AJDTCXCNJFP9S2QN","head":'
            b'"B34NZG60M3PDN","role":"planner","status":"ready","output":"CG1R8K7CFBG9S"},'
            b'"prev":"' + b"0" * 32 + b'"}')
    assert event_catalog().decode(line).data.usage is None
