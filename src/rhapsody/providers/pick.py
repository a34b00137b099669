"""Picks the model provider from settings and checks its environment before anything starts.

`anthropic`, `bedrock` and `vertex` go through providers/anthropic.py (the SDK's AsyncAnthropic,
AsyncAnthropicBedrock and AsyncAnthropicVertex); `openai` through providers/openai.py. A missing
credential, region or model id is one ConfigError line, raised before the first paint.
SDKs are imported only for the provider that was picked, so `rhapsody --help` stays fast.
"""

from __future__ import annotations

import importlib.util
import os

from rhapsody.config.settings import Settings
from rhapsody.core.errors import ConfigError
from rhapsody.core.model import Model
from rhapsody.core.json_types import JsonObject

MODEL_FORMS = {
    "bedrock": "Bedrock's form, e.g. us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "vertex": "Vertex AI's form, e.g. claude-sonnet-4-5@20250929",
    "openai": "the server's own name for it, e.g. llama3.1:8b or qwen2.5-coder:32b",
}


def make_model(settings: Settings) -> Model:
    """The model provider settings ask for; raises ConfigError when its environment is incomplete."""
    provider = settings.provider
    if provider != "anthropic" and not settings.model:
        raise ConfigError(f"--provider {provider} needs --model in {MODEL_FORMS[provider]}")
    timing: JsonObject = {"retries": settings.retries, "base_delay": settings.retry_base_delay,
                              "timeout": settings.request_timeout}
    if provider == "openai":
        _require_openai()
        from rhapsody.providers.openai import OpenAIModel

        return OpenAIModel(**timing)
    if provider == "anthropic":
        _require_anthropic_key()
        return _lazy_anthropic(timing)
    from rhapsody.providers.anthropic import AnthropicModel, bedrock_client, vertex_client

    if provider == "bedrock":
        return AnthropicModel(bedrock_client(_bedrock_region(), settings.request_timeout), **timing)
    if provider == "vertex":
        project, region = _vertex_env()
        return AnthropicModel(vertex_client(project, region, settings.request_timeout), **timing)
    _require_anthropic_key()
    return AnthropicModel(**timing)


def _lazy_anthropic(timing: JsonObject) -> Model:
    """The Anthropic adapter, built (and its SDK imported) in the background after the first paint."""
    from rhapsody.providers.lazy import LazyModel

    def adapter() -> Model:
        from rhapsody.providers.anthropic import AnthropicModel

        return AnthropicModel(**timing)

    return LazyModel(adapter)


def _require_anthropic_key() -> None:
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        raise ConfigError("ANTHROPIC_API_KEY is not set: export it, or try `rhapsody --demo`, which needs no key")


def _require_openai() -> None:
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        raise ConfigError("--provider openai needs OPENAI_BASE_URL (a local server, e.g. http://127.0.0.1:11434/v1) "
                          "or OPENAI_API_KEY (api.openai.com)")


def _bedrock_region() -> str:
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise ConfigError("--provider bedrock needs AWS_REGION (e.g. us-east-1) and AWS credentials")
    if os.environ.get("AWS_BEARER_TOKEN_BEDROCK") and installed("botocore"):
        return region  # an API key needs no signing; botocore still decodes Bedrock's event stream
    if not installed("boto3"):
        raise ConfigError("--provider bedrock needs boto3 and botocore: pip install 'rhapsody[bedrock]'")
    import boto3  # type: ignore[import-untyped,import-not-found,unused-ignore]

    if boto3.Session().get_credentials() is None:
        raise ConfigError("--provider bedrock found no AWS credentials: set AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK")
    return region


def _vertex_env() -> tuple[str, str]:
    project = os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID")
    region = os.environ.get("CLOUD_ML_REGION")
    if not project or not region:
        missing = " and ".join(n for n, v in (("ANTHROPIC_VERTEX_PROJECT_ID", project), ("CLOUD_ML_REGION", region))
                               if not v)
        raise ConfigError(f"--provider vertex needs {missing} (and Google credentials: gcloud auth "
                          "application-default login)")
    if not installed("google.auth"):
        raise ConfigError("--provider vertex needs google-auth for credentials: pip install 'rhapsody[vertex]'")
    return project, region


def installed(module: str) -> bool:
    """Whether `module` can be imported (a missing parent package counts as missing)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package is missing
        return False
