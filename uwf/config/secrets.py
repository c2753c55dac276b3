"""Which values are secret, so they never reach the log, the CAS or the output.

A secret is the value of every configured provider's `apiKeyEnv` and of the
variable `UWF_API_KEY_ENV` names (from the environment or `.env`), every `.env`
value, and every environment variable whose name ends in `_KEY`, `_TOKEN`,
`_SECRET` or `_PASSWORD`. Only values of
`MIN_LENGTH`+ characters are masked: shorter ones match too much ordinary text.
`uwf.redact` does the masking; this module only decides what to mask.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from uwf.config.configfile import Config
    from uwf.redact import Redact

SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
MIN_LENGTH = 8


def secret_values(env: Mapping[str, str], config: Config | None) -> list[str]:
    """Every secret value of `env` and `config` (unfiltered by length; `redactor`
    drops those under `MIN_LENGTH`), each once, in a stable order."""
    dotenv = config.secrets() if config is not None else {}
    values: list[str] = []
    if config is not None:
        for provider in config.settings.providers.values():
            # As for agents: the process environment wins over `.env`.
            key = env.get(provider.api_key_env) or dotenv.get(provider.api_key_env)
            if key:
                values.append(key)
    # uwf-llm's key when the environment names its variable (docs/agents.md#uwf-llm).
    key_env = env.get("UWF_API_KEY_ENV") or dotenv.get("UWF_API_KEY_ENV")
    if key_env:
        values.append(env.get(key_env.strip()) or dotenv.get(key_env.strip()) or "")
    values += dotenv.values()
    values += [value for name, value in env.items() if name.upper().endswith(SECRET_SUFFIXES)]
    return list(dict.fromkeys(value for value in values if value))


def load_redactor(env: Mapping[str, str], config_path: Path) -> Redact | None:
    """The redactor for `env` and the config at `config_path` (an entry point's
    `settings.config_path`), or None when there is nothing to mask.

    The CLI calls this once per command, so it stays cheap: the YAML is parsed (and
    PyYAML imported, ~15 ms) only when the config file names an `apiKeyEnv`, the
    one thing it adds beyond `.env` and the environment. A config that fails to
    load still has its `.env` masked: the commands that use the config report the
    problem, and masking must not depend on it being valid.
    """
    from uwf.redact import redactor

    if not config_path.exists() and not (config_path.parent / ".env").exists():
        # Nothing to read but the environment: the config's modules stay unimported.
        return redactor(secret_values(env, None), min_length=MIN_LENGTH)
    from uwf.config.configfile import Config, WorkflowConfig, load_config
    from uwf.config.inputfile import read_input
    from uwf.config.yamlfile import MAX_FILE_BYTES
    from uwf.errors import Rejected, UwfError

    config = Config(WorkflowConfig(), None, config_path.parent / ".env")
    try:
        if b"apiKeyEnv" in read_input(config_path, MAX_FILE_BYTES, error=Rejected):
            config = load_config(config_path)
    except (OSError, UwfError):
        pass  # no config, or one its commands will reject: `.env` and the environment
    try:
        values = secret_values(env, config)
    except (OSError, UnicodeDecodeError, UwfError):
        values = secret_values(env, None)  # an unreadable `.env`: at least the environment
    return redactor(values, min_length=MIN_LENGTH)
