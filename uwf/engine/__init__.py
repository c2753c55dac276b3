"""The event log, its clock and lock, and the generic view store: the only truth."""
