"""The per-run archive: the folder, its lines, sync and verify."""
