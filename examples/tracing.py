"""Trace an agent with OpenTelemetry: one span per turn, tool call, hook call and policy
decision (offline; needs `pip install 'antigravity-sdk[otel]' opentelemetry-sdk`).

The spans go to opentelemetry-sdk's in-memory exporter, and the tree is printed: the turn
(`invoke_agent`, with its token usage), each tool call under it (`execute_tool`), and under
each call the hooks that saw it and the policy decision (verdict, rule, bucket). In an
application, give `tracing()` your own `TracerProvider` (or none: the global one) with an
OTLP exporter instead.

    python examples/tracing.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from antigravity_sdk import Agent, Hook, HookResult, ToolCall, policy
from antigravity_sdk.testing import ScriptedModel, tool_call

SHOWN = (
    "gen_ai.tool.call.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "antigravity.tool.decision",
    "antigravity.hook.decision",
    "antigravity.policy.verdict",
    "antigravity.policy.rule",
    "antigravity.policy.bucket_name",
)


class NoSecrets(Hook):
    """A hook of the application's own: denies reading files named like keys."""

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        if str(tool_call.args.get("AbsolutePath", "")).endswith(".key"):
            return HookResult.denied("key files stay private")
        return HookResult.allowed()


def span_tree(spans: list[ReadableSpan]) -> list[str]:
    """The spans as an indented tree, children in the order they started."""
    children: dict[int | None, list[ReadableSpan]] = {}
    ids = {span.context.span_id for span in spans}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            attributes = span.attributes or {}
            shown = " ".join(
                f"{k.split('.')[-1]}={attributes[k]}" for k in SHOWN if k in attributes
            )
            status = " ERROR" if span.status.status_code.name == "ERROR" else ""
            lines.append(f"{'  ' * depth}{span.name}{status}  {shown}".rstrip())
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    (workspace / "notes.txt").write_text("remember the milk")
    (workspace / "deploy.key").write_text("secret")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(
        [
            tool_call("view_file", AbsolutePath=str(workspace / "notes.txt")),
            tool_call("view_file", AbsolutePath=str(workspace / "deploy.key")),
            tool_call("run_command", CommandLine="rm -rf .", Cwd=str(workspace)),
            "Read the notes; the key and the shell were refused.",
        ]
    )
    agent = (
        Agent.builder()
        .model(model)
        .hook(NoSecrets())
        .policies([policy.deny("run_command", name="no-shell"), policy.allow_all()])
        .workspaces([workspace])
        .tracing(provider, agent_name="example")
        .build()
    )
    async with agent:
        response = await agent.chat("read my notes")
    print(response.text)
    print()
    tree = span_tree(list(exporter.get_finished_spans()))
    print("\n".join(tree))
    names = [line.split()[0] + " " + line.split()[1] for line in tree]
    expected = [
        "invoke_agent example",
        "execute_tool view_file",
        "pre_tool_call NoSecrets",
        "policy view_file",
        "execute_tool view_file",
        "pre_tool_call NoSecrets",
        "execute_tool run_command",
        "pre_tool_call NoSecrets",
        "policy run_command",
    ]
    return 0 if names == expected else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
