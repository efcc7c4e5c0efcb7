"""Skills: instructions the model loads when a task calls for them.

Two sources, one per session (the harness refuses to start with both):

- skill directories (`AgentBuilder.skills_paths`): each sub-directory holding a `SKILL.md`
  whose front matter gives `name` and `description` is a skill. The harness lists them in
  the system prompt with the path of their `SKILL.md`; the model reads that file with
  `view_file`, which hooks and policies decide like any other read (so a skill directory
  outside the workspaces is read only if the policies allow it).
- inline skills (`AgentBuilder.skills`, `Skill`): the harness lists them in the system
  prompt and offers the model `list_skills`, `lookup_skill` and `lookup_skills`, which
  return the skills' own text. The harness runs those without asking any hook (they
  touch nothing but the configured text); their results reach `post_tool_call`.

A skill's `allowed_tools` is passed on to the harness as it is; it never widens what the
agent may do: every tool call still goes through the hooks and policies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigurationError
from .instructions import check_text

__all__ = ["Skill"]


@dataclass(frozen=True, slots=True)
class Skill:
    """An inline skill: its name and description are listed to the model, its content is
    what `lookup_skill` returns."""

    name: str
    description: str
    content: str
    allowed_tools: Sequence[str] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_text("Skill.name", self.name)
        if self.name != self.name.strip() or any(c.isspace() for c in self.name):
            raise ConfigurationError(f"Skill.name must be one word, got {self.name!r}")
        check_text(f"the description of skill {self.name!r}", self.description)
        check_text(f"the content of skill {self.name!r}", self.content)
        if isinstance(self.allowed_tools, str):
            raise TypeError("Skill.allowed_tools must be a sequence of tool names, not a str")
        for tool in self.allowed_tools:
            check_text(f"an allowed tool of skill {self.name!r}", tool)
        if not isinstance(self.metadata, Mapping):
            raise TypeError("Skill.metadata must be a mapping of str to str")
        for key, value in self.metadata.items():
            check_text(f"a metadata key of skill {self.name!r}", key)
            check_text(f"metadata {key!r} of skill {self.name!r}", value, empty=True)


def check_skills(skills: Iterable[object]) -> list[Skill]:
    """The inline skills, each a `Skill`, names unique (the model looks them up by name)."""
    out: list[Skill] = []
    seen: set[str] = set()
    for skill in skills:
        if not isinstance(skill, Skill):
            raise TypeError(f"expected a Skill, got {type(skill).__name__}")
        if skill.name in seen:
            raise ConfigurationError(f"two skills are named {skill.name!r}")
        seen.add(skill.name)
        out.append(skill)
    return out


def check_skill_dir(path: Path) -> Path:
    """A skill directory must exist: the harness skips a missing one without a word."""
    if not path.is_dir():
        raise ConfigurationError(f"the skills path {str(path)!r} is not a directory")
    return path
