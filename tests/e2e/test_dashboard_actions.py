"""The dashboard's actions (docs/dashboard.md, Actions): refused without a token (the
dashboard is read-only), without the session's token, cross-origin and without the
form's CSRF token, each refusal leaving the log as it was; and each action writes
exactly what its CLI command writes: the same action taken through the dashboard on
one copy of a store and with the CLI on another, the lines each appended compared
with ids masked. On real stores made with the CLI and uwf-mock."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.dashkit import Fleet, context_of, make_fleet

pytest.importorskip("starlette")  # the `dashboard` extra; `dev` installs it
from starlette.testclient import TestClient

from uwf.dashboard.app import create_app

NOW = "2030-01-01T00:00:00.000Z"  # one clock for the dashboard and the CLI
TOKEN = "s3cret-token-for-actions"
ORIGIN = "http://testserver"  # the test client's own origin
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
HEX = re.compile(r"\b[0-9a-f]{16,}\b")


@dataclass
class Template:
    """A store made once, copied for each test: the fleet and a run not yet ended."""

    fleet: Fleet
    root: Path
    fresh: str  # a run started, no step taken


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("actions")
    fleet = make_fleet(root)
    fresh = fleet.kit.start(prompt="Kill me")
    return Template(fleet, root, fresh)


def copy_of(template: Template, into: Path) -> Cli:
    """A copy of the template's store and config, its environment pointing at it."""
    shutil.copytree(template.root, into)
    old = str(template.root)
    env = {key: value.replace(old, str(into)) for key, value in template.fleet.cli.env.items()}
    env["UWF_NOW"] = NOW
    return Cli(into / "store", env)


@pytest.fixture
def two(template: Template, tmp_path: Path) -> tuple[Cli, Cli]:
    """Two identical copies: one for the dashboard, one for the CLI."""
    return copy_of(template, tmp_path / "web"), copy_of(template, tmp_path / "cli")


@pytest.fixture
def web(two: tuple[Cli, Cli]) -> Iterator[TestClient]:
    """A dashboard with a token over the first copy, its session cookie set."""
    with TestClient(create_app(context_of(two[0]), token=TOKEN)) as client:
        assert client.get(f"/runs?token={TOKEN}", follow_redirects=False).status_code == 303
        yield client


def csrf_of(client: TestClient, page: str, action: str) -> str:
    """The CSRF token of the form that posts to `action` on `page` (it must be there)."""
    html = client.get(page).text
    form = re.search(rf'<form class="action" method="post" action="{re.escape(action)}">\s*'
                     r'<input type="hidden" name="csrf" value="([0-9a-f]+)">', html)
    assert form is not None, (action, html)
    return form[1]


def appended(cli: Cli, before: bytes) -> list[Any]:
    """The lines appended since `before`, parsed, ids and hashes masked."""
    after = cli.log_bytes()
    assert after.startswith(before)
    lines = after[len(before):].decode("utf-8").splitlines()
    return [json.loads(HEX.sub("<hash>", ULID.sub("<id>", line))) for line in lines]


def entries_of(cli: Cli) -> dict[str, str]:
    listed = json.loads(cli.run("queue", "list", "--json").out)["entries"]
    return {entry["status"]: entry["id"] for entry in listed}


# -- each action writes what its command writes ----------------------------------------------

def _same_as_cli(two: tuple[Cli, Cli], web: TestClient, page: str, action: str, *,
                 form: dict[str, str], argv: list[str]) -> list[Any]:
    web_cli, cli = two
    before_web, before_cli = web_cli.log_bytes(), cli.log_bytes()
    assert before_web == before_cli  # two copies of one store
    posted = web.post(action, data={"csrf": csrf_of(web, page, action), **form},
                      headers={"Origin": ORIGIN}, follow_redirects=False)
    assert posted.status_code == 303, posted.text
    done = cli.run(*argv, "--json")
    assert done.code == 0, done
    written = appended(web_cli, before_web)
    assert written, "the action wrote nothing"
    assert written == appended(cli, before_cli)
    return written


def test_cancel_writes_what_queue_cancel_writes(two: tuple[Cli, Cli], web: TestClient) -> None:
    ready = entries_of(two[0])["ready"]
    written = _same_as_cli(two, web, "/queue", f"/queue/{ready}/cancel",
                           form={"reason": "not needed"},
                           argv=["queue", "cancel", ready, "--reason", "not needed"])
    assert [line["type"] for line in written] == ["queue.cancelled"]
    assert written[0]["data"]["reason"] == "not needed"
    assert entries_of(two[0]).get("cancelled") == ready


def test_retry_writes_what_sched_reset_writes(two: tuple[Cli, Cli], web: TestClient) -> None:
    parked = entries_of(two[0])["parked"]
    written = _same_as_cli(two, web, "/queue", f"/queue/{parked}/retry", form={},
                           argv=["sched", "reset", parked])
    assert [line["type"] for line in written] == ["queue.reset"]


def test_rerun_writes_what_run_rerun_writes(two: tuple[Cli, Cli], web: TestClient,
                                            template: Template) -> None:
    failed = template.fleet.failed
    before = two[0].log_bytes()
    written = _same_as_cli(two, web, f"/runs/{failed}", f"/runs/{failed}/rerun",
                           form={"reason": "try again"},
                           argv=["run", "rerun", failed, "--reason", "try again"])
    assert "run.rerun_linked" in [line["type"] for line in written]
    # The page it leads to is the new run's.
    new_run = json.loads(two[0].log_bytes()[len(before):].splitlines()[0])["subject"]
    assert new_run.startswith("thread/")


def test_kill_writes_what_thread_kill_writes(two: tuple[Cli, Cli], web: TestClient,
                                            template: Template) -> None:
    fresh = template.fresh
    written = _same_as_cli(two, web, f"/runs/{fresh}", f"/runs/{fresh}/kill",
                           form={"reason": "superseded"},
                           argv=["thread", "kill", fresh, "--reason", "superseded"])
    assert [line["type"] for line in written] == ["thread.ended"]


def test_a_done_action_leads_to_its_result(two: tuple[Cli, Cli], web: TestClient,
                                           template: Template) -> None:
    failed = template.fleet.failed
    action = f"/runs/{failed}/rerun"
    posted = web.post(action, data={"csrf": csrf_of(web, f"/runs/{failed}", action)},
                      headers={"Origin": ORIGIN}, follow_redirects=False)
    assert posted.status_code == 303
    new_page = posted.headers["location"]
    assert re.fullmatch(r"/runs/[0-9A-HJKMNP-TV-Z]{26}", new_page), new_page
    shown = web.get(new_page).text
    assert f'<a class="id" href="/runs/{failed}">{failed}</a>' in shown  # its provenance


# -- refusals ------------------------------------------------------------------------------

def test_a_command_s_refusal_is_said_in_the_page_s_words(two: tuple[Cli, Cli],
                                                         web: TestClient,
                                                         template: Template) -> None:
    """Retrying an entry that is not parked: the command's own refusal (409), said as the
    page says it, nothing written; the JSON answer is the command's line."""
    ready = entries_of(two[0])["ready"]
    before = two[0].log_bytes()
    action = f"/queue/{ready}/retry"
    csrf = csrf_of(web, "/queue", f"/queue/{entries_of(two[0])['parked']}/retry")
    refused = web.post(action, data={"csrf": csrf}, headers={"Origin": ORIGIN})
    assert refused.status_code == 409
    assert "<h1>Retry refused</h1>" in refused.text
    assert (f'<p class="error" role="alert">queue entry {ready} is ready, not parked; only a '
            "parked entry is reset</p>") in refused.text
    assert "uwf: error" not in refused.text
    cli = two[1].run("sched", "reset", ready)
    assert cli.code == 1
    assert cli.err.strip() == (f"uwf: error: queue entry {ready} is ready, not parked; only a "
                               "parked entry is reset")
    as_json = web.post(action + "?format=json", data={"csrf": csrf},
                       headers={"Origin": ORIGIN})
    assert as_json.status_code == 409
    assert as_json.json() == {"sched reset": {"error": cli.err.strip(), "exitCode": 1}}
    killed = web.post(f"/runs/{template.fleet.done}/kill", data={"csrf": csrf},
                      headers={"Origin": ORIGIN})
    assert killed.status_code == 409
    assert f"thread {template.fleet.done} has already ended; nothing to kill" in killed.text
    assert two[0].log_bytes() == before


def test_without_a_token_the_dashboard_takes_no_action(two: tuple[Cli, Cli],
                                                       template: Template) -> None:
    cli = two[0]
    before = cli.log_bytes()
    ready = entries_of(cli)["ready"]
    with TestClient(create_app(context_of(cli))) as client:
        assert '<form class="action"' not in client.get("/queue").text
        assert '<form class="action"' not in client.get(f"/runs/{template.fleet.failed}").text
        for action in (f"/queue/{ready}/cancel", f"/runs/{template.fleet.failed}/rerun",
                       f"/runs/{template.fresh}/kill"):
            refused = client.post(action, data={"reason": "x"}, headers={"Origin": ORIGIN})
            assert refused.status_code == 405, action
            assert "read-only" in refused.text
    assert cli.log_bytes() == before


def test_an_action_without_the_token_is_refused(two: tuple[Cli, Cli]) -> None:
    cli = two[0]
    before = cli.log_bytes()
    ready = entries_of(cli)["ready"]
    with TestClient(create_app(context_of(cli), token=TOKEN)) as client:
        for headers in ({"Origin": ORIGIN}, {"Origin": ORIGIN, "Authorization": "Bearer no"}):
            refused = client.post(f"/queue/{ready}/cancel", data={"csrf": "0" * 64},
                                  headers=headers)
            assert refused.status_code == 401
        client.cookies.set("uwf_dashboard", "nonce." + "0" * 64)
        forged = client.post(f"/queue/{ready}/cancel", headers={"Origin": ORIGIN})
        assert forged.status_code == 401
    assert cli.log_bytes() == before


def test_an_action_from_another_origin_is_refused(two: tuple[Cli, Cli],
                                                  web: TestClient) -> None:
    cli = two[0]
    before = cli.log_bytes()
    ready = entries_of(cli)["ready"]
    action = f"/queue/{ready}/cancel"
    csrf = csrf_of(web, "/queue", action)
    for headers in ({"Origin": "http://evil.example"},
                    {"Origin": "null"},
                    {"Referer": "http://evil.example/queue"},
                    {"Origin": "https://testserver"},  # another scheme: another origin
                    {}):  # a browser's form says where it came from; this one does not
        refused = web.post(action, data={"csrf": csrf}, headers=headers)
        assert refused.status_code == 403, headers
        assert "another origin" in refused.text
    assert cli.log_bytes() == before
    # A Referer from the dashboard's own page is enough when there is no Origin.
    done = web.post(action, data={"csrf": csrf}, headers={"Referer": f"{ORIGIN}/queue"},
                    follow_redirects=False)
    assert done.status_code == 303
    assert entries_of(cli).get("cancelled") == ready


def test_an_action_without_the_session_s_csrf_token_is_refused(two: tuple[Cli, Cli],
                                                              web: TestClient) -> None:
    cli = two[0]
    before = cli.log_bytes()
    ready = entries_of(cli)["ready"]
    action = f"/queue/{ready}/cancel"
    for form in ({}, {"csrf": ""}, {"csrf": "0" * 64}):
        refused = web.post(action, data=form, headers={"Origin": ORIGIN})
        assert refused.status_code == 403, form
        assert "not this session's" in refused.text
    # Another session's token (a new cookie: the old page's form is not its own).
    csrf = csrf_of(web, "/queue", action)
    web.cookies.clear()
    assert web.get(f"/queue?token={TOKEN}", follow_redirects=False).status_code == 303
    assert web.post(action, data={"csrf": csrf}, headers={"Origin": ORIGIN}).status_code == 403
    assert cli.log_bytes() == before


def test_a_script_with_the_bearer_token_needs_no_form(two: tuple[Cli, Cli]) -> None:
    """No cookie, no Origin, no Referer: not a browser, so no other site sent it."""
    cli = two[0]
    ready = entries_of(cli)["ready"]
    with TestClient(create_app(context_of(cli), token=TOKEN)) as client:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        done = client.post(f"/queue/{ready}/cancel?format=json", data={"reason": "script"},
                           headers=bearer)
        assert done.status_code == 200, done.text
        assert done.json()["queue cancel"]["status"] == "cancelled"
        crossed = client.post(f"/queue/{ready}/cancel", headers={
            **bearer, "Origin": "http://evil.example"})
        assert crossed.status_code == 403


def test_a_form_too_long_or_not_a_form_is_refused(two: tuple[Cli, Cli],
                                                 web: TestClient) -> None:
    cli = two[0]
    before = cli.log_bytes()
    ready = entries_of(cli)["ready"]
    action = f"/queue/{ready}/cancel"
    csrf = csrf_of(web, "/queue", action)
    long = web.post(action, data={"csrf": csrf, "reason": "x" * 20_000},
                    headers={"Origin": ORIGIN})
    assert long.status_code == 400
    assert "the form could not be read" in long.text
    garbled = web.post(action, content=b"\xff\xfe", headers={
        "Origin": ORIGIN, "Content-Type": "application/x-www-form-urlencoded"})
    assert garbled.status_code == 400
    unknown = web.post(f"/queue/{ready}/frob", data={"csrf": csrf}, headers={"Origin": ORIGIN})
    assert unknown.status_code == 404
    assert cli.log_bytes() == before
