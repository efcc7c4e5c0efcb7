"""`AgentSpec`: an agent as plain data, so that any worker on any machine can rebuild it.

A live agent is a harness process and a socket; neither survives a crash or crosses a
machine. What does is a description of how to build one: the policy file's text (not its
path: the worker may not have the file), hooks by import path, the model's settings, the
workspace, the budget and the containment. The spec is hashed (`spec_hash`) over its
canonical JSON, so two workers agree on what they run, and the audit trail says which.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import ConfigurationError
from ..hooks import Hook
from ..types import Budget

if TYPE_CHECKING:
    from ..agent import AgentBuilder
    from ..policy import AskHandler, Policy

__all__ = ["AgentSpec"]


class AgentSpec(BaseModel):
    """How to build one fleet agent: data only (see the module docstring).

    `policies` is the text of a policy file (`AgentSpec.from_files` reads one) and
    `policies_path` where it came from (its rules' `workspace_only` roots are relative to
    that directory, and errors name it). `hooks` are `"module:attribute"` paths to a
    `Hook` instance, a `Hook` subclass or a function returning a `Hook`. `model` and
    `base_url` are as in `AgentBuilder.model` (no API key: a Gemini key comes from the
    worker's environment). `containment=False` runs the harness uncontained; `allow_read`,
    `allow_write` and `allow_connect` extend the containment's defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    policies: str = ""
    policies_path: str = ""
    hooks: tuple[str, ...] = ()
    model: str = ""
    base_url: str | None = None
    workspace: str | None = None
    system_instructions: str | None = None
    budget: Budget | None = None
    turn_timeout: float = Field(default=3600.0, gt=0, allow_inf_nan=False)
    containment: bool = True
    allow_read: tuple[str, ...] = ()
    allow_write: tuple[str, ...] = ()
    allow_connect: tuple[int, ...] = ()

    @field_validator("workspace", "policies_path", mode="before")
    @classmethod
    def _path_text(cls, value: object) -> object:
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("hooks")
    @classmethod
    def _hook_paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            module, _, attribute = path.partition(":")
            if not module or not attribute:
                raise ValueError(f"hook {path!r}: expected 'module:attribute'")
        return value

    @classmethod
    def from_files(cls, policies: str | os.PathLike[str] | None = None, **fields: Any) -> AgentSpec:
        """A spec whose policies are read from the TOML file `policies` now (checked: a
        bad file raises `PolicyError` naming the rule); `fields` as in the constructor."""
        if policies is not None:
            path = Path(policies).resolve()
            try:
                fields["policies"] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigurationError(f"cannot read the policy file {policies}: {exc}") from None
            fields["policies_path"] = str(path)
        spec = cls(**fields)
        spec.load_policies(None)
        return spec

    @property
    def spec_hash(self) -> str:
        """SHA-256 of the canonical JSON: equal specs, equal hashes, on every machine."""
        canonical = self.model_dump_json(exclude_defaults=False, round_trip=True)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def with_workspace(self, workspace: str | os.PathLike[str] | None) -> AgentSpec:
        """This spec working in `workspace` (absolute; None keeps the spec's)."""
        if workspace is None:
            return self
        return self.model_copy(update={"workspace": str(Path(workspace).resolve())})

    # -- building ----------------------------------------------------------------------

    def load_policies(self, ask_handler: AskHandler | None) -> list[Policy]:
        """The policy file's rules, parsed as `policy.load` parses a file; `ask_handler`
        answers its ask_user rules (None: a handler that denies)."""
        if not self.policies:
            return []
        from ..errors import PolicyError
        from ..policy import parse_document

        source = self.policies_path or "<fleet spec>"
        try:
            data = tomllib.loads(self.policies)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"{source}: invalid TOML: {exc}") from None
        base = os.path.dirname(self.policies_path)
        if not os.path.isabs(base):
            # No absolute file to start from: a relative root would resolve against each
            # worker's working directory (the same spec hash, other roots on each).
            _refuse_relative_roots(source, data)
            base = os.getcwd()  # unused: every root is absolute or starts with ~
        return list(parse_document(source, data, base, ask_handler or _deny_asks))

    def resolve_hooks(self) -> list[Hook]:
        """Import each hook path; a path that does not name a Hook is a
        `ConfigurationError` (raised at submit, so a bad spec never reaches a worker)."""
        return [_import_hook(path) for path in self.hooks]

    def writable_roots(self) -> list[Path]:
        """Where the agent may write besides its harness state: the workspace (or, with
        none, the working directory) and `allow_write`."""
        roots = [self.workspace or os.getcwd(), *self.allow_write]
        return [Path(os.path.expanduser(root)).resolve() for root in roots]

    def check_outside(self, governed: dict[str, Path]) -> None:
        """A `ConfigurationError` naming any of `governed` (what governs the agent: the
        fleet's database, its conversations) that lies in a root the agent may write:
        there it could answer its own approvals, or rewrite its record."""
        for root in self.writable_roots():
            for what, path in governed.items():
                path = path.resolve()
                if path == root or root in path.parents:
                    raise ConfigurationError(
                        f"{what} ({path}) lies inside {root}, where the agent may write: "
                        "it could answer its own approvals or rewrite the fleet's record; "
                        "keep the fleet outside every workspace (its default, the SDK's "
                        "state directory, is)"
                    )

    def builder(
        self,
        *,
        conversation_id: str,
        save_dir: str | os.PathLike[str] | None,
        approvals: Callable[[Policy], AskHandler] | None,
        extra_hooks: Sequence[Hook] = (),
        create: bool = True,
        hide: Sequence[Path] = (),
    ) -> AgentBuilder:
        """An `AgentBuilder` for this spec, resuming `conversation_id` (created if missing
        and `create`); `approvals(rule)` answers each ask_user rule (None: they deny);
        `hide` is kept from the contained harness and its commands (the other tasks'
        conversations)."""
        from ..agent import Agent
        from ..containment import Containment

        builder = Agent.builder()
        for hook in extra_hooks:
            builder = builder.hook(hook)
        builder = builder.hooks(self.resolve_hooks())
        policies = self.load_policies(None)
        if approvals is not None:
            policies = with_approvals(policies, approvals)
        if policies:
            builder = builder.policies(policies)
        if self.model:
            builder = builder.model(self.model, base_url=self.base_url)
        if self.workspace:
            builder = builder.workspaces([self.workspace])
        if self.system_instructions:
            builder = builder.system_instructions(self.system_instructions)
        if self.budget is not None:
            builder = builder.budget(self.budget)
        if self.containment:
            builder = builder.containment(
                Containment(
                    read=self.allow_read,
                    write=self.allow_write,
                    connect=self.allow_connect,
                    hide=tuple(hide),
                )
            )
        else:
            builder = builder.containment(None)
        if save_dir is not None:
            builder = builder.save_dir(save_dir)
        return builder.turn_timeout(self.turn_timeout).resume(conversation_id, create=create)


def with_approvals(
    policies: list[Policy], approvals: Callable[[Policy], AskHandler]
) -> list[Policy]:
    """`policies` with every ask_user rule answered by `approvals(rule)`. The rule's own
    timeout becomes the approval's expiry; the engine's bound on the handler is lifted
    past it, so the approval (not the engine) says when it expired."""
    from ..policy import Decision

    replaced = []
    for policy in policies:
        if policy.decision is Decision.ASK_USER:
            bound = None if policy.timeout is None else policy.timeout + 30.0
            policy = dataclasses.replace(policy, handler=approvals(policy), timeout=bound)
        replaced.append(policy)
    return replaced


def _refuse_relative_roots(source: str, data: dict[str, Any]) -> None:
    """A `PolicyError` for a `workspace_only` root that is relative (neither absolute nor
    starting with `~`) in a spec without an absolute `policies_path`."""
    from ..errors import PolicyError

    rules = data.get("rule", [])
    for number, table in enumerate(rules if isinstance(rules, list) else [], start=1):
        roots = table.get("workspace_only") if isinstance(table, dict) else None
        for root in [roots] if isinstance(roots, str) else roots if isinstance(roots, list) else ():
            if isinstance(root, str) and not root.startswith("~") and not os.path.isabs(root):
                raise PolicyError(
                    f"{source}: rule #{number}: workspace_only: {root!r} is relative, and the "
                    "spec has no absolute policies_path to resolve it against (each worker "
                    "would use its own working directory): use an absolute path, or "
                    "AgentSpec.from_files"
                )


async def _deny_asks(call: Any) -> bool:
    """Outside a fleet worker nobody can answer: an ask_user rule denies."""
    return False


def _import_hook(path: str) -> Hook:
    module_name, _, attribute = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise ConfigurationError(
            f"hook {path!r}: cannot import it ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(target, Hook) and callable(target):
        factory: Callable[[], Any] = target  # a Hook subclass, or a function making one
        try:
            target = factory()
        except Exception as exc:
            raise ConfigurationError(
                f"hook {path!r}: calling it failed ({type(exc).__name__}: {exc}); expected "
                "a Hook, a Hook subclass or a function of no arguments returning one"
            ) from None
    if not isinstance(target, Hook):
        raise ConfigurationError(
            f"hook {path!r}: expected a Hook, a Hook subclass or a function returning "
            f"one, got {type(target).__name__}"
        )
    return target
