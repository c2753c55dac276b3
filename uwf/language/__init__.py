"""Workflow logic: the graph model, compiling YAML, templates, the moderator, routing."""
