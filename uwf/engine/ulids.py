"""New ULIDs: 48 bits of epoch milliseconds, then 80 random bits, as 26 Crockford Base32
characters (the ULID spec's layout, read by `python-ulid` and every other ULID library).

Monotonic within a millisecond, as the spec's option and python-ulid do: the first id of
a millisecond draws its random bits (the top one clear, leaving room to count), the next
ones of the same millisecond count up from it. So the ids one process mints in order sort
in that order even when the clock stands still (`--now`, a fixed clock in tests): two
runs started in one instant list in the order they were started.

Made here rather than through `python-ulid`: a command mints several (each event's id,
a lease's, a step's, 50,000 entries' in one `queue add --batch`), and its objects cost
about 5 x more a string than a lookup of 10 bits at a time.
"""

from __future__ import annotations

import os
import threading

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every 10-bit value as its two characters: a 130-bit ULID (two leading zero bits) is 13.
_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)
_SHIFTS = tuple(range(120, -1, -10))
_TIME_LIMIT = 1 << 48
_ROOM = ~(1 << 79)  # a millisecond's first random bits, its top bit clear


def randomness() -> bytes:
    """A ULID's 80 random bits (a test may set this to a counter, as python-ulid's
    `default_generator` allows, so that ids are the same on every run)."""
    return os.urandom(10)


class _Last:
    """The last id minted in this process, so the next of its millisecond follows it
    (like python-ulid's default generator: the one piece of state ids need)."""

    def __init__(self) -> None:
        self.value = 0
        self.lock = threading.Lock()
        # An id's first 22 characters (all but its low 20 bits) as last spelled, with
        # those bits: the ids of a millisecond share them (`new_ulid`).
        self.prefix: tuple[int, str] = (-1, "")

    def take(self, ms: int, count: int) -> int:
        """The first of `count` ids of time `ms`; the last of them is kept."""
        if not 0 <= ms < _TIME_LIMIT:
            raise ValueError(f"a ULID's time is 0 to 2**48 - 1 ms, not {ms}")
        with self.lock:
            if self.value >> 80 == ms and (self.value & ((1 << 80) - 1)) + count < 1 << 80:
                first = self.value + 1
            else:
                first = (ms << 80) | (int.from_bytes(randomness(), "big") & _ROOM)
            self.value = first + count - 1
        return first


_LAST = _Last()


def _text(value: int) -> str:
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


def new_ulid(ms: int) -> str:
    """A ULID of time `ms`, after every earlier one of the same millisecond (the
    first 22 characters spelled once for the ids that share them, as `new_ulids`)."""
    last = _LAST
    value = last.take(ms, 1)
    prefix = last.prefix
    if prefix[0] != value >> 20:
        last.prefix = prefix = (value >> 20, _text(value)[:22])
    low = value & 0xFFFFF
    return prefix[1] + _PAIRS[low >> 10] + _PAIRS[low & 1023]


def new_ulids(ms: int, count: int) -> list[str]:
    """`count` ULIDs of time `ms`, increasing: the same ids as `count` calls of
    `new_ulid` in that millisecond. Consecutive ids share their first 22 characters
    (all but the low 20 bits) for 2**20 values at a time: those are spelled once, and
    each id adds its last two pairs (a batch of 50,000 entries mints 100,000 ids)."""
    value = _LAST.take(ms, count)
    end = value + count
    pairs = _PAIRS
    found: list[str] = []
    while value < end:
        stop = min(end, ((value >> 20) + 1) << 20)
        prefix = _text(value)[:22]
        low = value & 0xFFFFF
        found.extend([prefix + pairs[n >> 10] + pairs[n & 1023]
                      for n in range(low, low + stop - value)])
        value = stop
    return found
