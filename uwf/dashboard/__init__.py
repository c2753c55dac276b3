"""`uwf dashboard`: a local web UI over the same commands the CLI runs.

A third surface beside the command line and `uwf mcp`: every page calls the commands
it was started among (`uwf dashboard`'s: `Context.commands`) through the invoker
they share (`uwf.invoker.invoke`) and shows their `--json` payloads, rendered by
Jinja2 templates shipped in this package; each page has a JSON twin (`?format=json`)
holding exactly those payloads. Read-only unless a token is set; with one, its
actions (`actions`) call the CLI's own commands behind the guard's checks (`guard`).
Starlette, uvicorn and Jinja2 (the `dashboard` extra) are imported only when the
server starts.
"""
