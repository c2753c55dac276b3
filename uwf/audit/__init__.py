"""The audited log: `log verify` and signed anchors."""
