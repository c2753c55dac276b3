"""The worker: picks queue entries, runs their threads, reports back."""
