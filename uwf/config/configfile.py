"""The seed's WorkflowConfig: agents, providers and models, from `config.yaml`.

Config: `UWF_CONFIG` > `$XDG_CONFIG_HOME/uwf/config.yaml` > `~/.config/uwf/config.yaml`
(resolved in `uwf.config.settings`), with an optional `.env` beside it. The `.env`
values go into agent environments only: never into events, CAS nodes or output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import msgspec

from uwf.errors import Rejected, UsageError


class ProviderConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    base_url: str
    api_key_env: str


class ModelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    provider: str
    name: str


class AgentConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    command: str
    args: list[str] = []


class WorkflowConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    providers: dict[str, ProviderConfig] = {}
    models: dict[str, ModelConfig] = {}
    agents: dict[str, AgentConfig] = {}
    default_agent: str | None = None
    agent_overrides: dict[str, dict[str, str]] | None = None
    default_model: str | None = None
    model_overrides: dict[str, str] | None = None
    # Steps of history `agent_context` gives by default (`all`: every one); UWF_HISTORY wins.
    history_limit: int | str | None = None


@dataclass(frozen=True)
class Config:
    """The loaded config, where it came from, and the `.env` beside it."""

    settings: WorkflowConfig
    path: Path | None
    env_file: Path | None

    def secrets(self) -> dict[str, str]:
        """The `.env` values (for agent environments only). A `.env` that is not a
        regular file of at most MAX_DOTENV_BYTES is Rejected, naming it; text that is
        not UTF-8 raises UnicodeDecodeError, for the caller to name the file."""
        if self.env_file is None or not self.env_file.exists():
            return {}
        import io

        from dotenv import dotenv_values

        from uwf.config.inputfile import MAX_DOTENV_BYTES, read_input

        # Read here, not by python-dotenv, which opens a FIFO (and waits for a writer).
        data = read_input(self.env_file, MAX_DOTENV_BYTES, error=Rejected,
                          action="fix or remove that file")
        _quiet_dotenv()
        # newline=None: the universal newlines of the text file python-dotenv opened.
        stream = io.StringIO(data.decode("utf-8"), newline=None)
        return {k: v for k, v in dotenv_values(stream=stream).items() if v is not None}


def _quiet_dotenv() -> None:
    """python-dotenv logs a line it cannot parse (a quote left open) as a warning, which
    Python prints raw on stderr when no logging is configured: a second line beside a
    one-line error, on every command. The line is skipped, as it is for the agents."""
    import logging  # (python-dotenv imports it anyway; a command without `.env` does not)

    logger = logging.getLogger("dotenv.main")
    if not any(isinstance(handler, logging.NullHandler) for handler in logger.handlers):
        logger.addHandler(logging.NullHandler())


def load_config(path: Path) -> Config:
    """Read and check the config at `path` (an entry point's `settings.config_path`);
    a missing file is an empty config."""
    if not path.exists():
        return Config(WorkflowConfig(), None, path.parent / ".env")
    from uwf.config.inputfile import LIMITS_DOC
    from uwf.config.yamlfile import load_yaml

    raw = load_yaml(path, "invalid config ", error=Rejected, named="the config file ",
                    too_big=f"shorten it; {LIMITS_DOC}")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise Rejected(f"invalid config {path}: it must be a YAML mapping", "see docs/agents.md")
    # Entries one by one first, so that an error names the entry (msgspec hides dict keys).
    for section, entry_type in (("providers", ProviderConfig), ("models", ModelConfig),
                                ("agents", AgentConfig)):
        entries = raw.get(section)
        for name, entry in entries.items() if isinstance(entries, dict) else ():
            try:
                msgspec.convert(entry, entry_type)
            except msgspec.ValidationError as exc:
                raise Rejected(f"invalid config {path}: "
                               f"{_field_message(exc, f'{section}.{name}')}",
                               "fix that field") from None
    try:
        settings = msgspec.convert(raw, WorkflowConfig)
    except msgspec.ValidationError as exc:
        raise Rejected(f"invalid config {path}: {_field_message(exc)}", "fix that field") from None
    problems = _cross_check(settings)
    if problems:
        raise Rejected(f"invalid config {path}: {'; '.join(problems)}", "fix those fields")
    return Config(settings, path, path.parent / ".env")


def _field_message(exc: Exception, prefix: str = "") -> str:
    """msgspec says `Expected str, got int - at $.command`: lead with the field."""
    text = " ".join(str(exc).split())
    message, _, where = text.partition(" - at `$")
    field = ".".join(part for part in (prefix, where.rstrip("`").lstrip(".")) if part)
    return f"{field or '(top level)'}: {message}"


def _cross_check(settings: WorkflowConfig) -> list[str]:
    problems = []
    agents = settings.agents
    if settings.default_agent is not None and settings.default_agent not in agents:
        problems.append(f"defaultAgent: unknown agent {settings.default_agent!r}{_known(agents)}")
    for workflow, roles in (settings.agent_overrides or {}).items():
        for role, alias in roles.items():
            if alias not in agents:
                problems.append(
                    f"agentOverrides.{workflow}.{role}: unknown agent {alias!r}{_known(agents)}"
                )
    for name, model in settings.models.items():
        if model.provider not in settings.providers:
            problems.append(f"models.{name}.provider: unknown provider {model.provider!r}"
                            f"{_known(settings.providers)}")
    if settings.default_model is not None and settings.default_model not in settings.models:
        problems.append(f"defaultModel: unknown model {settings.default_model!r}"
                        f"{_known(settings.models)}")
    for scenario, model_name in (settings.model_overrides or {}).items():
        if model_name not in settings.models:
            problems.append(f"modelOverrides.{scenario}: unknown model {model_name!r}"
                            f"{_known(settings.models)}")
    limit = settings.history_limit
    if limit is not None and (limit != "all" if isinstance(limit, str) else limit < 0):
        problems.append(f"historyLimit: must be a number of steps (0 or more) or 'all', "
                        f"not {limit!r}")
    for name, agent in agents.items():
        if not agent.command.strip():
            problems.append(f"agents.{name}.command: must not be empty")
    return problems


def _known(names: Mapping[str, object]) -> str:
    return f" (known: {', '.join(sorted(names))})" if names else " (none are defined)"


@dataclass(frozen=True)
class AgentChoice:
    """Which agent runs a step, and why (for messages and the event)."""

    name: str
    argv: list[str]
    source: str  # --agent | agentOverrides | defaultAgent


def resolve_agent(config: Config, workflow: str, role: str, flag: str | None) -> AgentChoice | None:
    """`--agent` > `agentOverrides[workflow][role]` > `defaultAgent`; None when unset."""
    agents = config.settings.agents
    if flag is not None:
        if flag in agents:
            spec = agents[flag]
            return AgentChoice(flag, [spec.command, *spec.args], "--agent")
        import shlex

        try:
            argv = shlex.split(flag)
        except ValueError as exc:
            raise UsageError(f"--agent {flag!r} is not a valid command line ({exc})",
                             "fix its quoting") from None
        if not argv:
            raise UsageError("--agent is empty", "give an agent name or a command")
        return AgentChoice(flag, argv, "--agent")
    override = (config.settings.agent_overrides or {}).get(workflow, {}).get(role)
    if override is not None:
        spec = agents[override]
        return AgentChoice(override, [spec.command, *spec.args], "agentOverrides")
    if config.settings.default_agent is not None:
        spec = agents[config.settings.default_agent]
        return AgentChoice(config.settings.default_agent, [spec.command, *spec.args],
                           "defaultAgent")
    return None
