"""The commands, below every surface: how a command is declared (`spec`), what it runs
with (`context`: the global options, the settings and store they open), its arguments
as every surface sees them (`params`), id arguments made whole (`ids`), and the one
invoker every surface calls (`invoke`): argument values in, a typed result or a
classified refusal out, progress as a callback. The command line (`uwf.cli`), the MCP
server (`uwf.cli.mcp`) and the dashboard (`uwf.dashboard`) render what it gives."""
