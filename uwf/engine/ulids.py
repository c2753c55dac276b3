"""New ULIDs: 48 bits of epoch milliseconds, then 80 random bits, as 26 Crockford Base32
characters (the ULID spec's layout, read by `python-ulid` and every other ULID library).

Made here rather than through `python-ulid`: a command mints several (each event's id,
a lease's, a step's, 50,000 entries' in one `queue add --batch`), and its objects cost
about 5 x more a string than a lookup of 10 bits at a time.
"""

from __future__ import annotations

import os

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every 10-bit value as its two characters: a 130-bit ULID (two leading zero bits) is 13.
_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)
_SHIFTS = tuple(range(120, -1, -10))
_TIME_LIMIT = 1 << 48


def randomness() -> bytes:
    """A ULID's 80 random bits (a test may set this to a counter, as python-ulid's
    `default_generator` allows, so that ids are the same on every run)."""
    return os.urandom(10)


def _text(value: int) -> str:
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


def _checked(ms: int) -> int:
    if not 0 <= ms < _TIME_LIMIT:
        raise ValueError(f"a ULID's time is 0 to 2**48 - 1 ms, not {ms}")
    return ms << 80


def new_ulid(ms: int) -> str:
    """A ULID of time `ms` with fresh random bits."""
    return _text(_checked(ms) | int.from_bytes(randomness(), "big"))


def new_ulids(ms: int, count: int) -> list[str]:
    """`count` ULIDs of time `ms`, increasing: random bits to start from, counted up (the
    top random bit left clear, so the count stays within the millisecond)."""
    first = _checked(ms) | (int.from_bytes(randomness(), "big") & ~(1 << 79))
    return [_text(first + n) for n in range(count)]
