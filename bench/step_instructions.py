"""Instructions a durable thread step executes (callgrind), one code against another.

    python bench/step_instructions.py [--base COMMIT] [--steps N] [--dir DIR]

The figure a loaded machine cannot blur (issue 30): `run_thread` of
examples/solve-issue.yaml with `bench/thread_run.py`'s in-process agent,
UWF_DURABILITY=none (the disk's wait is no instruction of uwf's), under
`valgrind --tool=callgrind`, in a fresh process that first steps 10 steps (imports,
caches); run twice, for 10 and for 10 + N more steps, and the difference of the two
totals divided by N is one step's instructions, start-up excluded. PYTHONHASHSEED=0,
so dict and set orders repeat (two runs of one code agree within ~0.5 %).

Side B is the work tree; with --base, side A is that commit's `uwf/` (`git archive`)
put first on PYTHONPATH. Needs valgrind.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from common import REPO, callgrind_sides, callgrind_total, side_env

CHILD = """
import os, shutil, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from thread_run import PROMPT, agent_output
from common import EXAMPLE, settings_of
from uwf.config.configfile import Config, WorkflowConfig
from uwf.store import Store
from uwf.threads import stepping
from uwf.threads.service import start_thread
from uwf.workflows.service import put_workflow
steps, root = int(sys.argv[1]), Path(sys.argv[2])
shutil.rmtree(root, ignore_errors=True)
store = Store.open(root)
put_workflow(store, EXAMPLE)
thread = start_thread(store, "solve-issue", PROMPT, repo=str(root),
                      **settings_of(start_thread, store)).thread
def agent(ctx):
    role = ctx.role["name"]
    return agent_output(role, ctx.visits.get(role, 0), 100_000)
config = Config(WorkflowConfig(), None, None)
given = settings_of(stepping.run_thread, store)
stepping.run_thread(store, thread, in_process=agent, max_steps=10, config=config, **given)
if steps:
    ran = stepping.run_thread(store, thread, in_process=agent, max_steps=steps, config=config,
                              **given)
    assert ran.steps == steps, ran
store.close()
"""


def instructions(steps: int, uwf_path: Path | None, work: Path) -> int:
    """The total instructions of a child that steps 10 + `steps` steps."""
    out = work / f"callgrind-{steps}.out"
    env = side_env(uwf_path, "none")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    sys.executable, "-c", CHILD, str(steps), str(work / "store"),
                    str(REPO / "bench")], env=env, cwd="/", check=True,
                   capture_output=True)
    total = callgrind_total(out)
    out.unlink()
    return total


def per_step(steps: int, uwf_path: Path | None, work: Path) -> float:
    return (instructions(steps, uwf_path, work) - instructions(0, uwf_path, work)) / steps


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--base", default=None, metavar="COMMIT",
                        help="side A: this commit's uwf/ (default: the work tree alone)")
    parser.add_argument("--steps", type=int, default=50, help="steps measured (default 50)")
    parser.add_argument("--dir", type=Path, default=REPO / "bench" / "out" / "step-instr")
    args = parser.parse_args(argv)
    work = args.dir
    sides = callgrind_sides(args.base, work)
    figures = {name: per_step(args.steps, path, work) for name, path in sides.items()}
    print(f"instructions a step (callgrind, {args.steps} steps after 10, durability none)")
    for name, value in figures.items():
        print(f"  {name:12} {value / 1e6:8.3f} M")
    if len(figures) == 2:
        a, b = figures.values()
        print(f"  B / A        {b / a:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
