"""`uwf-llm [--model NAME] THREAD ROLE`: any OpenAI-compatible chat-completions API.

The model is --model, else `modelOverrides[ROLE]`, else `defaultModel`; its
provider gives `baseUrl` and the name of the environment variable holding the
key (`apiKeyEnv`, set in `.env` beside config.yaml). The answer is kept as the
step's detail. The output JSON is extracted by `modelOverrides.extract` when set
(a second call with a JSON-schema response format), else from the answer's
```json block. 429 and 5xx are retried with exponential backoff (no jitter:
deterministic), honouring Retry-After.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from uwf.agents.kit import agent_cli, context, submit
from uwf.agents.prompting import assemble_prompt, extract_output
from uwf.errors import Rejected, UsageError

RETRIES = 4
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0


@dataclass(frozen=True)
class Endpoint:
    alias: str
    url: str
    model: str
    key: str
    key_env: str
    provider: str


def endpoint(alias: str) -> Endpoint:
    """The model alias resolved through config: URL, model name and key."""
    from uwf.api.config import load_config

    config = load_config()
    settings = config.settings
    if alias not in settings.models:
        raise UsageError(f"unknown model {alias!r}", f"define it under models: in {config.path}")
    model = settings.models[alias]
    provider = settings.providers[model.provider]
    key = os.environ.get(provider.api_key_env) or config.secrets().get(provider.api_key_env)
    if not key:
        raise Rejected(f"{provider.api_key_env} is not set (provider {model.provider!r})",
                       f"put it in {config.env_file}")
    return Endpoint(alias, provider.base_url.rstrip("/") + "/chat/completions", model.name, key,
                    provider.api_key_env, model.provider)


def choose_model(role: str, flag: str | None) -> str:
    from uwf.api.config import load_config

    settings = load_config().settings
    chosen = flag or (settings.model_overrides or {}).get(role) or settings.default_model
    if not chosen:
        raise UsageError("no model configured", "set defaultModel in config.yaml or pass --model")
    return chosen


def chat(target: Endpoint, messages: list[dict[str, str]],
         response_format: dict[str, Any] | None = None) -> str:
    """One chat completion, retried on 429/5xx; the assistant's text."""
    import httpx

    body: dict[str, Any] = {"model": target.model, "messages": messages}
    if response_format is not None:
        body["response_format"] = response_format
    headers = {"Authorization": f"Bearer {target.key}"}
    from uwf.api.env import env_number

    timeout = env_number("UWF_LLM_TIMEOUT", 600.0, positive=True)
    retries = int(env_number("UWF_LLM_RETRIES", RETRIES, integer=True))
    base = env_number("UWF_LLM_BACKOFF_S", BACKOFF_BASE_S)
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


def extract_with_model(alias: str, role: str, schema: Any, text: str) -> Any:
    """Ask the extract model for the output JSON under a JSON-schema response format."""
    answer = chat(
        endpoint(alias),
        [{"role": "system", "content": "Extract the output JSON from the answer below. "
                                       "Reply with that JSON only."},
         {"role": "user", "content": text}],
        {"type": "json_schema", "json_schema": {"name": f"{role}_output", "schema": schema}},
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
        from uwf.api.config import load_config

        ctx = context(thread, role)  # the default, bounded history: see uwf-exec
        target = endpoint(choose_model(role, flag))
        messages = [
            {"role": "system", "content": ctx["role"].get("goal") or "You are a helpful agent."},
            {"role": "user", "content": assemble_prompt(ctx)},
        ]
        text = chat(target, messages)
        extractor = (load_config().settings.model_overrides or {}).get("extract")
        if extractor:
            output = extract_with_model(extractor, role, ctx["role"]["schema"], text)
        else:
            output = extract_output(text)
        return submit(thread, role, output, text, agent=f"uwf-llm {target.alias}")

    return agent_cli("uwf-llm", body, argv, usage=__doc__ or "")


def entry() -> None:
    sys.exit(main())
