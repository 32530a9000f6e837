"""LLM configuration: precedence, the config file, the missing-endpoint error, keys kept secret."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.llm.config import describe_settings, llm_configured, load_settings
from kernelgen.errors import ConfigError
from kernelgen.llm.setup import prepare

KEY = "sk-test-SECRET-0123456789"


def test_defaults_without_anything(llm_env):
    s = load_settings()
    assert s.api_key is None and s.base_url is None and not s.has_endpoint
    assert s.sources["model"] == "default"
    assert not llm_configured()


def test_precedence_flag_over_kernelgen_over_openai_over_file(llm_env, monkeypatch):
    (llm_env / "config.toml").write_text('model = "from-file"\nbase_url = "http://file/v1"\ntemperature = 0.7\n'
                                         'api_key = "file-key"\nrepairs = 5\n')
    s = load_settings()
    assert (s.model, s.base_url, s.temperature, s.repairs) == ("from-file", "http://file/v1", 0.7, 5)
    assert s.sources["model"].endswith("config.toml")

    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-env/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    s = load_settings()
    assert s.base_url == "http://openai-env/v1" and s.api_key.get_secret_value() == "openai-key"
    assert s.sources["base_url"] == "environment (OPENAI_BASE_URL)"

    monkeypatch.setenv("KERNELGEN_BASE_URL", "http://kg-env/v1")
    monkeypatch.setenv("KERNELGEN_MODEL", "from-env")
    monkeypatch.setenv("KERNELGEN_TEMPERATURE", "0.1")
    s = load_settings()
    assert (s.base_url, s.model, s.temperature) == ("http://kg-env/v1", "from-env", 0.1)
    assert s.sources["model"] == "environment (KERNELGEN_MODEL)"

    s = load_settings({"model": "from-flag", "base_url": None})
    assert s.model == "from-flag" and s.sources["model"] == "command line"
    assert s.base_url == "http://kg-env/v1"  # a flag left unset does not override
    assert s.repairs == 5 and s.sources["repairs"].endswith("config.toml")


def test_yaml_config_file_and_llm_table(llm_env):
    (llm_env / "config.yaml").write_text("model: yaml-model\nbase_url: http://yaml/v1\n")
    assert load_settings().model == "yaml-model"
    assert llm_configured()
    (llm_env / "config.yaml").unlink()
    (llm_env / "config.toml").write_text('[llm]\nmodel = "table-model"\n')
    assert load_settings().model == "table-model"


def test_bad_config_names_the_file_and_the_setting(llm_env, monkeypatch):
    (llm_env / "config.toml").write_text('modle = "typo"\n')
    with pytest.raises(ConfigError, match=r"config.toml: unknown setting\(s\) modle"):
        load_settings()
    (llm_env / "config.toml").write_text("temperature = 9\n")
    with pytest.raises(ConfigError, match="temperature"):
        load_settings()
    (llm_env / "config.toml").unlink()
    monkeypatch.setenv("KERNELGEN_MAX_TOKENS", "lots")
    with pytest.raises(ConfigError, match=r"max_tokens \(from environment \(KERNELGEN_MAX_TOKENS\)\)"):
        load_settings()


def test_key_is_secret_everywhere(llm_env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    s = load_settings()
    assert KEY not in repr(s) and KEY not in str(s) and KEY not in s.model_dump_json()
    rows = describe_settings(s)
    assert ("api_key", "set (hidden)", "environment (OPENAI_API_KEY)") in rows
    assert all(KEY not in " ".join(r) for r in rows)
    # and the judge's workers never see it
    from pathlib import Path

    from kernelgen.devices import DeviceInfo
    from kernelgen.verify.judge.session import worker_environment

    monkeypatch.setenv("KERNELGEN_API_KEY", KEY)
    env = worker_environment(DeviceInfo("cpu", "cpu", interpreter=True), Path("/tmp/scratch"))
    assert KEY not in env.values() and not any("KEY" in k for k in env)


def test_openai_backend_without_endpoint_fails_before_work(llm_env):
    with pytest.raises(ConfigError) as e:
        prepare("openai", {})
    assert "OPENAI_API_KEY" in e.value.message and "OPENAI_BASE_URL" in e.value.message
    assert e.value.exit_code == 2
    prepare("openai", {"base_url": "http://localhost:9/v1"})  # a keyless local server is fine


def test_replay_needs_a_recording(llm_env, tmp_path):
    with pytest.raises(ConfigError, match="--replay"):
        prepare("replay", {})
    with pytest.raises(ConfigError, match="no such folder"):
        prepare("replay", {"replay": tmp_path / "nothing"})
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no recorded exchanges"):
        prepare("replay", {"replay": tmp_path / "empty"})


def test_cli_new_openai_without_config_exits_2_naming_what_to_set(llm_env, tmp_path, repo):
    """Acceptance (3)."""
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["new", str(repo / "operator_specs/broadcast.yaml"), "--backend", "openai",
                                      "--out", str(out)])
    assert result.exit_code == 2, result.output
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "OPENAI_API_KEY" in text and "OPENAI_BASE_URL" in text
    assert not out.exists()  # nothing written


def test_cli_config_shows_sources_and_hides_the_key(llm_env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("KERNELGEN_MODEL", "my-model")
    result = CliRunner().invoke(app, ["config"])
    assert result.exit_code == 0, result.output
    assert KEY not in result.output
    assert "set (hidden)" in result.output and "my-model" in result.output and "KERNELGEN_MODEL" in result.output


def test_config_parse_error_never_quotes_the_key(llm_env):
    (llm_env / "config.yaml").write_text(f'api_key: "{KEY}\nmodel: x\n')
    with pytest.raises(ConfigError, match="cannot parse") as e:
        load_settings()
    assert KEY not in str(e.value)
    (llm_env / "config.yaml").unlink()
    (llm_env / "config.toml").write_text(f"api_key = {KEY}\n")
    with pytest.raises(ConfigError, match="cannot parse") as e:
        load_settings()
    assert KEY not in str(e.value)


def test_candidates_timeout_retries_and_replay_mismatch_settings(llm_env, monkeypatch):
    assert (load_settings().candidates, load_settings().replay_mismatch) == (1, "warn")
    (llm_env / "config.toml").write_text('candidates = 2\nreplay_mismatch = "refuse"\ntimeout = 12\nmax_retries = 1\n')
    s = load_settings()
    assert (s.candidates, s.replay_mismatch, s.timeout_s, s.max_retries) == (2, "refuse", 12.0, 1)
    monkeypatch.setenv("KERNELGEN_CANDIDATES", "4")
    assert load_settings().candidates == 4 and load_settings().sources["candidates"] == "environment (KERNELGEN_CANDIDATES)"
    s = load_settings({"candidates": 3, "timeout_s": 0.5, "max_retries": 0, "replay_mismatch": "warn"})
    assert (s.candidates, s.timeout_s, s.max_retries, s.replay_mismatch) == (3, 0.5, 0, "warn")
    with pytest.raises(ConfigError, match="replay_mismatch"):
        load_settings({"replay_mismatch": "ignore"})
    with pytest.raises(ConfigError, match=r"candidates \(from command line\)"):
        load_settings({"candidates": 0})
