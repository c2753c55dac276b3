"""Registering workflows: events, the workflows view, discovery in a repo and
the registration service."""
