"""Default bounds on what a long thread costs, in one place for the CLI, the API and agents.

This module imports nothing, so a command-line declaration can use these as
its defaults without loading the store.
"""

from __future__ import annotations

# `uwf thread run --max-steps` and `uwf-subflow --max-steps`: a loop that never
# reaches $END (a reviewer that never approves) stops after this many steps.
DEFAULT_MAX_STEPS = 200

# `agent_context`'s history: the last this many steps, unless the caller, UWF_HISTORY
# or the config's `historyLimit` says otherwise. Bounded so that an agent putting
# the history in its prompt costs the same on the 1,000th step as on the 20th.
DEFAULT_HISTORY = 20

# The longest a step's agent may run (`--timeout`): a year. So a step's deadline is
# always a date every clock function prints, and one further away than this is
# evidence that its step can never report back (taken over at once).
MAX_TIMEOUT_S = 31_536_000

# `uwf-subflow --max-depth`: how many subflows may run inside one another. A workflow
# whose role is played by a subflow of itself stops there, its step failed, instead
# of starting child threads without end.
DEFAULT_SUBFLOW_DEPTH = 8
