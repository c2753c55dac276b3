"""uwf: an event-sourced control plane for agent workflows."""

__version__ = "0.1.0"
