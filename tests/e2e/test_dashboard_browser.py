"""`uwf dashboard` in a real browser: Playwright driving Debian's `chromium` (headless,
through its executable path; .ci/run installs it) against a real uvicorn, on a store
with a finished run, a failed run and a queue. The visible text, the SVG graph, a
step and an event appearing without a reload, no script error or CSP violation, and
the screenshots docs/ and the README show (docs/img/)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashkit import Fleet, context_of, make_fleet, served

ROOT = Path(__file__).resolve().parents[2]
# The screenshots the README and docs/dashboard.md show are refreshed on demand
# (UPDATE_SCREENSHOTS=1: ids and times change each run); otherwise they go to a temp folder.
SHOTS = (ROOT / "docs" / "img" if os.environ.get("UPDATE_SCREENSHOTS") == "1"
         else Path(tempfile.mkdtemp(prefix="uwf-shots-")))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _needed(what: str) -> None:
    """Under CI a missing browser or library fails; elsewhere the test is skipped."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing: .ci/run installs it")
    pytest.skip(f"{what} is not installed")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _needed("playwright (the dev extra)")
    if CHROMIUM is None:
        _needed("chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("browser"))


@pytest.fixture
def base(fleet: Fleet) -> Iterator[str]:
    from uwf.dashboard.app import create_app

    with served(create_app(context_of(fleet.cli))) as url:
        yield url


@pytest.fixture
def page(browser: Any, base: str) -> Iterator[Any]:
    """A page closed before the server stops (`base`)."""
    context = browser.new_context(viewport={"width": 1200, "height": 860})
    opened = context.new_page()
    problems: list[str] = []
    opened.on("console", lambda message: problems.append(message.text)
              if message.type == "error" else None)
    opened.on("pageerror", lambda error: problems.append(str(error)))
    yield opened
    context.close()
    assert problems == []  # no script error, nothing the CSP refused


def test_the_runs_page_shows_the_runs_and_their_lifecycles(page: Any, base: str,
                                                           fleet: Fleet) -> None:
    page.goto(f"{base}/")  # redirected to /runs
    assert page.url == f"{base}/runs"
    text = page.inner_text("main")
    assert fleet.done in text
    assert fleet.failed in text
    assert "1 completed" in text
    assert "1 failed" in text
    assert "<script>alert('owned')</script> Fix the login bug" in text  # as text
    assert page.locator("svg.bar rect.seg.completed").count() == 1
    assert page.locator("svg.bar rect.seg.failed").count() == 1
    page.wait_for_selector("#live.on")  # the stream is open
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "dashboard-runs.png"), full_page=True)
    page.select_option("select[name=status]", "failed")
    page.click("form.filters button")
    page.wait_for_url("**/runs?*status=failed*")
    assert fleet.done not in page.inner_text("main")


def test_a_run_shows_its_graph_and_path_and_its_steps(page: Any, base: str,
                                                      fleet: Fleet) -> None:
    page.goto(f"{base}/runs/{fleet.done}")
    graph = page.locator("svg.graph")
    assert graph.is_visible()
    roles = graph.locator("g.node text").all_text_contents()
    assert roles == ["$START", "planner", "developer", "reviewer", "$END"]
    assert graph.locator("g.edge").count() == 6
    assert graph.locator("g.edge.taken").count() == 5
    assert graph.locator("g.node.visited").count() == 5
    assert page.locator("li.step").count() == 5
    page.click("#output-1 summary")
    assert "Reject empty passwords in login()" in page.inner_text("#output-1")
    page.wait_for_selector("#live.on")
    page.screenshot(path=str(SHOTS / "dashboard-run.png"), full_page=True)


def test_a_step_appears_without_a_reload(page: Any, base: str, fleet: Fleet) -> None:
    run = fleet.kit.ok("thread", "start", "solve-issue", "-p", "Step me live")["thread"]
    page.goto(f"{base}/runs/{run}")
    assert page.locator("li.step").count() == 0
    page.wait_for_selector("#live.on")
    page.evaluate("window.notReloaded = true")
    stepped = fleet.cli.processes().run("thread", "step", run)  # uwf-mock: the planner
    assert stepped.code == 0, stepped
    page.wait_for_selector("li.step", timeout=15_000)
    assert "planner" in page.inner_text("li.step")
    assert page.evaluate("window.notReloaded") is True  # swapped in, not reloaded
    graph = page.locator("svg.graph")
    assert graph.locator('g.edge.taken[data-source="$START"]').count() == 1


def test_a_failed_run_leads_with_why_and_a_retry_adds_its_attempt(page: Any, base: str,
                                                                   fleet: Fleet) -> None:
    """An agent that exits 3 saying `boom`, then a passing retry: the page leads with
    the reason and lists each attempt with its reason and duration."""
    import yaml

    config = yaml.safe_load(fleet.kit.config_path.read_text("utf-8"))
    config["agents"]["boom"] = {"command": "sh", "args": ["-c", "echo boom >&2; exit 3"]}
    fleet.kit.write_config(config)
    run = fleet.kit.start(prompt="Fails, then passes")
    assert fleet.kit.uwf("thread", "step", run, "--agent", "boom").code == 1
    page.goto(f"{base}/runs/{run}")
    failure = page.locator("#failure")
    assert failure.is_visible()
    assert "exit (planner) — agent exited with status 3: boom" in failure.inner_text()
    assert failure.locator("pre.stderr").inner_text() == "boom"
    assert page.locator("main > :is(h1, div, dl)").nth(1).get_attribute("id") == "failure"
    assert page.locator("tr.attempt").count() == 1
    assert " s" in page.inner_text("#attempt-1 td.duration")
    page.wait_for_selector("#live.on")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "dashboard-failed-run.png"), full_page=True)
    stepped = fleet.cli.processes().run("thread", "step", run)  # uwf-mock: the planner
    assert stepped.code == 0, stepped
    # Swapped in, not reloaded (first `running`, while the retry is in flight).
    page.wait_for_selector("tr#attempt-2.stepped", timeout=15_000)
    assert page.locator("#failure").count() == 0
    rows = [page.inner_text(f"#attempt-{n}") for n in (1, 2)]
    assert "failed" in rows[0]
    assert "exit: agent exited with status 3: boom" in rows[0]
    assert "stepped" in rows[1]
    assert "ready" in rows[1]


def test_the_log_page_appends_events_as_they_come(page: Any, base: str, fleet: Fleet) -> None:
    page.goto(f"{base}/log?type=queue.")
    before = page.locator("#log-rows tr").count()
    page.wait_for_selector("#live.on")
    added = fleet.cli.processes().run("queue", "add", "--workflow", "solve-issue", "-p",
                                      "<b>live</b> from the browser test", "--json")
    assert added.code == 0, added
    entry = json.loads(added.out)["entry"]["id"]
    row = page.locator("#log-rows tr", has_text=entry)
    row.wait_for(timeout=15_000)
    assert page.locator("#log-rows tr").count() == before + 1
    assert "queue.added" in row.inner_text()


# -- a phone's width, and an action taken in the browser ----------------------------------------

TOKEN = "browser-test-token"


@pytest.fixture
def with_token(fleet: Fleet) -> Iterator[str]:
    from uwf.dashboard.app import create_app

    with served(create_app(context_of(fleet.cli), token=TOKEN)) as url:
        yield url


@pytest.fixture
def phone(browser: Any, with_token: str) -> Iterator[Any]:
    """A page 390 px wide (a phone's), signed in with the token (so the actions show)."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    opened = context.new_page()
    problems: list[str] = []
    opened.on("console", lambda message: problems.append(message.text)
              if message.type == "error" else None)
    opened.on("pageerror", lambda error: problems.append(str(error)))
    opened.goto(f"{with_token}/runs?token={TOKEN}")
    yield opened
    context.close()
    assert problems == []


def test_every_page_holds_at_390_px(phone: Any, with_token: str, fleet: Fleet) -> None:
    """Nothing wider than the screen: wide tables scroll in their own box, not the page."""
    pages = ["/runs", "/queue", "/history", "/log", "/verify", f"/runs/{fleet.done}",
             f"/runs/{fleet.failed}"]
    for number, path in enumerate(pages):
        phone.goto(f"{with_token}{path}")
        phone.wait_for_selector("main h1")
        width = phone.evaluate("document.scrollingElement.scrollWidth")
        assert width <= 390, (path, width)
        phone.screenshot(path=str(SHOTS / f"phone-{number}.png"), full_page=True)
    phone.goto(f"{with_token}/queue")
    assert phone.locator("form.action button").count() > 0  # the actions are on the page
    phone.screenshot(path=str(SHOTS / "dashboard-queue-390.png"), full_page=True)


def test_times_read_relative_with_the_utc_time_on_hover(phone: Any, with_token: str,
                                                        fleet: Fleet) -> None:
    phone.goto(f"{with_token}/runs/{fleet.done}")
    created = phone.locator("dl.record time").first
    assert created.inner_text().endswith(" ago") or created.inner_text() == "just now"
    stamp = created.get_attribute("datetime")
    assert created.get_attribute("title") == f"{stamp} (UTC)"
    assert stamp.endswith("Z")
    assert phone.locator("li.step .duration").count() == 5


def test_the_log_s_data_opens_on_a_click(phone: Any, with_token: str) -> None:
    phone.goto(f"{with_token}/log?type=thread.started")
    row = phone.locator("#log-rows tr").first
    assert not row.locator("details pre").is_visible()
    assert "workflow" in row.locator("summary").inner_text()
    row.locator("summary").click()
    assert '"workflow"' in row.locator("details pre").inner_text()


def test_an_action_in_the_browser_does_what_the_cli_does(phone: Any, with_token: str,
                                                         fleet: Fleet) -> None:
    """Cancel a ready entry from the queue page: the browser's own form (its Origin, the
    session's CSRF token) is taken; the entry is cancelled with the reason given."""
    # The phone's page is open: the server (a thread of this process) may open the views
    # or a thread while a command runs, which an in-process call would take for its own
    # leak. Commands run as processes while a page is open, as in the tests above.
    cli = fleet.cli.processes()
    entry = cli.run("queue", "add", "--workflow", "solve-issue", "-p", "cancel me",
                    "--session", "s9", "--json")
    assert entry.code == 0, entry
    entry_id = json.loads(entry.out)["entry"]["id"]
    phone.goto(f"{with_token}/queue?session=s9")
    form = phone.locator(f'form.action[action="/queue/{entry_id}/cancel"]')
    form.locator("button").click()
    phone.wait_for_url(f"{with_token}/queue")
    shown = json.loads(cli.run("queue", "show", entry_id, "--json").out)
    assert shown["status"] == "cancelled"


def test_a_question_is_answered_from_its_form(browser: Any, phone: Any, with_token: str,
                                              fleet: Fleet) -> None:
    """A waiting run comes first on the runs page with its question; its page's form
    answers it, a wrong answer refused against the question's schema, a right one taken
    (the run goes on)."""
    mock = f"uwf-mock {ROOT / 'examples' / 'mock-approve-deploy.yaml'}"
    cli = fleet.cli.processes()  # the phone's page is open (see the test above)
    assert cli.run("workflow", "put", str(ROOT / "examples" / "approve-deploy.yaml"),
                   "--json").code == 0
    started = cli.run("thread", "start", "approve-deploy", "-p", "ship", "--json")
    thread = json.loads(started.out)["thread"]
    assert cli.run("thread", "run", thread, "--agent", mock, "--json").code == 0
    phone.goto(f"{with_token}/runs")
    waiting = phone.locator("section.waiting")
    assert "Deploy version 2.1.0 to production?" in waiting.inner_text()
    waiting.locator(f'a[href="/runs/{thread}#question"]').click()
    phone.wait_for_selector("#question form.answer")
    phone.screenshot(path=str(SHOTS / "dashboard-question-390.png"), full_page=True)
    # A wrong answer, in a page of its own (the browser logs the refusal's 409).
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        other = context.new_page()
        other.goto(f"{with_token}/runs/{thread}?token={TOKEN}")
        form = other.locator("#question form.answer")
        form.locator("textarea").fill('{"approved": "yes"}')
        form.locator("button").click()
        other.wait_for_selector("main h1")
        said = other.locator("main").inner_text()
        assert 'approved: "yes" is not of type "boolean"' in said
        assert "Nothing was written" in said
    finally:
        context.close()
    form = phone.locator("#question form.answer")
    form.locator("textarea").fill('{"approved": true}')
    form.locator("button").click()
    phone.wait_for_url(f"{with_token}/runs/{thread}")
    assert phone.locator("#question").count() == 0
    shown = json.loads(cli.run("thread", "show", thread, "--json").out)
    assert (shown["status"], shown["question"]["answer"]) == ("idle", {"approved": True})
