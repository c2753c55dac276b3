"""`uwf dashboard`'s routes with Starlette's test client, on real stores made with the
CLI and uwf-mock: every page and its JSON twin (the CLI's `--json` payloads, compared
directly), empty and many-run stores, a missing CAS node, escaping, the token, the
read-only guard and the headers; the live stream on a real uvicorn."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.dashkit import XSS, Fleet, context_of, make_fleet, new_cli, served
from tests.threadkit import make_kit

pytest.importorskip("starlette")  # the `dashboard` extra; `dev` installs it, so CI never skips
from starlette.testclient import TestClient

from uwf.dashboard.app import create_app

NOW = "2030-01-01T00:00:00.000Z"  # one reading clock for the page and the CLI
PAGES = ["/runs", "/queue", "/history", "/log", "/verify"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def client(fleet: Fleet) -> Iterator[TestClient]:
    with TestClient(create_app(context_of(fleet.cli, UWF_NOW=NOW))) as client:
        yield client


def _json(client: TestClient, url: str) -> Any:
    response = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert response.headers["content-type"] == "application/json"
    return response.json()


def _cli_json(cli: Cli, *args: str, lines: bool = False) -> Any:
    """What `uwf ARGS --json` prints (with `lines`, a streaming command's JSON lines as a
    list)."""
    result = cli.run(*args, "--json", "--now", NOW)
    assert result.code in (0, 1), result
    if lines:
        return [json.loads(line) for line in result.out.splitlines()]
    return json.loads(result.out)


# -- pages -----------------------------------------------------------------------------------

def test_an_empty_store_has_every_page_and_its_twin(tmp_path: Path) -> None:
    cli = new_cli(tmp_path)
    with TestClient(create_app(context_of(cli))) as client:
        home = client.get("/", follow_redirects=False)
        assert home.status_code == 302
        assert home.headers["location"] == "/runs"
        for page in PAGES:
            response = client.get(page)
            assert response.status_code == 200, (page, response.text)
            assert "text/html" in response.headers["content-type"]
            assert 'src="/static/dashboard.js"' in response.text
        assert "No runs." in client.get("/runs").text
        assert "The queue is empty." in client.get("/queue").text
        assert _json(client, "/runs")["run search"]["total"] == 0
        assert _json(client, "/queue")["queue list"]["entries"] == []
        assert _json(client, "/history")["history"]["runs"] == []
        assert _json(client, "/log")["log tail"] == []
        twin = _json(client, "/verify")
        assert twin["log verify"]["ok"] is True
        assert twin["registry verify"]["ok"] is True
        missing = client.get("/runs/01J7K9M2XNPQR5VWBCDF8G3H4T")
        assert missing.status_code == 404
        # The page says it in its own words; the twin holds the command's line.
        assert ('<p class="error">no run 01J7K9M2XNPQR5VWBCDF8G3H4T; find runs on the Runs '
                'page</p>') in missing.text
        assert client.get("/runs/01J7K9M2XNPQR5VWBCDF8G3H4T", params={"format": "json"}
                          ).json()["run show"] == {
            "error": "uwf: error: no run 01J7K9M2XNPQR5VWBCDF8G3H4T; find runs with "
                     "`uwf run search`", "exitCode": 1}
        bad = client.get("/runs", params={"limit": "many"})
        assert bad.status_code == 400
        assert ("<p class=\"error\">per page: must be an integer, not &#34;many&#34;; change "
                "it and try again</p>") in bad.text
        assert "--limit" not in bad.text
        assert "--limit" in _json(client, "/runs?limit=many")["run search"]["error"]


def test_the_runs_page_lists_runs_with_the_lifecycle_bar(client: TestClient,
                                                          fleet: Fleet) -> None:
    page = client.get("/runs").text
    assert fleet.done in page
    assert fleet.failed in page
    assert 'class="seg completed"' in page
    assert 'class="seg failed"' in page
    assert "1 failed" in page
    assert "1 completed" in page
    failed = client.get("/runs", params={"status": "failed"}).text
    assert fleet.failed in failed
    assert fleet.done not in failed
    found = client.get("/runs", params={"text": "login"}).text
    assert fleet.done in found
    assert fleet.failed not in found
    assert "No runs match these filters." in client.get("/runs", params={"repo": "/nowhere"}).text


def test_the_verify_page_names_a_missing_head_beside_matching_views(tmp_path: Path) -> None:
    """`registry verify` checks the open threads' heads (`registry show` no longer
    does): the page says the views match a replay and the verdict still fails."""
    kit = make_kit(new_cli(tmp_path), tmp_path)
    kit.cli.env["UWF_NODES"] = "loose"  # the older layout: loose node files
    kit.put_workflow()
    thread = kit.start()
    head = kit.ok("thread", "step", thread)["head"]
    [node] = list((kit.home / "cas").rglob(f"{head}.json"))
    node.unlink()
    with TestClient(create_app(context_of(kit.cli))) as client:
        page = client.get("/verify").text
        twin = _json(client, "/verify")["registry verify"]
    assert ('<p class="verdict failed">FAILED: the views match a replay of the log; '
            "the head nodes of 1 open thread checked: 1 missing from the CAS, 0 damaged</p>"
            in page), page
    assert twin["heads"]["missing"] == [{"thread": thread, "head": head}]


def test_a_run_page_has_its_graph_steps_and_path(client: TestClient, fleet: Fleet) -> None:
    page = client.get(f"/runs/{fleet.done}").text
    assert '<span class="badge completed">completed</span>' in page
    assert '<svg class="graph"' in page
    taken = re.findall(r'<g class="edge taken" data-source="([^"]+)" data-target="([^"]+)"',
                       page)
    assert sorted(taken) == sorted([("$START", "planner"), ("planner", "developer"),
                                    ("developer", "reviewer"), ("reviewer", "developer"),
                                    ("reviewer", "$END")])
    assert 'data-source="planner" data-target="$END"' in page  # drawn, not taken
    assert page.count('<li class="step"') == 5
    assert "Reject empty passwords in login()" in page  # the planner's output
    assert "Fix: Add a test for the empty password" in page  # an edge prompt
    failed = client.get(f"/runs/{fleet.failed}").text
    assert '<span class="badge failed">failed</span>' in failed
    assert "No steps yet." in failed


def test_a_failed_run_page_leads_with_why_and_lists_its_attempts(client: TestClient,
                                                                  fleet: Fleet) -> None:
    page = client.get(f"/runs/{fleet.failed}").text
    lead = page.index('<div class="failure" role="alert" id="failure">')
    assert lead < page.index('<dl class="record">')  # before the record: why comes first
    assert "<strong>failed</strong>: exit (planner) — agent exited with status 1" in page
    assert ", exit status 1</p>" in page
    assert page.count('<tr class="attempt failed"') == 1
    twin = _json(client, f"/runs/{fleet.failed}")["run show"]["run"]
    assert twin["lastFailure"]["reason"] == "exit"
    done = client.get(f"/runs/{fleet.done}").text  # never failed: neither section
    assert 'id="failure"' not in done
    assert "<h2>Attempts</h2>" not in done


def test_the_queue_page_shows_entries_leases_and_why_they_wait(client: TestClient,
                                                                fleet: Fleet) -> None:
    page = client.get("/queue").text
    for status, entry in fleet.entries.items():
        assert re.search(rf'{entry}</td>\s*<td><span class="badge {status}">', page), status
    twin = _json(client, "/queue")
    leased = next(e for e in twin["queue list"]["entries"] if e["status"] == "leased")
    assert leased["lease"]["expiresAt"] in page
    reasons = {skip["reason"] for skip in twin["sched plan"]["skipped"]}
    assert {"leased", "parked"} <= reasons
    assert "tests fail" in page  # the parked entry's reason
    counts = twin["queue counts"]
    assert counts["statuses"] == {"ready": 1, "leased": 1, "drained": 0, "parked": 1,
                                  "cancelled": 0, "waiting": 0}
    for state, count in counts["statuses"].items():
        assert f'<span class="badge {state}">{state}</span> <strong>{count}</strong>' in page
    assert (f"In the last 60 min: <strong>{counts['finished']}</strong> finished, "
            f"<strong>{counts['added']}</strong> added") in page
    assert '<form class="action"' not in page  # no token: read-only
    assert "parked" in client.get("/queue", params={"status": "parked"}).text


def test_history_log_and_verify_pages(client: TestClient, fleet: Fleet) -> None:
    history = client.get("/history").text
    assert history.index(fleet.failed) < history.index(fleet.done)  # newest first
    log = client.get("/log", params={"type": "queue."}).text
    assert "queue.added" in log
    assert "thread.started" not in log
    assert 'data-live="append"' in log
    assert "/log/stream?type=queue." in log
    verify = client.get("/verify").text
    assert verify.count('<p class="verdict ok">') == 2


def test_every_twin_is_the_clis_json(client: TestClient, fleet: Fleet) -> None:
    cli = fleet.cli
    runs = _json(client, "/runs?status=failed&limit=5")
    assert runs["run search"] == _cli_json(cli, "run", "search", "--status", "failed",
                                           "--limit", "5")
    assert runs["run counts"] == _cli_json(cli, "run", "counts")
    run = _json(client, f"/runs/{fleet.done}")
    assert run["run show"] == _cli_json(cli, "run", "show", fleet.done)
    assert run["thread log"] == _cli_json(cli, "thread", "log", fleet.done, lines=True)
    workflow = run["run show"]["run"]["workflow"]["hash"]
    assert run["workflow show"] == _cli_json(cli, "workflow", "show", workflow)
    queue = _json(client, "/queue?session=s1")
    assert queue["queue list"] == _cli_json(cli, "queue", "list", "--session", "s1",
                                            "--limit", "100")
    assert queue["sched plan"] == _cli_json(cli, "sched", "plan")
    assert queue["queue counts"] == _cli_json(cli, "queue", "counts")
    assert _json(client, "/history")["history"] == _cli_json(cli, "history")
    assert _json(client, "/log?n=7&type=thread.")["log tail"] == _cli_json(
        cli, "log", "tail", "-n", "7", "--type", "thread.", lines=True)
    verify = _json(client, "/verify")
    assert verify["log verify"] == _cli_json(cli, "log", "verify")
    assert verify["registry verify"] == _cli_json(cli, "registry", "verify")


def test_a_prompt_s_script_renders_as_text(client: TestClient, fleet: Fleet) -> None:
    for url in ("/runs", f"/runs/{fleet.done}", "/history"):
        page = client.get(url).text
        assert "<script>alert" not in page, url
        assert "&lt;script&gt;alert(" in page, url
    assert _json(client, f"/runs/{fleet.done}")["run show"]["run"]["title"] == XSS


# -- many runs, missing nodes --------------------------------------------------------------

def test_pages_of_many_runs(tmp_path: Path) -> None:
    kit = make_kit(new_cli(tmp_path), tmp_path)
    kit.put_workflow()
    started = [kit.start(prompt=f"task {number}") for number in range(250)]
    with TestClient(create_app(context_of(kit.cli))) as client:
        first = client.get("/runs").text
        assert first.count('<a class="id" href="/runs/') == 50
        assert "250 runs; showing 1\u201350" in first
        assert 'rel="next" href="?offset=50"' in first
        assert 'rel="prev"' not in first
        last = client.get("/runs", params={"limit": "100", "offset": "200"}).text
        assert last.count('<a class="id" href="/runs/') == 50
        assert "250 runs; showing 201\u2013250" in last
        assert 'rel="prev" href="?limit=100&amp;offset=100"' in last
        assert 'rel="next"' not in last
        twin = _json(client, "/runs?limit=100&offset=200")["run search"]
        assert twin == _cli_json(kit.cli, "run", "search", "--limit", "100", "--offset", "200")
        assert sorted(run["runId"] for run in twin["runs"]) == sorted(started)[200:]
        assert twin["total"] == 250
        beyond = _json(client, "/runs?offset=1000")["run search"]
        assert beyond["runs"] == []
        assert beyond["total"] == 250


def test_a_missing_node_is_shown_missing_never_live(tmp_path: Path) -> None:
    from uwf.cas.backends import node_path

    kit = make_kit(new_cli(tmp_path), tmp_path)
    kit.cli.env["UWF_NODES"] = "loose"  # the older layout: loose node files
    kit.put_workflow()
    thread = kit.start()
    kit.ok("thread", "run", thread)
    head = kit.ok("run", "show", thread)["run"]["head"]
    with TestClient(create_app(context_of(kit.cli))) as client:
        assert '<span class="badge completed">' in client.get(f"/runs/{thread}").text
        os.remove(node_path(str(kit.home / "cas"), head))  # while the server runs
        page = client.get(f"/runs/{thread}")
        assert page.status_code == 200
        assert "<strong>missing</strong>" in page.text
        assert f"<code>{head}</code>" in page.text
        assert '<span class="badge completed">' not in page.text
        assert '<span class="badge missing">missing</span> (last known: completed)' in page.text
        assert 'class="record last-known"' in page.text
        twin = _json(client, f"/runs/{thread}")
        assert twin["run show"]["found"] is False
        assert twin["run show"]["missingNodes"] == [head]
        assert twin["thread log"]["exitCode"] != 0  # its steps cannot be read either


# -- safety ------------------------------------------------------------------------------------

def test_anything_but_get_is_refused(client: TestClient) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
        for url in ("/runs", "/nowhere", "/static/dashboard.js", "/log/stream"):
            response = client.request(method, url)
            assert response.status_code == 405, (method, url)
            assert response.headers["allow"] == "GET, HEAD"


def test_every_answer_has_the_security_headers(client: TestClient) -> None:
    for url in ("/runs", "/runs?format=json", "/static/dashboard.css", "/nowhere"):
        response = client.get(url)
        csp = response.headers["content-security-policy"]
        assert "default-src 'none'" in csp, url
        assert "script-src 'self'" in csp, url
        assert "'unsafe-inline'" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        # same-origin: an action's form says it came from here; other sites learn nothing
        assert response.headers["referrer-policy"] == "same-origin"
    assert client.post("/runs").headers["x-content-type-options"] == "nosniff"
    page = client.get("/runs").text
    assert "<script>" not in page
    assert " style=" not in page


def test_the_static_files_ship(client: TestClient) -> None:
    script = client.get("/static/dashboard.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert "EventSource" in script.text
    assert client.get("/static/dashboard.css").status_code == 200


def test_a_token_is_needed_on_every_request(fleet: Fleet) -> None:
    app = create_app(context_of(fleet.cli), token="s3cret-token")
    with TestClient(app) as client:
        for url in ("/runs", "/runs?format=json", "/static/dashboard.js", "/log/stream"):
            assert client.get(url).status_code == 401, url
        assert client.get("/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/runs", params={"token": "wrong"}).status_code == 401
        bearer = client.get("/runs", headers={"Authorization": "Bearer s3cret-token"})
        assert bearer.status_code == 200
        once = client.get("/runs?status=failed&token=s3cret-token", follow_redirects=False)
        assert once.status_code == 303
        assert once.headers["location"] == "/runs?status=failed"  # the token is not kept
        cookie = once.headers["set-cookie"]
        assert "httponly" in cookie.lower()
        assert "samesite=strict" in cookie.lower()
        assert "s3cret-token" not in cookie
        assert client.get("/runs").status_code == 200  # the cookie carries it now
        assert client.get("/runs/" + fleet.done).status_code == 200
        assert client.post("/runs").status_code == 405


def test_a_loopback_server_without_a_token_answers_only_loopback_names(fleet: Fleet) -> None:
    app = create_app(context_of(fleet.cli), allowed_hosts=["127.0.0.1", "localhost"])
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.get("/runs").status_code == 200
        assert client.get("/runs", headers={"Host": "evil.example"}).status_code == 400


def test_the_command_refuses_an_open_address_without_a_token(cli: Cli) -> None:
    refused = cli.run("dashboard", "--host", "0.0.0.0", "--port", "0")
    assert refused.code == 2
    assert refused.out == ""
    assert refused.err.splitlines() == [
        "uwf: error: --host 0.0.0.0 is not loopback and no token is set; give --token (or "
        "UWF_DASHBOARD_TOKEN), or serve on 127.0.0.1"]
    with_token = cli.run("dashboard", "--host", "0.0.0.0", "--port", "0", "--token", "t",
                         "--check", "--json")
    assert with_token.code == 0, with_token
    assert json.loads(with_token.out)["url"].startswith("http://0.0.0.0:")
    cli.env["UWF_DASHBOARD_TOKEN"] = "from-the-environment"
    assert cli.run("dashboard", "--host", "0.0.0.0", "--port", "0", "--check").code == 0


def test_without_the_extra_the_command_names_it(cli: Cli) -> None:
    """A process where starlette cannot be imported (as without the extra)."""
    probe = ("import sys\nsys.modules['starlette'] = None\n"
             "from uwf.cli.main import main\nsys.exit(main(['dashboard', '--check']))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=cli.env, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "uwf: error: `uwf dashboard` needs starlette, which is not installed; "
        "pip install 'uwf[dashboard]'"]


def test_the_cli_does_not_load_the_dashboard_s_libraries() -> None:
    probe = ("import sys, contextlib, io\nfrom uwf.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])\n"
             "print(sorted(m for m in ('starlette', 'jinja2', 'uvicorn', 'uwf.dashboard.app')"
             " if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


# -- live ----------------------------------------------------------------------------------------

def test_the_stream_sends_an_event_appended_after_it_opened(fleet: Fleet) -> None:
    import httpx

    cli = fleet.cli
    head = _cli_json(cli, "log", "tail", "-n", "1", lines=True)[0]["seq"]
    with served(create_app(context_of(cli))) as base, httpx.stream(
            "GET", f"{base}/log/stream", params={"after": head, "type": "queue."},
            timeout=20) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "default-src 'none'" in response.headers["content-security-policy"]
        lines = response.iter_lines()
        assert next(lines).startswith("retry:")
        added = cli.processes().run("queue", "add", "--workflow", "solve-issue", "-p", "live one",
                        "--json")
        assert added.code == 0, added
        event = _next_event(lines)
        assert event["type"] == "queue.added"
        assert event["subject"] == f"queue/{json.loads(added.out)['entry']['id']}"
        assert event["seq"] > head


def test_a_reconnect_resumes_after_the_last_event_id(fleet: Fleet) -> None:
    import httpx

    cli = fleet.cli
    events = _cli_json(cli, "log", "tail", "-n", "3", lines=True)
    with served(create_app(context_of(cli))) as base, httpx.stream(
            "GET", f"{base}/log/stream", headers={"Last-Event-ID": str(events[0]["seq"])},
            timeout=20) as response:
        lines = response.iter_lines()
        got = [_next_event(lines)["seq"], _next_event(lines)["seq"]]
        assert got == [events[1]["seq"], events[2]["seq"]]


def _next_event(lines: Iterator[str]) -> Any:
    """The data of the next `event: log` of a server-sent event stream."""
    kind = None
    for line in lines:
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: ") and kind == "log":
            return json.loads(line.removeprefix("data: "))
    raise AssertionError("the stream ended")
