"""Model options for Gemini models, and the Vertex AI endpoint.

`AgentBuilder.model_options(...)` sets the thinking level, the service tier, the output
token limit, extra HTTP headers and another API root (a proxy or gateway) for a Gemini
model, on the Gemini API or on Vertex AI (`AgentBuilder.vertex_ai(...)`). Everything is
checked here, before anything is sent: the harness passes a value it does not know on to
the API, which would refuse every turn.

The harness's OpenAI-compatible endpoint (Ollama, vLLM, `ScriptedModel`) takes only a
URL: no options, no headers, no key. Its "custom" endpoints register no backend in the
pinned harness (0.1.22 refuses to start with any `backend_type`), so they are not offered.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final
from urllib.parse import urlsplit

from .errors import ConfigurationError

__all__ = ["GeminiOptions", "ServiceTier", "ThinkingLevel", "VertexAI"]

_MAX_TOKENS: Final = 2**31 - 1  # an int32 on the wire
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP header name


class ThinkingLevel(StrEnum):
    """How much a Gemini model reasons before it answers."""

    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    EXTRA_HIGH = "extra_high"


class ServiceTier(StrEnum):
    """The Gemini API's processing tier (queue priority and rate-limit fallback)."""

    STANDARD = "standard"
    PRIORITY = "priority"
    FLEX = "flex"


def _choice(enum: type[StrEnum], what: str, value: object) -> str | None:
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return enum(value).value
    except ValueError:
        raise ConfigurationError(
            f"{what} must be one of {', '.join(e.value for e in enum)}, got {value!r}"
        ) from None


def _url(what: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or value != value.strip():
        raise ConfigurationError(f"{what} must be an http(s) URL, got {value!r}")
    return value.rstrip("/")


def _headers(headers: object) -> dict[str, str]:
    if not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping of str to str, got {type(headers).__name__}")
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ConfigurationError(f"{name!r} is not a valid HTTP header name")
        if not isinstance(value, str):
            raise TypeError(f"header {name!r} must be a str, got {type(value).__name__}")
        if any(c in value for c in "\r\n\0") or not value.isprintable():
            raise ConfigurationError(f"header {name!r} has a control character in its value")
        if name.lower() in (n.lower() for n in out):
            raise ConfigurationError(f"header {name!r} is given twice")
        out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class GeminiOptions:
    """What `model_options()` sets; each value is checked as it is built."""

    thinking_level: str | None = None
    service_tier: str | None = None
    max_output_tokens: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    endpoint_url: str | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "thinking_level", _choice(ThinkingLevel, "thinking_level", self.thinking_level))
        set_(self, "service_tier", _choice(ServiceTier, "service_tier", self.service_tier))
        tokens = self.max_output_tokens
        if tokens is not None:
            if isinstance(tokens, bool) or not isinstance(tokens, int):
                raise TypeError(f"max_output_tokens must be an int, got {tokens!r}")
            if not 0 < tokens <= _MAX_TOKENS:
                raise ConfigurationError(
                    f"max_output_tokens must be between 1 and {_MAX_TOKENS}, got {tokens}"
                )
        set_(self, "headers", _headers(self.headers))
        set_(self, "endpoint_url", _url("endpoint_url", self.endpoint_url))

    @property
    def generation(self) -> bool:
        """Whether any generation option (as opposed to transport) is set."""
        return any(
            v is not None for v in (self.thinking_level, self.service_tier, self.max_output_tokens)
        )


@dataclass(frozen=True, slots=True)
class VertexAI:
    """A Gemini model on Vertex AI: a project and location (credentials from the
    environment, as Google Cloud's libraries find them), or an API key (express mode)."""

    project: str | None = None
    location: str | None = None
    api_key: str | None = None

    def __post_init__(self) -> None:
        for name in ("project", "location", "api_key"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigurationError(f"vertex_ai(): {name} must be a non-empty str")
        if self.api_key is not None and (self.project or self.location):
            raise ConfigurationError(
                "vertex_ai(): give an api_key (express mode) or a project and location, not both"
            )
        if self.api_key is None and not (self.project and self.location):
            raise ConfigurationError(
                "vertex_ai(): needs a project and a location (or GOOGLE_CLOUD_PROJECT and "
                "GOOGLE_CLOUD_LOCATION), or an api_key"
            )
        if self.location is not None and "/" in self.location:
            raise ConfigurationError(f"vertex_ai(): {self.location!r} is not a location")
        if self.project is not None and "/" in self.project:
            raise ConfigurationError(f"vertex_ai(): {self.project!r} is not a project id")

    @classmethod
    def resolve(cls, project: str | None, location: str | None, api_key: str | None) -> VertexAI:
        """Without a key, a missing project or location comes from the environment."""
        if api_key is None:
            project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or None
            location = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or None
        return cls(project=project, location=location, api_key=api_key)
