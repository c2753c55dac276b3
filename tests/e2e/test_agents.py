"""Agents: the protocol (argv, environment, resolution), `uwf agent context|submit`,
uwf-exec with stub CLI agents, uwf-llm against a local OpenAI-compatible server,
and uwf-subflow running a child workflow."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BIN, EXAMPLE, Cli
from tests.threadkit import (
    MOCK_SCRIPT,
    Kit,
    as_before_but_failed,
    kill_quietly,
    make_kit,
    mock_config,
    one_line_error,
    store_bytes,
    wait_dead,
    wait_for,
)

PROMPT = "Fix the login bug: empty passwords are accepted"
PLAN = {"status": "ready", "plan": "Guard clause in login()"}


def started(cli: Cli, tmp_path: Path, *, mock: bool = True) -> tuple[Kit, str]:
    kit = make_kit(cli, tmp_path, mock=mock)
    kit.put_workflow()
    return kit, kit.start(prompt=PROMPT)


# -- the protocol -----------------------------------------------------------------------

def test_agent_gets_argv_environment_and_dotenv(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path, mock=False)
    seen = tmp_path / "seen.json"
    recorder = kit.agent("recorder", f'''
        names = ["UWF_HOME", "UWF_THREAD", "UWF_ROLE", "UWF_EDGE_PROMPT", "SECRET_TOKEN",
                 "PLAIN_SETTING"]
        json.dump({{"argv": sys.argv[1:], "env": {{n: os.environ.get(n) for n in names}}}},
                  open({str(seen)!r}, "w"))
        print(submit({json.dumps(PLAN)}))
    ''')
    kit.write_config({"agents": {"rec": {"command": str(recorder), "args": ["--mode", "x y"]}},
                      "defaultAgent": "rec"})
    kit.write_env_file("SECRET_TOKEN=sk-agent-secret-123\nPLAIN_SETTING='quoted value'\n")
    kit.put_workflow()
    thread = kit.start(prompt=PROMPT)
    stepped = kit.ok("thread", "step", thread)
    record = json.loads(seen.read_text())
    assert record["argv"] == ["--mode", "x y", thread, "planner"]
    assert record["env"] == {
        "UWF_HOME": str(kit.home), "UWF_THREAD": thread, "UWF_ROLE": "planner",
        "UWF_EDGE_PROMPT": PROMPT, "SECRET_TOKEN": "sk-agent-secret-123",
        "PLAIN_SETTING": "quoted value",
    }
    assert kit.events("thread.step_started")[0]["data"]["agent"] == "rec"
    step = kit.payload(stepped["head"])
    assert step["agent"] == "script"
    assert kit.payload(step["output"]) == PLAN
    assert b"sk-agent-secret-123" not in b"".join(store_bytes(kit.home).values())


def test_agent_resolution_order(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    script = str(kit.mock_script())
    mock = {"command": "uwf-mock", "args": [script]}
    kit.write_config({"agents": {"a": mock, "b": mock, "c": mock}, "defaultAgent": "a",
                      "agentOverrides": {"solve-issue": {"developer": "b"},
                                         "other-flow": {"planner": "c"}}})
    kit.put_workflow()
    thread = kit.start()
    command_line = f"uwf-mock {script}"
    for args in ([], [], ["--agent", "c"], ["--agent", command_line], []):
        kit.ok("thread", "step", thread, *args)
    agents = [e["data"]["agent"] for e in kit.events("thread.step_started")]
    assert agents == ["a", "b", "c", command_line, "a"]
    assert kit.show(thread)["done"] is True


def test_a_staged_mock_step_loads_no_yaml_and_no_store(cli: Cli, tmp_path: Path) -> None:
    """uwf-mock, run by `uwf thread step` as a real process, reads its context from and
    writes its nodes to its staging folder: with a JSON script it loads no PyYAML, and
    the kit loads no store, thread service, log or SQLite, nor the staging's
    command-side shutil and tempfile (every agent process of a step would pay for their
    imports). The agent process lists its modules as it exits."""
    kit = make_kit(cli, tmp_path, mock=False)
    loaded = tmp_path / "loaded.txt"
    probe = ("import atexit, runpy, sys\n"
             f"atexit.register(lambda: open({str(loaded)!r}, 'w').write(' '.join(sys.modules)))\n"
             "sys.argv = ['uwf-mock', *sys.argv[1:]]\n"
             "runpy.run_module('uwf.agents.mock', run_name='__main__')\n")
    kit.write_config({"agents": {"mock": {"command": sys.executable,
                                          "args": ["-c", probe, str(kit.mock_script())]}},
                      "defaultAgent": "mock"})
    kit.put_workflow()
    thread = kit.start()
    kit.ok("thread", "step", thread)
    assert kit.show(thread)["currentRole"] == "developer"
    modules = set(loaded.read_text().split())
    assert {"uwf.agents.kit", "uwf.threads.staging"} <= modules
    assert not modules & {"yaml", "sqlite3", "uwf.store", "uwf.threads.agent",
                          "uwf.threads.service", "uwf.engine.journal", "uwf.engine.filelog",
                          "shutil", "tempfile"}  # the command's side of the staging only


def test_agent_context_and_submit(cli: Cli, tmp_path: Path) -> None:
    kit, thread = started(cli, tmp_path)
    first = kit.ok("thread", "step", thread)["head"]
    context = kit.ok("agent", "context", thread, "developer")
    meta = context["role"]["meta"]
    assert context["thread"] == thread
    assert context["workflowName"] == "solve-issue"
    assert context["prompt"] == PROMPT
    assert context["edgePrompt"] == "Implement: Reject empty passwords in login()"
    assert context["head"] == first
    assert context["start"] == kit.payload(first)["start"]
    assert context["role"]["name"] == "developer"
    assert context["role"]["schema"] == kit.payload(meta)
    assert context["role"]["capabilities"] == ["file-edit", "shell"]
    assert context["history"] == [{"role": "planner", "status": "ready",
                                   "output": MOCK_SCRIPT["planner"][0], "step": first,
                                   "agent": "uwf-mock",
                                   "detail": kit.payload(first)["detail"]}]
    one_line_error(kit.uwf("agent", "context", thread, "tester"), 1, "no role 'tester'")

    log = cli.log_bytes()
    bad = kit.uwf("agent", "submit", thread, "developer", "--output", "-",
                  stdin='{"status": "done"}')
    one_line_error(bad, 1, "does not match the developer schema")
    not_json = kit.uwf("agent", "submit", thread, "developer", "--output", "-", stdin="{nope")
    one_line_error(not_json, 2, "not JSON")
    detail_file = tmp_path / "transcript.txt"
    detail_file.write_text("I edited login.py\nand ran the tests\n")
    output = {"status": "done", "files": ["auth/login.py"], "summary": "guard"}
    good = kit.uwf("agent", "submit", thread, "developer", "--output", "-", "--detail",
                   str(detail_file), "--agent", "by-hand", stdin=json.dumps(output))
    assert good.code == 0, good
    submitted = good.out.strip()
    assert good.out == submitted + "\n"  # the bare hash, as the agent protocol wants
    assert cli.log_bytes() == log  # submitting writes nodes, never events
    assert kit.show(thread)["head"] == first  # ... and never moves the head
    node = kit.node(submitted)
    assert node["type"] == kit.schema_hash("StepNode")
    step = node["payload"]
    assert (step["start"], step["prev"], step["role"], step["agent"]) == \
        (context["start"], first, "developer", "by-hand")
    assert kit.node(step["output"])["payload"] == output
    assert kit.node(step["output"])["type"] == meta
    assert kit.payload(step["detail"]) == "I edited login.py\nand ran the tests\n"

    # An agent may just print a StepNode submitted earlier: it passes every check.
    echo = kit.agent("echo", f"print({submitted!r})\n")
    stepped = kit.ok("thread", "step", thread, "--agent", str(echo))
    assert stepped["head"] == submitted
    assert kit.log(thread)[-1]["agent"] == "by-hand"


# -- uwf-exec -------------------------------------------------------------------------

EXEC_STDOUT = (
    "I read the issue and looked at auth/login.py.\n"
    "An example that is not the answer:\n"
    "```json\n{\"status\": \"unclear\", \"question\": \"draft\"}\n```\n"
    "Some non-JSON code:\n```python\nprint('x')\n```\n"
    "Final answer:\n"
    "```json\n"
    "{\"status\": \"ready\", \"plan\": \"Reject <empty> & \\\"blank\\\" passwords\"}\n"
    "```\n"
    "Thanks!\n"
)
FRONT_STDOUT = "---\nstatus: ready\nplan: From front matter\n---\nThe rest is prose.\n"


def exec_kit(cli: Cli, tmp_path: Path, stdout: str, *flags: str) -> tuple[Kit, str, Path]:
    """A stub CLI agent that prints `stdout` and records its argv and stdin."""
    kit = make_kit(cli, tmp_path)
    (tmp_path / "stub-out.txt").write_text(stdout)
    seen = tmp_path / "stub-seen.json"
    stub = kit.agent("stub-cli", f'''
        data = sys.stdin.read() if not sys.stdin.isatty() else ""
        json.dump({{"argv": sys.argv[1:], "stdin": data}}, open({str(seen)!r}, "w"))
        sys.stdout.write(open({str(tmp_path / "stub-out.txt")!r}).read())
    ''')
    kit.write_config({"agents": {"stub": {"command": "uwf-exec",
                                          "args": [*flags, "--", str(stub), "-p"]}},
                      "defaultAgent": "stub"})
    kit.put_workflow()
    return kit, kit.start(prompt=PROMPT), seen


@pytest.mark.parametrize(
    ("stdout", "output"),
    [
        (EXEC_STDOUT, {"status": "ready", "plan": 'Reject <empty> & "blank" passwords'}),
        (FRONT_STDOUT, {"status": "ready", "plan": "From front matter"}),
    ],
)
def test_exec_extracts_output_and_keeps_stdout_as_detail(cli: Cli, tmp_path: Path, stdout: str,
                                                         output: dict[str, Any]) -> None:
    kit, thread, seen = exec_kit(cli, tmp_path, stdout)
    stepped = kit.ok("thread", "step", thread)
    entry = kit.log(thread)[0]
    assert entry["hash"] == stepped["head"]
    assert entry["output"] == output
    assert entry["agent"].startswith("uwf-exec ")
    assert entry["agent"].endswith("stub-cli")
    detail = kit.node(entry["detail"])
    assert detail["type"] == kit.schema_hash("Text")
    assert detail["payload"] == stdout
    call = json.loads(seen.read_text())
    assert call["argv"][0] == "-p"
    prompt = call["argv"][1]
    assert len(call["argv"]) == 2
    assert "You are a planning agent" in prompt
    assert f"## Task\n{PROMPT}" in prompt
    assert '"enum"' in prompt  # the output contract with its schema
    assert "```json" in prompt
    assert kit.show(thread)["done"] is False


def test_exec_prompt_on_stdin(cli: Cli, tmp_path: Path) -> None:
    kit, thread, seen = exec_kit(cli, tmp_path, EXEC_STDOUT, "--stdin")
    kit.ok("thread", "step", thread)
    call = json.loads(seen.read_text())
    assert call["argv"] == ["-p"]
    assert f"## Task\n{PROMPT}" in call["stdin"]


@pytest.mark.parametrize(
    ("stdout", "fragment"),
    [
        ("```json\n{\"status\": \"maybe\"}\n```\n", "does not match the planner schema"),
        ("I could not decide.\n", "no output found"),
    ],
)
def test_exec_refuses_bad_or_missing_output(cli: Cli, tmp_path: Path, stdout: str,
                                            fragment: str) -> None:
    kit, thread, _ = exec_kit(cli, tmp_path, stdout)
    before = kit.show(thread)
    one_line_error(kit.step(thread), 1, "step failed (exit)", fragment)
    assert [e["data"]["reason"] for e in kit.events("thread.step_failed")] == ["exit"]
    as_before_but_failed(kit, thread, before, "exit")


# -- uwf-llm --------------------------------------------------------------------------

LLM_KEY = "sk-llm-test-key-0123456789"


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


def completion(text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}


@dataclass
class FakeLLM:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 with scripted replies."""

    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def serve(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
                fake.requests.append({"path": self.path, "at": time.monotonic(), "body": body,
                                      "headers": {k.lower(): v for k, v in self.headers.items()}})
                reply = fake.replies.pop(0) if fake.replies else Reply(599, {"error": "none"})
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    fake.serve()
    yield fake
    assert fake.server is not None
    fake.server.shutdown()
    fake.server.server_close()


def llm_kit(cli: Cli, tmp_path: Path, llm: FakeLLM, *, extract: bool = False,
            key: bool = True) -> tuple[Kit, str]:
    kit = make_kit(cli, tmp_path, mock=False)
    config: dict[str, Any] = {
        "providers": {"local": {"baseUrl": llm.base_url, "apiKeyEnv": "LLM_TEST_KEY"}},
        "models": {"main": {"provider": "local", "name": "main-model"},
                   "extractor": {"provider": "local", "name": "extract-model"}},
        "agents": {"llm": {"command": "uwf-llm", "args": []}},
        "defaultAgent": "llm",
        "defaultModel": "main",
    }
    if extract:
        config["modelOverrides"] = {"extract": "extractor"}
    kit.write_config(config)
    if key:
        kit.write_env_file(f"LLM_TEST_KEY={LLM_KEY}\n")
    cli.env["UWF_LLM_BACKOFF_S"] = "0.01"
    kit.put_workflow()
    return kit, kit.start(prompt=PROMPT)


def assert_key_kept_secret(kit: Kit, *texts: str) -> None:
    for text in texts:
        assert LLM_KEY not in text
    for name, data in store_bytes(kit.home).items():
        assert LLM_KEY.encode() not in data, name


ANSWER = ("I looked at login().\n\n```json\n" + json.dumps(PLAN) + "\n```\n")


def test_llm_success(cli: Cli, tmp_path: Path, llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm)
    llm.replies.append(Reply(200, completion(ANSWER)))
    result = kit.step(thread)
    assert result.code == 0, result
    entry = kit.log(thread)[0]
    assert entry["output"] == PLAN
    assert entry["agent"] == "uwf-llm main"
    assert kit.payload(entry["detail"]) == ANSWER
    assert len(llm.requests) == 1
    request = llm.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {LLM_KEY}"
    body = request["body"]
    assert body["model"] == "main-model"
    assert "response_format" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].startswith("You are a planning agent")
    assert f"## Task\n{PROMPT}" in body["messages"][1]["content"]
    assert_key_kept_secret(kit, result.out, result.err)


def test_llm_extracts_with_the_extract_model(cli: Cli, tmp_path: Path, llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm, extract=True)
    prose = "The plan: add a guard clause to login(). No JSON here."
    extracted = {"status": "ready", "plan": "extracted plan"}
    llm.replies += [Reply(200, completion(prose)), Reply(200, completion(json.dumps(extracted)))]
    kit.ok("thread", "step", thread)
    entry = kit.log(thread)[0]
    assert entry["output"] == extracted
    assert kit.payload(entry["detail"]) == prose
    assert len(llm.requests) == 2
    first, second = (r["body"] for r in llm.requests)
    assert first["model"] == "main-model"
    assert "response_format" not in first
    assert second["model"] == "extract-model"
    schema = kit.payload(kit.ok("workflow", "show", "solve-issue")["definition"]["roles"]
                         ["planner"]["meta"])
    response_format = second["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"] == schema
    assert any(prose in m["content"] for m in second["messages"])
    assert all(r["headers"]["authorization"] == f"Bearer {LLM_KEY}" for r in llm.requests)


def test_llm_retries_429_honouring_retry_after(cli: Cli, tmp_path: Path, llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm)
    llm.replies += [
        Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}),
        Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}),
        Reply(200, completion(ANSWER)),
    ]
    kit.ok("thread", "step", thread)
    assert kit.log(thread)[0]["output"] == PLAN
    assert len(llm.requests) == 3
    assert [r["body"] for r in llm.requests[1:]] == [llm.requests[0]["body"]] * 2
    # Retry-After: 1 is honoured although the backoff base is 0.01 s.
    assert llm.requests[2]["at"] - llm.requests[1]["at"] >= 0.9


def test_llm_gives_up_after_retries(cli: Cli, tmp_path: Path, llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm)
    cli.env["UWF_LLM_RETRIES"] = "2"
    llm.replies += [Reply(500, {"error": "down"}) for _ in range(6)]
    before = kit.show(thread)
    one_line_error(kit.step(thread), 1, "step failed (exit)", "HTTP 500", "3 attempts")
    assert len(llm.requests) == 3
    as_before_but_failed(kit, thread, before, "exit")
    assert [e["data"]["reason"] for e in kit.events("thread.step_failed")] == ["exit"]


def test_llm_bad_key(cli: Cli, tmp_path: Path, llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm)
    llm.replies += [Reply(401, {"error": {"message": "invalid api key"}}) for _ in range(3)]
    result = kit.step(thread)
    one_line_error(result, 1, "step failed (exit)", "LLM_TEST_KEY", "401")
    assert len(llm.requests) == 1  # a bad key is not retried
    direct = cli.run(thread, "planner", prog="uwf-llm")
    assert direct.code == 1, direct
    assert direct.out == ""
    lines = direct.err.splitlines()
    assert len(lines) == 1, direct.err
    assert lines[0].startswith("uwf-llm: error: ")
    assert "LLM_TEST_KEY" in lines[0]
    assert len(llm.requests) == 2
    assert_key_kept_secret(kit, result.err, direct.err)


def test_llm_missing_key(cli: Cli, tmp_path: Path, llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm, key=False)
    one_line_error(kit.step(thread), 1, "step failed (exit)", "LLM_TEST_KEY is not set")
    assert llm.requests == []


def test_llm_model_endpoint_and_key_from_the_environment(cli: Cli, tmp_path: Path,
                                                         llm: FakeLLM) -> None:
    """No providers or models in config.yaml: the environment names them all."""
    kit = make_kit(cli, tmp_path, mock=False)
    kit.write_config({"agents": {"llm": {"command": "uwf-llm"}}, "defaultAgent": "llm"})
    kit.write_env_file(f"MY_LLM_CREDENTIAL={LLM_KEY}\n")
    cli.env.update({"UWF_BASE_URL": llm.base_url, "UWF_API_KEY_ENV": "MY_LLM_CREDENTIAL",
                    "UWF_MODEL": "raw-model-name"})
    kit.put_workflow()
    thread = kit.start(prompt=PROMPT)
    llm.replies.append(Reply(200, completion(ANSWER)))
    result = kit.step(thread)
    assert result.code == 0, result
    [request] = llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "raw-model-name"
    assert request["headers"]["authorization"] == f"Bearer {LLM_KEY}"
    assert kit.log(thread)[0]["agent"] == "uwf-llm raw-model-name"
    assert_key_kept_secret(kit, result.out, result.err)


def test_llm_environment_wins_over_the_config(cli: Cli, tmp_path: Path, llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm, extract=True)
    cli.env.update({"UWF_LLM_MODEL": "extractor", "UWF_MODEL": "not-this-one",
                    "UWF_EXTRACT_MODEL": "none"})
    llm.replies.append(Reply(200, completion(ANSWER)))
    kit.ok("thread", "step", thread)
    [request] = llm.requests  # no extraction call
    assert request["body"]["model"] == "extract-model"
    assert kit.log(thread)[0]["agent"] == "uwf-llm extractor"


def test_llm_extract_model_from_the_environment(cli: Cli, tmp_path: Path,
                                                llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm)  # no modelOverrides.extract
    cli.env["UWF_EXTRACT_MODEL"] = "extractor"
    llm.replies += [Reply(200, completion("prose only")), Reply(200, completion(json.dumps(PLAN)))]
    kit.ok("thread", "step", thread)
    assert [r["body"]["model"] for r in llm.requests] == ["main-model", "extract-model"]
    assert llm.requests[1]["body"]["response_format"]["type"] == "json_schema"
    assert kit.log(thread)[0]["output"] == PLAN


def test_llm_unknown_model_without_an_endpoint(cli: Cli, tmp_path: Path, llm: FakeLLM) -> None:
    kit, thread = llm_kit(cli, tmp_path, llm)
    cli.env["UWF_MODEL"] = "ghost"
    one_line_error(kit.step(thread), 1, "step failed (exit)", "unknown model 'ghost'",
                   "UWF_BASE_URL")
    assert llm.requests == []


# -- uwf-subflow ----------------------------------------------------------------------

PARENT = {
    "name": "ship-feature",
    "description": "Delegate the fix to solve-issue, then announce it",
    "roles": {
        "delegate": {
            "description": "Runs solve-issue as a sub-workflow", "goal": "Delegate.",
            "capabilities": ["delegation"], "procedure": "Run the child workflow.",
            "output": "The child's final output",
            "meta": {"type": "object", "required": ["status"],
                     "properties": {"status": {"enum": ["approved"]}}},
        },
        "announcer": {
            "description": "Announces the fix", "goal": "Announce.", "capabilities": [],
            "procedure": "Write a note.", "output": "A note",
            "meta": {"type": "object", "required": ["status", "note"],
                     "properties": {"status": {"const": "posted"}, "note": {"type": "string"}}},
        },
    },
    "graph": {
        "$START": {"_": {"role": "delegate", "prompt": "Solve: {{prompt}}"}},
        "delegate": {"approved": {"role": "announcer", "prompt": "Announce it"}},
        "announcer": {"posted": "$END"},
    },
}


def subflow_kit(cli: Cli, tmp_path: Path, script: dict[str, Any]) -> tuple[Kit, str, str]:
    kit = make_kit(cli, tmp_path)
    mock = kit.mock_script(script, "both.yaml")
    kit.write_config(mock_config(
        mock, agents={"mock": {"command": "uwf-mock", "args": [str(mock)]},
                      "sub": {"command": "uwf-subflow", "args": ["solve-issue"]}},
        agentOverrides={"ship-feature": {"delegate": "sub"}}))
    child_workflow = kit.put_workflow(EXAMPLE)
    kit.put_workflow(kit.workflow_file(PARENT, "parent.yaml"))
    return kit, kit.start("ship-feature", PROMPT), child_workflow


def test_subflow_runs_the_child_workflow_to_its_end(cli: Cli, tmp_path: Path) -> None:
    script = {**MOCK_SCRIPT, "announcer": [{"status": "posted", "note": "shipped"}]}
    kit, parent, child_workflow = subflow_kit(cli, tmp_path, script)
    result = kit.ok("thread", "run", parent)
    assert result["done"] is True
    assert result["steps"] == 2
    log = kit.log(parent)
    assert [(e["role"], e["status"], e["agent"]) for e in log] == [
        ("delegate", "approved", "uwf-subflow solve-issue"), ("announcer", "posted", "uwf-mock")]
    assert log[0]["output"] == {"status": "approved"}
    assert log[0]["edgePrompt"] == f"Solve: {PROMPT}"

    threads = kit.ok("thread", "list", "--all")
    assert len(threads) == 2
    child = next(t for t in threads if t["thread"] != parent)
    assert child["workflow"] == child_workflow
    assert child["done"] is True
    # The parent step's detail is the child's terminal StepNode.
    terminal = log[0]["detail"]
    assert child["head"] == terminal
    node = kit.node(terminal)
    assert node["type"] == kit.schema_hash("StepNode")
    assert node["payload"]["role"] == "reviewer"
    assert kit.payload(node["payload"]["output"]) == {"status": "approved"}
    assert kit.payload(node["payload"]["start"]) == {"workflow": child_workflow,
                                                     "prompt": f"Solve: {PROMPT}"}
    repos = {e["subject"]: e["data"]["repo"] for e in kit.events("thread.started")}
    assert repos[f"thread/{child['thread']}"] == repos[f"thread/{parent}"]
    child_log = kit.log(child["thread"])
    assert [e["role"] for e in child_log] == \
        ["planner", "developer", "reviewer", "developer", "reviewer"]
    assert child_log[-1]["hash"] == terminal
    assert child_log[0]["edgePrompt"] == f"Solve: {PROMPT}"
    walked = cli.cas("walk", kit.show(parent)["head"])
    assert walked.code == 0
    assert terminal in walked.out
    assert kit.ok("log", "verify")["ok"] is True
    assert kit.ok("registry", "verify")["ok"] is True


def test_subflow_fails_when_the_child_fails(cli: Cli, tmp_path: Path) -> None:
    script = {"planner": MOCK_SCRIPT["planner"], "announcer": [{"status": "posted", "note": "x"}]}
    kit, parent, _ = subflow_kit(cli, tmp_path, script)  # no developer outputs: child fails
    before = kit.show(parent)
    one_line_error(kit.step(parent), 1, "step failed (exit)", "uwf-subflow")
    as_before_but_failed(kit, parent, before, "exit")
    failed = kit.events("thread.step_failed")
    assert [(f["data"]["role"], f["data"]["reason"]) for f in failed] == \
        [("developer", "exit"), ("delegate", "exit")]


@pytest.mark.cli_processes  # nested uwf-subflow agents under a time limit
def test_a_subflow_of_itself_stops_at_the_nesting_limit(cli: Cli, tmp_path: Path) -> None:
    """A workflow whose role is played by a subflow of itself recursed without bound;
    now the subflow nested --max-depth deep fails its step at once, naming the depth,
    and every level above fails in turn, each child thread left to inspect."""
    kit = make_kit(cli, tmp_path)
    mock = kit.mock_script({**MOCK_SCRIPT, "announcer": [{"status": "posted", "note": "x"}]})
    kit.write_config(mock_config(
        mock, agents={"mock": {"command": "uwf-mock", "args": [str(mock)]},
                      "self": {"command": "uwf-subflow",
                               "args": ["--max-depth", "3", "ship-feature"]}},
        agentOverrides={"ship-feature": {"delegate": "self"}}))
    kit.put_workflow(kit.workflow_file(PARENT, "parent.yaml"))
    parent = kit.start("ship-feature", PROMPT)
    one_line_error(kit.step(parent, timeout=120), 1, "step failed (exit)", "uwf-subflow")
    threads = kit.ok("thread", "list", "--all")
    assert len(threads) == 4  # the parent, and a child at each of the 3 levels allowed
    failed = [event["data"] for event in kit.events("thread.step_failed")]
    assert [item["role"] for item in failed] == ["delegate"] * 4
    assert "subflow nesting depth 3 reached" in failed[0]["message"]
    assert "raise --max-depth" in failed[0]["message"]
    assert kit.ok("log", "verify")["ok"] is True


def test_console_scripts_show_help(cli: Cli) -> None:
    for prog in ("uwf-mock", "uwf-exec", "uwf-llm", "uwf-subflow"):
        shown = cli.run("--help", prog=prog)
        assert shown.code == 0, shown
        assert prog in shown.out
        bare = cli.run(prog=prog)
        assert bare.code == 2, bare
    assert (BIN / "uwf-mock").exists()


def test_subflow_timeout_kills_the_child_threads_agent(cli: Cli, tmp_path: Path) -> None:
    """The parent step's timeout must end the whole agent tree, child agents included."""
    kit = make_kit(cli, tmp_path)
    pid_file = tmp_path / "grandchild.pid"
    sleeper = kit.agent("child-sleeper", f'''
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(120)
    ''')
    mock = kit.mock_script(MOCK_SCRIPT, "both.yaml")
    kit.write_config(mock_config(
        mock, agents={"mock": {"command": "uwf-mock", "args": [str(mock)]},
                      "sleeper": {"command": str(sleeper)},
                      "sub": {"command": "uwf-subflow", "args": ["solve-issue"]}},
        agentOverrides={"ship-feature": {"delegate": "sub"},
                        "solve-issue": {"planner": "sleeper"}}))
    kit.put_workflow(EXAMPLE)
    kit.put_workflow(kit.workflow_file(PARENT, "parent.yaml"))
    parent = kit.start("ship-feature", PROMPT)
    grandchild = 0
    try:
        one_line_error(kit.step(parent, "--timeout", "3"), 1, "step failed (timeout)")
        grandchild = int(wait_for(pid_file))
        assert wait_dead(grandchild), "the child thread's agent outlived the parent's timeout"
    finally:
        if not grandchild and pid_file.exists():
            grandchild = int(pid_file.read_text() or "0")
        if grandchild:
            kill_quietly(grandchild)
