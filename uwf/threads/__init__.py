"""Threads: events, the threads and steps views, stepping, the agent kit's
context and submit, and agent processes."""
