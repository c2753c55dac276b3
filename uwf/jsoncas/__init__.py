"""The `json-cas` commands over a store's CAS."""
