"""The agent kit and the shipped agents (uwf-mock, uwf-exec, uwf-llm, uwf-subflow)."""
