"""Moved to `uwf.redact` (temporary alias while the CLI is rewired)."""

from uwf.redact import MASK, Redact, redact_value, redactor

__all__ = ["MASK", "Redact", "redact_value", "redactor"]
