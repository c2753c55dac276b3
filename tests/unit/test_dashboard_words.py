"""What a person reads on the dashboard, pure: a refusal's next action in the page's
words (`uwf.dashboard.words`) and times relative to the store's clock, durations
(`uwf.dashboard.times`)."""

from __future__ import annotations

import pytest

from uwf.dashboard import times, words
from uwf.engine.clock import parse_instant

RUN = "01J7K9M2XNPQR5VWBCDF8G3H4T"


@pytest.mark.parametrize(("next_action", "said"), [
    ("find runs with `uwf run search`", "find runs on the Runs page"),
    ("list them with `uwf queue list`", "list them on the Queue page"),
    (f"wait for it to end, or end it with `uwf thread kill {RUN}`",
     "wait for it to end, or end it with Kill on the run's page"),
    (f"see `uwf run show {RUN}`", "see the run's page"),
    (f"rerun it with `uwf run rerun {RUN}`", "rerun it with Rerun on the run's page"),
    ("only a parked entry is reset", "only a parked entry is reset"),
    ("nothing to kill", "nothing to kill"),
    # A command the pages do not offer, or a flag: the next action is left out.
    ("see `uwf run search --help`", None),
    ("use one of them with `uwf sched lease`", None),
    ("give --token", None),
])
def test_a_next_action_in_the_page_s_words(next_action: str, said: str | None) -> None:
    assert words.next_action(next_action) == said


def test_a_refusal_keeps_what_and_drops_what_the_page_cannot_say() -> None:
    assert words.refusal("no run X", "find runs with `uwf run search`") == \
        "no run X; find runs on the Runs page"
    assert words.refusal("bad", "see `uwf worker --help`") == "bad"
    assert words.refusal("bad", "") == "bad"


NOW = parse_instant("2030-01-01T12:00:00.000Z")


@pytest.mark.parametrize(("ts", "said"), [
    ("2030-01-01T12:00:00.000Z", "just now"),
    ("2030-01-01T11:59:59.500Z", "just now"),
    ("2030-01-01T11:59:48.000Z", "12 s ago"),
    ("2030-01-01T11:55:00.000Z", "5 min ago"),
    ("2030-01-01T09:00:00.000Z", "3 h ago"),
    ("2029-12-31T12:00:00.000Z", "1 day ago"),
    ("2029-12-20T12:00:00.000Z", "12 days ago"),
    ("2030-01-01T12:04:00.000Z", "in 4 min"),
    ("not a time", "not a time"),
    (None, ""),
])
def test_a_time_relative_to_the_clock(ts: str | None, said: str) -> None:
    assert times.ago(ts, NOW) == said


@pytest.mark.parametrize(("ms", "said"), [
    (0, "0 ms"), (850, "850 ms"), (12_340, "12.3 s"), (245_000, "4 min 05 s"),
    (7_380_000, "2 h 03 min"), (273_600_000, "3 days 4 h"), (86_400_000, "1 day 0 h"),
    (-1, ""), (None, ""),
])
def test_a_duration(ms: int | None, said: str) -> None:
    assert times.duration(ms) == said


def test_a_run_s_duration_ends_at_its_last_update_once_ended() -> None:
    run = {"createdAt": "2030-01-01T11:00:00.000Z", "updatedAt": "2030-01-01T11:01:05.000Z",
           "lifecycle": "completed"}
    assert times.run_took(run, NOW) == "1 min 05 s"
    assert times.run_took({**run, "lifecycle": "running"}, NOW) == "1 h 00 min"
    assert times.run_took({"createdAt": None}, NOW) == ""
