"""LLM settings, from wherever the user put them, with one precedence:

    command-line flag  >  KERNELGEN_* variables  >  OPENAI_API_KEY / OPENAI_BASE_URL
    >  config file (`<config dir>/config.toml` or `config.yaml`)  >  defaults

The config dir is `typer.get_app_dir("kernelgen")` unless KERNELGEN_CONFIG_DIR names another (tests
point it at a temporary folder). Each effective value remembers where it came from, so
`kernelgen config` can say why a setting is what it is.

The API key is a `SecretStr`: it prints as `**********`, is never written to disk by KernelGen and
never reaches a candidate's process (kernelgen.verify.judge.runner strips it from the child's environment).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from kernelgen.errors import ConfigError
from kernelgen.verify.judge.scrub import register_secret

DEFAULT_MODEL = "gpt-4o"

# setting -> the KERNELGEN_* variable that sets it. KERNELGEN_TIMEOUT is taken (the harness's
# child timeout), hence KERNELGEN_LLM_TIMEOUT.
ENV_VARS: dict[str, str] = {
    "model": "KERNELGEN_MODEL",
    "base_url": "KERNELGEN_BASE_URL",
    "api_key": "KERNELGEN_API_KEY",
    "temperature": "KERNELGEN_TEMPERATURE",
    "timeout_s": "KERNELGEN_LLM_TIMEOUT",
    "max_retries": "KERNELGEN_MAX_RETRIES",
    "max_tokens": "KERNELGEN_MAX_TOKENS",
    "repairs": "KERNELGEN_REPAIRS",
    "candidates": "KERNELGEN_CANDIDATES",
    "replay_mismatch": "KERNELGEN_REPLAY_MISMATCH",
}
# The variables every OpenAI tool reads; below ours so KERNELGEN_* can override a shell-wide key.
OPENAI_VARS: dict[str, str] = {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL"}
# Names accepted in the config file (and their spelling there).
FILE_KEYS: dict[str, str] = {
    "model": "model",
    "base_url": "base_url",
    "api_key": "api_key",
    "temperature": "temperature",
    "timeout": "timeout_s",
    "max_retries": "max_retries",
    "max_tokens": "max_tokens",
    "repairs": "repairs",
    "candidates": "candidates",
    "replay_mismatch": "replay_mismatch",
}
CONFIG_FILES = ("config.toml", "config.yaml", "config.yml")


class LLMSettings(BaseModel):
    """Effective LLM settings. `sources` maps each field to where its value came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key: SecretStr | None = None
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    timeout_s: float = Field(default=300.0, gt=0)  # per request; reasoning models think for minutes
    max_retries: int = Field(default=3, ge=0, le=20)  # the openai client's own retries (429, 5xx, timeouts)
    max_tokens: int = Field(default=8192, ge=256)
    repairs: int = Field(default=3, ge=0, le=20)  # repair prompts after a failing candidate
    candidates: int = Field(default=1, ge=1, le=16)  # proposals asked for per optimization round
    # --backend replay when this run's prompt differs from the recorded one: warn and go on, or refuse.
    replay_mismatch: Literal["warn", "refuse"] = "warn"
    sources: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)

    @property
    def has_endpoint(self) -> bool:
        return bool(self.base_url) or bool(self.api_key and self.api_key.get_secret_value())


def config_dir() -> Path:
    override = os.environ.get("KERNELGEN_CONFIG_DIR")
    if override:
        return Path(override)
    import typer

    return Path(typer.get_app_dir("kernelgen"))


def config_file() -> Path | None:
    """The config file in use: the first of config.toml, config.yaml, config.yml that exists."""
    d = config_dir()
    return next((d / n for n in CONFIG_FILES if (d / n).is_file()), None)


def _read_file(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".toml":
            try:
                import tomllib  # Python 3.11+
            except ImportError:
                raise ConfigError(f"{path}: reading TOML needs Python 3.11; write the same settings as config.yaml") from None
            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text) or {}
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - tomllib and yaml raise their own error types
        # Position and problem only: yaml's full message quotes the line, which may hold the key.
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: {getattr(e, 'problem', '')}" if mark else str(e)
        raise ConfigError(f"{path}: cannot parse the config file: {where}") from None
    if isinstance(data, dict) and isinstance(data.get("llm"), dict) and len(data) == 1:
        data = data["llm"]  # an `[llm]` table is accepted as well as top-level keys
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config file must be a table of settings (key = value)")
    unknown = sorted(set(data) - set(FILE_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(FILE_KEYS)}")
    return {FILE_KEYS[k]: v for k, v in data.items()}


def load_settings(overrides: dict[str, Any] | None = None, *, environ: dict[str, str] | None = None) -> LLMSettings:
    """Merge every source by precedence; raise ConfigError naming the source of a bad value."""
    env = os.environ if environ is None else environ
    # (setting, value, where it came from), lowest precedence first: later entries win.
    found: list[tuple[str, Any, str]] = []
    path = config_file()
    if path is not None:
        found += [(k, v, str(path)) for k, v in _read_file(path).items()]
    found += [(f, env[v], f"environment ({v})") for f, v in OPENAI_VARS.items() if env.get(v)]
    found += [(f, env[v], f"environment ({v})") for f, v in ENV_VARS.items() if env.get(v)]
    found += [(k, v, "command line") for k, v in (overrides or {}).items()
              if v is not None and k in LLMSettings.model_fields and k != "sources"]

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value, where in found:
        values[key] = value
        sources[key] = where
    try:
        settings = LLMSettings(**values)
    except ValidationError as e:
        problems = []
        for err in e.errors(include_url=False):
            key = str(err["loc"][0]) if err["loc"] else ""
            # Never echo the input value: it may be the key.
            problems.append(f"{key} (from {sources.get(key, 'defaults')}): {err['msg']}")
        raise ConfigError("invalid LLM settings:\n  " + "\n  ".join(problems)) from None
    for key in LLMSettings.model_fields:
        if key != "sources":
            sources.setdefault(key, "default")
    if settings.api_key is not None:
        register_secret(settings.api_key.get_secret_value())  # scrubbed from every candidate's output too
    return settings.model_copy(update={"sources": sources})


def missing_endpoint_message() -> str:
    where = config_dir() / CONFIG_FILES[0]
    return (
        "--backend openai needs an LLM endpoint, and none is configured. Set one of:\n"
        "  OPENAI_API_KEY (or KERNELGEN_API_KEY)   the key, for api.openai.com or a server that needs one\n"
        "  OPENAI_BASE_URL (or KERNELGEN_BASE_URL, or --base-url)   any OpenAI-compatible server, "
        "e.g. http://localhost:8000/v1 (a local server may need no key)\n"
        f"or put `api_key = \"...\"` / `base_url = \"...\"` in {where}"
    )


def require_endpoint(settings: LLMSettings) -> LLMSettings:
    """Fail before any work when there is nothing to talk to."""
    if not settings.has_endpoint:
        raise ConfigError(missing_endpoint_message(),
                          hint="or use --backend offline (built-in generator, no LLM)")
    return settings


def llm_configured() -> bool:
    """True when an endpoint or key is configured anywhere KernelGen looks (used by `--backend auto`)."""
    try:
        return load_settings().has_endpoint
    except ConfigError:
        # A broken config file still means the user meant to configure an LLM: choose openai,
        # whose `prepare` then reports the problem instead of silently going offline.
        return True


def describe_settings(settings: LLMSettings) -> list[tuple[str, str, str]]:
    """(setting, value for display, source) rows; the key is shown only as set / not set."""
    rows = []
    file_names = {field: name for name, field in FILE_KEYS.items()}  # show the names a user writes
    for key in LLMSettings.model_fields:
        if key == "sources":
            continue
        value = getattr(settings, key)
        if key == "api_key":
            shown = "set (hidden)" if value is not None and value.get_secret_value() else "not set"
        else:
            shown = "not set" if value is None else str(value)
        rows.append((file_names.get(key, key), shown, settings.sources.get(key, "default")))
    return rows
