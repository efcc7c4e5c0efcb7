"""System instructions beyond appending: replace the harness's prompt, or override sections.

The harness builds its system prompt from named sections (`<identity>`,
`<user_information>`, `<communication_style>`, ...). An agent can:

- append text to that prompt (`AgentBuilder.system_instructions`, the default way);
- replace it entirely (`AgentBuilder.replace_system_instructions`), from its own text and
  any of the built-in sections it wants to keep (`BuiltinSection`);
- override or remove single sections of the default prompt
  (`AgentBuilder.override_system_sections`).

The harness accepts only one of the three per session, and reports a bad section name
only when the first turn fails; both are checked here instead, before anything is sent.

The prompt is never what governs the agent: hooks and policies decide every tool call
the harness asks about, whatever the prompt says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .errors import ConfigurationError

__all__ = ["BUILTIN_SECTIONS", "BuiltinSection"]

BUILTIN_SECTIONS: Final = frozenset(
    {
        "artifacts",
        "communication_style",
        "conversation_transcript",
        "ephemeral_message",
        "guidelines",
        "identity",
        "knowledge_items",
        "mcp_servers",
        "messaging",
        "non_interactive_mode",
        "skills",
        "subagent_reminder",
        "subagents",
        "user_information",
        "user_rules",
        "workflows",
    }
)
"""The section names the pinned harness (0.1.22) knows, measured against it: any other
name fails the session's first turn ("unknown builtin prompt section")."""


def check_text(what: str, value: object, *, empty: bool = False) -> str:
    """`value` as text the harness will take: a str, valid Unicode (the harness silently
    drops a frame that is not, and start() would wait for its whole timeout)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if not empty and not value.strip():
        raise ConfigurationError(f"{what} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{what} is not valid Unicode ({exc.reason} at index {exc.start})"
        ) from None
    return value


def _check_section(what: str, name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, got {type(name).__name__}")
    if name not in BUILTIN_SECTIONS:
        raise ConfigurationError(
            f"{what} {name!r} is not a section of the harness's system prompt; "
            f"known sections: {', '.join(sorted(BUILTIN_SECTIONS))}"
        )
    return name


@dataclass(frozen=True, slots=True)
class BuiltinSection:
    """One of the harness's own prompt sections, kept in a replaced system prompt
    (its content is the harness's, e.g. `user_information` lists the workspaces)."""

    name: str

    def __post_init__(self) -> None:
        _check_section("BuiltinSection", self.name)


def custom_parts(parts: Sequence[object]) -> list[dict[str, Any]]:
    """The `CustomSystemInstructions.part` list for a replaced prompt, validated."""
    if not parts:
        raise ConfigurationError("replace_system_instructions() needs at least one part")
    out: list[dict[str, Any]] = []
    for index, part in enumerate(parts):
        if isinstance(part, BuiltinSection):
            out.append({"builtin_section": part.name})
        elif isinstance(part, str):
            out.append({"text": check_text(f"system instruction part {index}", part)})
        else:
            raise TypeError(
                f"a system instruction part must be a str or a BuiltinSection, "
                f"got {type(part).__name__}"
            )
    return out


def overrides(sections: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """The `TemplateOverride` list: a section -> its new text, or None to remove it."""
    if not isinstance(sections, Mapping):
        raise TypeError(
            f"override_system_sections() takes a mapping, got {type(sections).__name__}"
        )
    if not sections:
        raise ConfigurationError("override_system_sections() needs at least one section")
    out: list[dict[str, Any]] = []
    for title, text in sections.items():
        _check_section("an overridden section", title)
        if text is None:
            out.append({"title": title, "remove": True})
        else:
            out.append({"title": title, "text": check_text(f"section {title!r}", text)})
    return out
