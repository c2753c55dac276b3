"""The Python API: one function per command; the CLI only renders these."""
