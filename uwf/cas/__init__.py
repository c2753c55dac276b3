"""The typed content-addressed store, hash-compatible with json-cas (SPEC §4)."""
