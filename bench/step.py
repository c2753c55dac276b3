"""Engine overhead of one `uwf thread step` (a real CLI process), beside `uwf thread show`.

    python bench/step.py [--quick | --steps N] [--dir DIR] [--wait-quiet S] [--profile]
                         [--no-bytecode-cache]

A looping solve-issue thread (planner -> developer -> reviewer, the reviewer
rejecting every time, so the thread never ends) is stepped N times (default 30;
15 with --quick; at least 15) per variant, with the store under --dir on a real
disk (UWF_DURABILITY=fsync) and the agents from a config.yaml in a temp folder
(UWF_CONFIG). Overhead = the step's wall time minus the agent's own run time:

- tiny: a small Python kit agent (`uwf.agents.kit.run`, no YAML) behind a bash
  wrapper that writes $EPOCHREALTIME before and after it: the agent's own time
  is measured inside the very step being timed.
- uwf-mock: `uwf-mock SCRIPT` (outputs scripted per visit, config
  `agents: {mock: {command: uwf-mock, args: [SCRIPT]}}, defaultAgent: mock`).
  Its own time is its wall time run directly, the way uwf runs it (same argv
  and UWF_* environment), against a copy of the store made just before the
  step, so it writes the same new nodes the step's run will write.

Each iteration runs, in rotating order, one step of each variant's thread,
one `uwf thread show` and `python -c pass`; figures are medians over the
iterations (the first step of each thread, the planner, is warm-up, untimed).
Children run with Python's bytecode cache on (in <data dir>/pycache), as an
installed uwf has its .pyc files, even if the shell exports PYTHONDONTWRITEBYTECODE.
Target (issue): overhead <= 2 x `uwf thread show` wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    BIN,
    EXAMPLE,
    RunResult,
    add_common_args,
    begin,
    bytecode_env,
    check,
    env_with,
    fmt_ms,
    fresh_dir,
    load,
    median,
    pressure,
    print_header,
    ratios,
    run_measured,
    section,
    spread,
    uwf_exe,
    verdict,
)

TARGET = 2.0
PROMPT = "Fix the login bug in #42"

TINY_AGENT = '''\
"""A tiny agent: the same outputs as the uwf-mock script, from the visit count."""
import sys

from uwf.agents.kit import run


def outputs(ctx):
    role = ctx["role"]["name"]
    visit = int(ctx["visits"].get(role, 0))
    if role == "planner":
        return {"status": "ready", "plan": "Reject empty passwords in login()"}
    if role == "developer":
        return {"status": "done", "files": ["auth/login.py", "tests/test_login.py"],
                "summary": f"round {visit + 1}: login() refuses empty passwords"}
    return {"status": "rejected", "comments": f"round {visit + 1}: add a test"}


def handler(ctx):
    role = ctx["role"]["name"]
    return outputs(ctx), f"tiny: {role}, visit {int(ctx['visits'].get(role, 0)) + 1}"


sys.exit(run(handler, name="tiny", history_limit=0))
'''

WRAPPER = '''\
#!/bin/bash
# The agent's own run time: $EPOCHREALTIME (no fork) before and after it.
start=$EPOCHREALTIME
"{python}" "{agent}" "$@"
code=$?
end=$EPOCHREALTIME
echo "$start $end" >> "{times}"
exit $code
'''


def mock_script(visits: int) -> dict[str, list[dict[str, Any]]]:
    """uwf-mock outputs: one per visit, all different (as a real agent's would be)."""
    return {
        "planner": [{"status": "ready", "plan": "Reject empty passwords in login()"}],
        "developer": [{"status": "done", "files": ["auth/login.py", "tests/test_login.py"],
                       "summary": f"round {n + 1}: login() refuses empty passwords"}
                      for n in range(visits)],
        "reviewer": [{"status": "rejected", "comments": f"round {n + 1}: add a test"}
                     for n in range(visits)] + [{"status": "approved"}],
    }


def write_setup(folder: Path, store: Path, visits: int,
                base: dict[str, str]) -> dict[str, dict[str, str]]:
    """Config files, the mock script and the tiny agent; each variant's environment."""
    import yaml

    script = folder / "mock.yaml"
    script.write_text(yaml.safe_dump(mock_script(visits)), "utf-8")
    agent = folder / "tiny_agent.py"
    agent.write_text(TINY_AGENT, "utf-8")
    times = folder / "tiny-times.txt"
    wrapper = folder / "tiny.sh"
    wrapper.write_text(WRAPPER.format(python=sys.executable, agent=agent, times=times), "utf-8")
    wrapper.chmod(0o755)
    envs = {}
    for variant, default in (("tiny", "tiny"), ("mock", "mock")):
        config = folder / variant / "config.yaml"
        config.parent.mkdir()
        config.write_text(yaml.safe_dump({
            "agents": {"mock": {"command": "uwf-mock", "args": [str(script)]},
                       "tiny": {"command": str(wrapper), "args": []}},
            "defaultAgent": default,
        }), "utf-8")
        envs[variant] = dict(base, UWF_CONFIG=str(config), UWF_HOME=str(store),
                             UWF_DURABILITY="fsync",
                             PATH=f"{BIN}{os.pathsep}{base.get('PATH', '')}")
    envs["paths"] = {"script": str(script), "times": str(times)}
    return envs


def last_agent_time(times: Path) -> float:
    start, end = times.read_text("utf-8").splitlines()[-1].split()
    return float(end) - float(start)


def next_step(root: Path, thread: str) -> tuple[str, str]:
    """The role and edge prompt uwf would give the next step's agent (read-only)."""
    from uwf.store import Store
    from uwf.threads.routing import next_decision
    from uwf.threads.service import get_thread

    store = Store.open(root)
    try:
        _, decision = next_decision(store.cas, get_thread(store.read(), thread))
    finally:
        store.close()
    return decision.role, decision.prompt


@dataclass
class Variant:
    name: str
    env: dict[str, str]
    thread: str = ""
    head: str = ""
    walls: list[float] = field(default_factory=list)
    agent: list[float] = field(default_factory=list)

    @property
    def overheads(self) -> list[float]:
        return [wall - own for wall, own in zip(self.walls, self.agent, strict=True)]


def step(variant: Variant) -> RunResult:
    result = run_measured([uwf_exe(), "thread", "step", variant.thread], env=variant.env)
    check(result, f"uwf thread step ({variant.name})")
    out = json.loads(result.out)
    if out["done"] or out["head"] == variant.head:
        sys.exit(f"bench: the {variant.name} step did not move the head: {out}")
    variant.head = out["head"]
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--steps", type=int, help="timed steps per variant (default 30; 15 "
                        "with --quick; at least 15)")
    parser.add_argument("--quick", action="store_true", help="15 steps per variant")
    add_common_args(parser)
    parser.add_argument("--profile", action="store_true",
                        help="also run one more tiny step under cProfile (python -m cProfile)")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE if set (children compile every module "
                        "from source at each start)")
    args = parser.parse_args(argv)
    args.steps = max(args.steps or (15 if args.quick else 30), 15)

    work = fresh_dir(args.dir, "step")
    base = work.parent
    store = work / "store"
    copy = work / "store-copy"
    print_header("step: engine overhead of `uwf thread step` beside `uwf thread show`", work)
    exe = uwf_exe()
    mock_exe = shutil.which("uwf-mock", path=str(BIN)) or "uwf-mock"

    with tempfile.TemporaryDirectory(prefix="uwf-bench-step-") as temp:
        base_env = env_with()
        if args.no_bytecode_cache:
            print(f"bytecode: as inherited (PYTHONDONTWRITEBYTECODE="
                  f"{base_env.get('PYTHONDONTWRITEBYTECODE', '')!r})")
        else:
            base_env = bytecode_env(base_env, base / "pycache")
            print(f"bytecode: cached in {base / 'pycache'} (PYTHONDONTWRITEBYTECODE unset), "
                  "as in an installed uwf")
        envs = write_setup(Path(temp), store, args.steps + 5, base_env)
        script, times = envs["paths"]["script"], Path(envs["paths"]["times"])
        print(f"config: {temp}/{{tiny,mock}}/config.yaml (UWF_CONFIG), UWF_DURABILITY=fsync")
        variants = [Variant("tiny", envs["tiny"]), Variant("mock", envs["mock"])]
        check(run_measured([exe, "workflow", "put", str(EXAMPLE)], env=envs["tiny"]),
              "uwf workflow put")
        for variant in variants:
            started = run_measured([exe, "thread", "start", "solve-issue", "-p", PROMPT,
                                    "--repo", str(work)], env=variant.env)
            check(started, "uwf thread start")
            variant.thread = json.loads(started.out)["thread"]
            step(variant)  # the planner: warm-up, untimed
        tiny, mock = variants
        show_argv = [exe, "thread", "show", tiny.thread]
        check(run_measured(show_argv, env=tiny.env), "uwf thread show")
        python_argv = [sys.executable, "-c", "pass"]
        run_measured(python_argv, env=base_env)
        shows: list[float] = []
        pythons: list[float] = []

        def run_tiny() -> None:
            tiny.walls.append(step(tiny).wall)
            tiny.agent.append(last_agent_time(times))

        def run_mock() -> None:
            # The agent alone, as uwf would run it, against the same state (a copy).
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(store, copy)
            role, prompt = next_step(copy, mock.thread)
            direct_env = dict(mock.env, UWF_HOME=str(copy), UWF_THREAD=mock.thread,
                              UWF_ROLE=role, UWF_EDGE_PROMPT=prompt,
                              UWF_STEP_STARTED_MS=str(int(time.time() * 1000)))
            alone = run_measured([mock_exe, script, mock.thread, role], env=direct_env)
            check(alone, "uwf-mock run directly")
            mock.walls.append(step(mock).wall)
            mock.agent.append(alone.wall)

        def run_show() -> None:
            result = run_measured(show_argv, env=tiny.env)
            check(result, "uwf thread show")
            shows.append(result.wall)

        def run_python() -> None:
            pythons.append(run_measured(python_argv, env=base_env).wall)

        begin(args.wait_quiet)
        print(pressure())
        order = [run_tiny, run_mock, run_show, run_python]
        for index in range(args.steps):
            shift = index % len(order)
            for run in order[shift:] + order[:shift]:
                run()

        show = median(shows)
        section(f"result (medians of {args.steps} steps per variant, interleaved; "
                f"end: {load()}; {pressure()})")
        print(f"{'uwf thread show':<52} {fmt_ms(show):>10}")
        print(f"{'python -c pass':<52} {fmt_ms(median(pythons)):>10}")
        verdicts = []
        for variant, how in ((tiny, "bash wrapper, inside the step"),
                             (mock, "run directly on a copy of the store")):
            over = median(variant.overheads)
            print(f"{'uwf thread step, ' + variant.name + ' agent: wall':<52} "
                  f"{fmt_ms(median(variant.walls)):>10}")
            print(f"{'  the agent alone (' + how + ')':<52} "
                  f"{fmt_ms(median(variant.agent)):>10}")
            print(f"{'  engine overhead (wall - agent)':<52} {fmt_ms(over):>10}  "
                  f"(min {fmt_ms(min(variant.overheads))}, "
                  f"max {fmt_ms(max(variant.overheads))})")
            print(f"{'  ratio overhead / show':<52} {over / show:10.2f}  "
                  f"(per iteration: {spread(ratios(variant.overheads, shows))})")
            verdicts.append((variant.name, over / show))
        for name, ratio in verdicts:
            print(f"target overhead <= {TARGET:g} x uwf thread show ({name}): "
                  f"{verdict(ratio <= TARGET)} ({ratio:.2f} x)")

        if args.profile:
            section("profile: one more tiny step, `python -m cProfile -s cumulative uwf ...`")
            profiled = run_measured([sys.executable, "-m", "cProfile", "-s", "cumulative", exe,
                                     "thread", "step", tiny.thread], env=tiny.env)
            check(profiled, "profiled step")
            lines = profiled.out.decode(errors="replace").splitlines()
            first = next((n for n, line in enumerate(lines) if "function calls" in line), 0)
            print("\n".join(lines[first:first + 45]))
        shutil.rmtree(copy, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
