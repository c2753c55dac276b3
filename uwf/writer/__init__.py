"""The resident writer: one process that owns a folder store's writes (`uwf writer`)."""
