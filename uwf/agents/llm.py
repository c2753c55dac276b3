"""`uwf-llm [--model NAME] THREAD ROLE`: any OpenAI-compatible chat-completions API.

The model is --model, else UWF_LLM_MODEL or UWF_MODEL, else `modelOverrides[ROLE]`,
else `defaultModel`: a `models:` alias from config.yaml, whose provider gives
`baseUrl` and the name of the variable holding the key (`apiKeyEnv`), or any
model name the endpoint knows when UWF_BASE_URL or UWF_PROVIDER names one.
UWF_BASE_URL and UWF_API_KEY_ENV win over the provider's `baseUrl` and
`apiKeyEnv`. The answer is kept as the step's detail. The output JSON is
extracted by UWF_EXTRACT_MODEL, else `modelOverrides.extract`, when set (`none`:
not at all) with a second call under a JSON-schema response format, else taken
from the answer's ```json block. 429 and 5xx are retried with exponential backoff
(no jitter: deterministic), honouring Retry-After. Every variable is read from
the environment over the config's `.env`, which holds the keys.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uwf.agents.kit import agent_cli, context, environment, submit
from uwf.agents.prompting import assemble_prompt, extract_output
from uwf.errors import Rejected, UsageError

if TYPE_CHECKING:
    from uwf.config.configfile import Config

RETRIES = 4
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
# The key's variable when neither UWF_API_KEY_ENV nor a provider's apiKeyEnv names one.
DEFAULT_KEY_ENV = "UWF_API_KEY"


@dataclass(frozen=True)
class Endpoint:
    alias: str
    url: str
    model: str
    key: str
    key_env: str
    provider: str


def _setting(env: Mapping[str, str], *names: str) -> str | None:
    """The first of `names` set to something other than blanks, stripped."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def endpoint(alias: str, config: Config, env: Mapping[str, str]) -> Endpoint:
    """The model `alias` resolved to a URL, model name and key.

    A `models:` alias gives its provider and name; any other name needs an endpoint
    from the environment: UWF_BASE_URL, or the provider UWF_PROVIDER names.
    UWF_BASE_URL and UWF_API_KEY_ENV win over the provider's baseUrl and apiKeyEnv.
    """
    settings = config.settings
    provider_name = _setting(env, "UWF_PROVIDER")
    model_name = alias
    if alias in settings.models:
        model_name = settings.models[alias].name
        provider_name = settings.models[alias].provider
    elif provider_name is None and _setting(env, "UWF_BASE_URL") is None:
        where = f"under models: in {config.path}" if config.path else "in config.yaml"
        raise UsageError(f"unknown model {alias!r}",
                         f"define it {where}, or set UWF_BASE_URL or UWF_PROVIDER")
    provider = settings.providers.get(provider_name) if provider_name else None
    if provider_name and provider is None and _setting(env, "UWF_BASE_URL") is None:
        raise UsageError(f"unknown provider {provider_name!r} (UWF_PROVIDER)",
                         f"define it under providers: in {config.path or 'config.yaml'}")
    base_url = _setting(env, "UWF_BASE_URL") or (provider.base_url if provider else "")
    key_env = (_setting(env, "UWF_API_KEY_ENV")
               or (provider.api_key_env if provider else DEFAULT_KEY_ENV))
    label = provider_name if provider is not None and provider_name else "UWF_BASE_URL"
    key = env.get(key_env)  # `env` already holds `.env` under the environment
    if not key:
        raise Rejected(f"{key_env} is not set (provider {label!r})",
                       f"put it in {config.env_file}")
    return Endpoint(alias, base_url.rstrip("/") + "/chat/completions", model_name, key,
                    key_env, label)


def choose_model(role: str, flag: str | None, config: Config, env: Mapping[str, str]) -> str:
    """--model > UWF_LLM_MODEL > UWF_MODEL > modelOverrides[role] > defaultModel."""
    settings = config.settings
    chosen = (flag or _setting(env, "UWF_LLM_MODEL", "UWF_MODEL")
              or (settings.model_overrides or {}).get(role) or settings.default_model)
    if not chosen:
        raise UsageError("no model configured",
                         "set defaultModel in config.yaml, UWF_MODEL, or pass --model")
    return chosen


def extract_model(config: Config, env: Mapping[str, str]) -> str | None:
    """UWF_EXTRACT_MODEL (`none`: no extraction call) > modelOverrides.extract."""
    chosen = _setting(env, "UWF_EXTRACT_MODEL")
    if chosen is not None:
        return None if chosen.lower() == "none" else chosen
    return (config.settings.model_overrides or {}).get("extract")


def chat(target: Endpoint, messages: list[dict[str, str]],
         response_format: dict[str, Any] | None = None,
         env: Mapping[str, str] | None = None) -> str:
    """One chat completion, retried on 429/5xx; the assistant's text. UWF_LLM_TIMEOUT,
    UWF_LLM_RETRIES and UWF_LLM_BACKOFF_S come from `env` (default: the environment)."""
    import httpx

    body: dict[str, Any] = {"model": target.model, "messages": messages}
    if response_format is not None:
        body["response_format"] = response_format
    headers = {"Authorization": f"Bearer {target.key}"}
    from uwf.config.env import env_number

    env = os.environ if env is None else env
    timeout = env_number("UWF_LLM_TIMEOUT", 600.0, positive=True, environ=env)
    retries = int(env_number("UWF_LLM_RETRIES", RETRIES, integer=True, environ=env))
    base = env_number("UWF_LLM_BACKOFF_S", BACKOFF_BASE_S, environ=env)
    with httpx.Client(timeout=timeout) as client:
        for attempt in range(retries + 1):
            try:
                response = client.post(target.url, json=body, headers=headers)
            except httpx.HTTPError as exc:
                if attempt == retries:
                    raise Rejected(f"cannot reach {target.url}: {exc}",
                                   "check baseUrl and the network") from None
                time.sleep(min(base * 2**attempt, BACKOFF_CAP_S))
                continue
            status = response.status_code
            if status in (401, 403):
                raise Rejected(
                    f"provider {target.provider!r} rejected the API key in {target.key_env} "
                    f"(HTTP {status})", f"check {target.key_env} in .env")
            if status == 429 or status >= 500:
                if attempt == retries:
                    raise Rejected(f"{target.url} answered HTTP {status} after "
                                   f"{retries + 1} attempts", "retry later")
                time.sleep(_delay(response.headers.get("retry-after"), base, attempt))
                continue
            if status >= 400:
                raise Rejected(f"{target.url} answered HTTP {status}: {response.text[:200]}",
                               "check the model name and request")
            try:
                return str(response.json()["choices"][0]["message"]["content"])
            except (ValueError, KeyError, IndexError, TypeError):
                raise Rejected(f"{target.url} returned no chat completion",
                               "check that baseUrl is OpenAI-compatible") from None
    raise AssertionError("unreachable")


def _delay(retry_after: str | None, base: float, attempt: int) -> float:
    if retry_after:
        try:
            return min(float(retry_after), BACKOFF_CAP_S)
        except ValueError:
            pass
    return float(min(base * 2**attempt, BACKOFF_CAP_S))


def extract_with_model(target: Endpoint, role: str, schema: Any, text: str,
                       env: Mapping[str, str] | None = None) -> Any:
    """Ask the extract model for the output JSON under a JSON-schema response format."""
    answer = chat(
        target,
        [{"role": "system", "content": "Extract the output JSON from the answer below. "
                                       "Reply with that JSON only."},
         {"role": "user", "content": text}],
        {"type": "json_schema", "json_schema": {"name": f"{role}_output", "schema": schema}},
        env,
    )
    try:
        return json.loads(answer)
    except json.JSONDecodeError:
        return extract_output(answer)


def main(argv: list[str] | None = None) -> int:
    def body(thread: str, role: str, rest: list[str]) -> str:
        flag = rest[1] if len(rest) == 2 and rest[0] == "--model" else None
        if rest and flag is None:
            raise UsageError(f"unexpected arguments {rest}", "uwf-llm [--model NAME] THREAD ROLE")
        from uwf.config.configfile import load_config
        from uwf.config.settings import config_path

        env = environment()
        config = load_config(config_path(os.environ))
        target = endpoint(choose_model(role, flag, config, env), config, env)
        extractor_name = extract_model(config, env)
        # Resolved before the first call, so a bad extract setting costs no tokens.
        extractor = endpoint(extractor_name, config, env) if extractor_name else None
        ctx = context(thread, role, env=env)  # the default, bounded history: see uwf-exec
        messages = [
            {"role": "system", "content": ctx["role"].get("goal") or "You are a helpful agent."},
            {"role": "user", "content": assemble_prompt(ctx)},
        ]
        text = chat(target, messages, env=env)
        if extractor is not None:
            output = extract_with_model(extractor, role, ctx["role"]["schema"], text, env)
        else:
            output = extract_output(text)
        return submit(thread, role, output, text, agent=f"uwf-llm {target.alias}", env=env)

    return agent_cli("uwf-llm", body, argv, usage=__doc__ or "")


def entry() -> None:
    sys.exit(main())
