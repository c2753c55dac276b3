"""`run search`, `run list` and `history` over one fleet of runs in three repos:
each filter alone and combined, the order, pages, and the same bytes after the
views are deleted and rebuilt (SPEC §5, §7)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.runkit import NOW, Fleet, git_repo, make_fleet, ms, new_cli, run_in, ts

T1 = "2029-06-01T10:00:00.000Z"
T2 = "2029-06-02T10:00:00.000Z"  # two runs start at this very millisecond
T3 = "2029-06-03T10:00:00.000Z"
T4 = "2029-06-04T10:00:00.000Z"
T5 = "2029-06-05T10:00:00.000Z"
T6 = "2029-06-06T10:00:00.000Z"  # and two at this one
T7 = "2029-06-07T10:00:00.000Z"


@dataclass
class Runs:
    """The fleet, its repos, and its runs by what they are."""

    fleet: Fleet
    tmp: Path
    kestrel: Path  # a git repository
    osprey: Path  # another
    plain: Path  # a folder in no repository
    ids: dict[str, str]
    expected_lifecycle: dict[str, str]
    created: dict[str, str]  # createdAt by name

    def search(self, *args: str) -> list[str]:
        """`run search ARGS` as names of the runs, in its order."""
        names = {run: name for name, run in self.ids.items()}
        return [names[run] for run in self.fleet.search(*args)]

    def search_in(self, cwd: Path, *args: str) -> list[str]:
        result = run_in(self.fleet.cli, cwd, "--now", NOW, "run", "search", *args)
        assert result.code == 0, result
        assert result.err == "", result
        names = {run: name for name, run in self.ids.items()}
        return [names[run["runId"]] for run in json.loads(result.out)["runs"]]

    def order(self, *names: str) -> list[str]:
        """`names` in the registry's order: createdAt, then runId."""
        return sorted(names, key=lambda name: (self.created[name], self.ids[name]))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp = tmp_path_factory.mktemp("search")
    fleet = make_fleet(new_cli(tmp), tmp)
    kestrel, osprey = git_repo(tmp / "repo-kestrel"), git_repo(tmp / "repo-osprey")
    plain = tmp / "plain-folder"
    (kestrel / "sub" / "dir").mkdir(parents=True)
    plain.mkdir()

    def start(cwd: Path, workflow: str, prompt: str, now: str, *repo: str) -> str:
        result = run_in(fleet.cli, cwd, "--now", now, "thread", "start", workflow, "-p",
                        prompt, *repo)
        assert result.code == 0, result
        thread: str = json.loads(result.out)["thread"]
        return thread

    ids: dict[str, str] = {}
    # Started out of time order, from folders inside repos and outside any.
    ids["plain_running"] = start(plain, "relay", "Quiet relay away from repos", T5)
    assert fleet.step(ids["plain_running"], now=T5).code == 0
    ids["kestrel_completed"] = start(kestrel / "sub" / "dir", "relay",
                                     "Carry the first message\nand mention the zebra", T1)
    fleet.ok("run", "resume", ids["kestrel_completed"], "--drive", now=T1)
    ids["osprey_queued"] = start(plain, "solve-issue", "Fix the login bug", T2,
                                 "--repo", str(osprey))
    ids["osprey_failed"] = start(osprey, "relay", "Carry the parcel", T2)
    fleet.act(a="fail")
    assert fleet.step(ids["osprey_failed"], now=T2).code == 1
    ids["kestrel_archived"] = start(kestrel, "solve-issue", "Fix the logout bug", T3)
    fleet.ok("run", "resume", ids["kestrel_archived"], "--drive", now=T3)
    fleet.ok("run", "archive", ids["kestrel_archived"], "--reason", "shipped", now=T7)
    ids["kestrel_blocked"] = start(kestrel, "relay", "Carry a stuck note", T4)
    fleet.act(a="stuck")
    assert fleet.step(ids["kestrel_blocked"], now=T4).code == 0
    assert fleet.step(ids["kestrel_blocked"], now=T4).code == 1
    ids["osprey_rerun"] = fleet.ok("run", "rerun", ids["osprey_failed"], now=T6)["runId"]
    ids["plain_cancelled"] = start(plain, "relay", "Carry nothing after all", T6)
    fleet.ok("thread", "kill", ids["plain_cancelled"], now=T6)
    expected = {"plain_running": "running", "kestrel_completed": "completed",
                "osprey_queued": "queued", "osprey_failed": "failed",
                "kestrel_archived": "archived", "kestrel_blocked": "blocked",
                "osprey_rerun": "queued", "plain_cancelled": "cancelled"}
    created = {name: fleet.run(run)["createdAt"] for name, run in ids.items()}
    return Runs(fleet, tmp, kestrel, osprey, plain.resolve(), ids, expected, created)


def records(runs: Runs, *args: str, command: tuple[str, ...] = ("run", "search")
            ) -> dict[str, Any]:
    found: dict[str, Any] = runs.fleet.ok(*command, *args, now=NOW)
    return found


# -- what each run is --------------------------------------------------------------------

def test_the_fleet_is_what_it_was_made_of(runs: Runs) -> None:
    found = {run["runId"]: run for run in records(runs, "--limit", "100")["runs"]}
    names = {run: name for name, run in runs.ids.items()}
    assert {names[run]: record["lifecycle"] for run, record in found.items()} == (
        runs.expected_lifecycle)
    repos = {names[run]: record["repo"] for run, record in found.items()}
    assert repos == {name: str({"kestrel": runs.kestrel, "osprey": runs.osprey,
                                "plain": runs.plain}[name.split("_")[0]])
                     for name in runs.ids}  # the git top level, wherever it started
    rerun = found[runs.ids["osprey_rerun"]]
    assert rerun["provenance"]["rerunOf"] == runs.ids["osprey_failed"]
    assert rerun["createdAt"] == found[runs.ids["plain_cancelled"]]["createdAt"] == T6
    assert all(record["freshness"] == "valid" for record in found.values())


# -- order and pages ---------------------------------------------------------------------

def test_search_and_list_order_runs_by_created_at_then_run_id(runs: Runs) -> None:
    everything = runs.search()
    assert everything == runs.order(*runs.ids)
    # The ties at T2 and T6 are broken by runId; otherwise time order, not start order.
    assert everything[0] == "kestrel_completed"
    assert set(everything[1:3]) == {"osprey_queued", "osprey_failed"}
    assert set(everything[-2:]) == {"osprey_rerun", "plain_cancelled"}
    searched = runs.fleet.uwf("run", "search", now=NOW)
    listed = runs.fleet.uwf("run", "list", now=NOW)
    assert listed.code == 0
    assert listed.out == searched.out
    for status in ("failed", "queued"):
        assert runs.fleet.uwf("run", "list", "--status", status, now=NOW).out == (
            runs.fleet.uwf("run", "search", "--status", status, now=NOW).out)


def test_history_is_newest_first(runs: Runs) -> None:
    newest_first = [run["runId"] for run in records(runs, command=("history",))["runs"]]
    assert newest_first == list(reversed(runs.fleet.search()))
    relay_queued = records(runs, "--app", "relay", "--status", "queued", command=("history",))
    assert [run["runId"] for run in relay_queued["runs"]] == [runs.ids["osprey_rerun"]]
    queued = [run["runId"] for run in
              records(runs, "--status", "queued", command=("history",))["runs"]]
    assert queued == [runs.ids["osprey_rerun"], runs.ids["osprey_queued"]]


@pytest.mark.parametrize("command", [("run", "search"), ("history",)])
@pytest.mark.parametrize("filters", [(), ("--workflow", "relay"), ("--status", "queued")])
def test_pages_have_no_gaps_or_repeats(runs: Runs, command: tuple[str, ...],
                                       filters: tuple[str, ...]) -> None:
    whole = records(runs, *filters, command=command)
    total = whole["total"]
    assert total == len(whole["runs"]) > 0
    for limit in (1, 3):
        pages: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = records(runs, *filters, "--limit", str(limit), "--offset", str(offset),
                           command=command)
            assert (page["total"], page["limit"], page["offset"]) == (total, limit, offset)
            pages.extend(page["runs"])
            if len(page["runs"]) < limit:
                break
            offset += limit
        assert pages == whole["runs"], limit
    assert records(runs, *filters, "--limit", "0", command=command)["runs"] == []
    beyond = records(runs, *filters, "--offset", str(total), command=command)
    assert (beyond["runs"], beyond["total"]) == ([], total)


# -- each filter alone ---------------------------------------------------------------------

def test_each_status_word_selects_its_runs(runs: Runs) -> None:
    derived = {**runs.expected_lifecycle, "kestrel_archived": "completed"}
    for status in ("running", "stalled", "blocked", "failed", "completed", "cancelled",
                   "queued"):
        chosen = [name for name in runs.order(*runs.ids) if derived[name] == status]
        assert runs.search("--status", status) == chosen, status
    assert runs.search("--status", "archived") == ["kestrel_archived"]


def test_workflow_by_name_alias_or_hash(runs: Runs) -> None:
    relay = [name for name in runs.order(*runs.ids) if not name.endswith(("queued",
                                                                          "archived"))]
    assert runs.search("--workflow", "relay") == relay
    assert runs.search("--app", "relay") == relay
    assert runs.search("--workflow", runs.fleet.relay) == relay
    assert runs.search("--app", "solve-issue") == ["osprey_queued", "kestrel_archived"]
    assert runs.search("--workflow", runs.fleet.solve) == ["osprey_queued", "kestrel_archived"]


@pytest.mark.parametrize(("words", "expected"), [
    ("{osprey_failed}", ["osprey_failed"]),  # the run id
    ("{osprey_failed_lower}", ["osprey_failed"]),  # case does not matter
    ("solve-issue", ["osprey_queued", "kestrel_archived"]),  # the workflow's name
    ("{relay_hash}", ["kestrel_completed", "osprey_failed", "kestrel_blocked",
                      "plain_running", "osprey_rerun", "plain_cancelled"]),  # its hash
    ("parcel", ["osprey_failed", "osprey_rerun"]),  # the title (the rerun has the prompt)
    ("zebra", ["kestrel_completed"]),  # the prompt past its first line
    ("repo-osprey", ["osprey_queued", "osprey_failed", "osprey_rerun"]),  # the repo
    ("plain-folder", ["plain_running", "plain_cancelled"]),
    ("blocked", ["kestrel_blocked"]),  # the lifecycle
    ("cancelled", ["plain_cancelled"]),
    ("archived", ["kestrel_archived"]),
    ("CARRY kestrel", ["kestrel_completed", "kestrel_blocked"]),  # every word must appear
    ("carry kestrel zebra", ["kestrel_completed"]),
    ("carry nowhere-at-all", []),
])
def test_text_matches_id_workflow_title_repo_lifecycle_and_prompt(
        runs: Runs, words: str, expected: list[str]) -> None:
    values = {**runs.ids, "osprey_failed_lower": runs.ids["osprey_failed"].lower(),
              "relay_hash": runs.fleet.relay}
    assert runs.search("--text", words.format(**values)) == runs.order(*expected)


def test_repo_filter_and_scope(runs: Runs) -> None:
    kestrel = ["kestrel_completed", "kestrel_archived", "kestrel_blocked"]
    assert runs.search("--repo", str(runs.kestrel)) == kestrel
    assert runs.search_in(runs.tmp, "--repo", "repo-kestrel/") == kestrel  # resolved
    assert runs.search("--repo", str(runs.plain)) == ["plain_running", "plain_cancelled"]
    assert runs.search("--repo", str(runs.tmp)) == []
    # --scope repo: the repo of the working directory (its git top level).
    assert runs.search_in(runs.kestrel / "sub" / "dir", "--scope", "repo") == kestrel
    osprey = runs.order("osprey_queued", "osprey_failed", "osprey_rerun")
    assert runs.search_in(runs.osprey, "--scope", "repo") == osprey
    assert runs.search_in(runs.plain, "--scope", "repo") == [
        "plain_running", "plain_cancelled"]
    assert runs.search_in(runs.tmp, "--scope", "repo") == []
    everything = runs.search()
    assert runs.search_in(runs.kestrel, "--scope", "home") == everything
    assert runs.search_in(runs.kestrel) == everything  # home is the default
    history = run_in(runs.fleet.cli, runs.osprey, "--now", NOW, "history", "--scope", "repo")
    assert [run["runId"] for run in json.loads(history.out)["runs"]] == [
        runs.ids[name] for name in reversed(osprey)]


def test_since_and_until_are_inclusive_at_the_exact_created_at(runs: Runs) -> None:
    at_t2 = runs.order("osprey_queued", "osprey_failed")
    after = [name for name in runs.search() if name not in ("kestrel_completed", *at_t2)]
    assert runs.search("--since", T2) == [*at_t2, *after]
    assert runs.search("--since", str(ms(T2))) == [*at_t2, *after]  # epoch ms
    assert runs.search("--since", "2029-06-02T12:00:00+02:00") == [*at_t2, *after]
    assert runs.search("--since", ts(ms(T2) + 1)) == after
    assert runs.search("--until", T2) == ["kestrel_completed", *at_t2]
    assert runs.search("--until", ts(ms(T2) - 1)) == ["kestrel_completed"]
    assert runs.search("--since", T2, "--until", T2) == at_t2
    assert runs.search("--since", T3, "--until", T4) == ["kestrel_archived",
                                                         "kestrel_blocked"]
    assert runs.search("--since", T4, "--until", T3) == []
    assert runs.search("--since", T7) == []


# -- filters combined ----------------------------------------------------------------------

def test_filters_combine(runs: Runs) -> None:
    assert runs.search("--workflow", "relay", "--status", "completed") == [
        "kestrel_completed"]
    assert runs.search("--app", "solve-issue", "--repo", str(runs.kestrel)) == [
        "kestrel_archived"]
    assert runs.search("--app", "solve-issue", "--include-archived", "false") == [
        "osprey_queued"]
    assert runs.search("--status", "queued", "--text", "parcel") == ["osprey_rerun"]
    assert runs.search("--workflow", "relay", "--since", T2, "--until", T5,
                       "--text", "carry") == ["osprey_failed", "kestrel_blocked"]
    assert runs.search("--status", "completed", "--include-archived", "false") == [
        "kestrel_completed"]
    assert runs.search_in(runs.kestrel, "--scope", "repo", "--text", "carry",
                          "--status", "blocked") == ["kestrel_blocked"]
    assert runs.search_in(runs.osprey, "--scope", "repo", "--repo", str(runs.kestrel)) == []
    assert runs.search("--include-archived", "false") == [
        name for name in runs.search() if name != "kestrel_archived"]


# -- the index is a cache ------------------------------------------------------------------

def test_deleting_views_changes_no_output_byte_for_byte(runs: Runs) -> None:
    commands: list[list[str]] = [
        ["run", "search"], ["run", "list"], ["run", "search", "--status", "failed"],
        ["run", "search", "--text", "carry", "--limit", "2", "--offset", "1"],
        ["run", "search", "--status", "archived"], ["run", "list", "--app", "relay"],
        ["history"], ["history", "--limit", "3", "--offset", "2"],
        *[["run", command, run] for run in runs.ids.values() for command in ("show", "resume")],
    ]

    def outputs() -> list[tuple[int, str, str]]:
        found = []
        for command in commands:
            result = runs.fleet.uwf(*command, now=NOW)
            found.append((result.code, result.out, result.err))
        return found

    log = runs.fleet.cli.log_bytes()
    before = outputs()
    assert all(code == 0 and err == "" for code, _, err in before)
    views = runs.fleet.cli.home / "views"
    assert views.is_dir()
    shutil.rmtree(views)
    assert outputs() == before  # the first command rebuilt the views from the log
    assert views.is_dir()
    assert runs.fleet.cli.log_bytes() == log
    assert runs.fleet.ok("registry", "verify")["ok"] is True
