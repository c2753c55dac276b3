"""The queue and its scheduling policy: events, the queue view, entries, leases and ceilings."""
