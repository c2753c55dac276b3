"""Errors that carry their exit code and the next action for the user.

Exit codes (SPEC §8): 0 ok; 1 not found, invalid state or rejected; 2 usage;
3 nothing to pick or lease.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3


class UwfError(Exception):
    """A failure the user can act on: printed as one line, never a traceback."""

    exit_code = EXIT_REJECTED

    def __init__(self, what: str, next_action: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.next_action = next_action

    def line(self) -> str:
        """The one-line form: `<what>; <next action>`."""
        return f"{self.what}; {self.next_action}" if self.next_action else self.what


class NotFound(UwfError):
    """The named entity, node or file does not exist."""


class Rejected(UwfError):
    """The command is invalid against the current state; nothing was written."""


class UsageError(UwfError):
    """The command line itself is wrong."""

    exit_code = EXIT_USAGE


class NothingToDo(UwfError):
    """Nothing to pick or lease."""

    exit_code = EXIT_NOTHING


class StoreBusy(UwfError):
    """Another writer held the lock past the bounded wait."""


class Corrupt(UwfError):
    """The log, a view or a node does not match what it must be: fail closed."""


class StoreUnavailable(UwfError):
    """The store could not be read or written just now (an I/O error, a full disk):
    transient, so nothing is deleted or rebuilt because of it."""


class OldFormat(UwfError):
    """The store was written in a format this uwf no longer reads: fail closed, never
    reinterpret it."""


class Conflict(UwfError):
    """A write stated the version of a subject it decided on (optimistic concurrency),
    and the subject has moved since: nothing was written. Read it again, decide again,
    retry (exit 1: the command is invalid against the current state)."""


class BrokerUnavailable(UwfError):
    """The MQTT broker could not be reached, refused the connection, or did not
    acknowledge in time: transient, and what uwf recorded stays recorded."""
