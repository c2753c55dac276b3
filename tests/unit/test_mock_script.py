"""uwf-mock's script: YAML, and JSON (which is YAML) read without PyYAML."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.threadkit import MOCK_SCRIPT
from uwf.agents.mock import load_script, parse_script
from uwf.errors import UsageError


def test_a_json_script_reads_as_its_yaml_does(tmp_path: Path) -> None:
    as_json, as_yaml = tmp_path / "mock.json", tmp_path / "mock.yaml"
    as_json.write_text(json.dumps(MOCK_SCRIPT), "utf-8")
    as_yaml.write_text(yaml.safe_dump(MOCK_SCRIPT), "utf-8")
    assert load_script(str(as_json)) == load_script(str(as_yaml)) == MOCK_SCRIPT


def test_a_json_script_loads_no_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyYAML unimportable (`sys.modules` naming None): a JSON script still loads, a
    YAML one would need it."""
    path = tmp_path / "mock.yaml"
    path.write_text(json.dumps(MOCK_SCRIPT), "utf-8")
    monkeypatch.setitem(sys.modules, "yaml", None)
    assert load_script(str(path)) == MOCK_SCRIPT
    with pytest.raises(ImportError):
        parse_script("planner: [{status: ready}]", "mock.yaml")


def test_a_yaml_script_and_a_broken_one() -> None:
    assert parse_script("planner: [{status: ready}]\n", "s") == {"planner": [{"status": "ready"}]}
    with pytest.raises(UsageError, match="mock script s is not YAML"):
        parse_script("planner: [unclosed\n", "s")
    # What the one difference is: YAML 1.1 reads `1e3` as a string, JSON as a number.
    assert parse_script('{"a": 1e3}', "s") == {"a": 1000.0}


def test_a_script_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mock.json"
    path.write_text('{"planner": []}', "utf-8")
    with pytest.raises(UsageError, match="must map roles to non-empty lists"):
        load_script(str(path))
