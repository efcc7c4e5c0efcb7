"""Save a conversation, then continue it with a second agent (offline).

The first agent looks something up with a host-side tool and stops. The second is built
over the same save dir with `.resume(conversation_id)`: its `history` holds the earlier
steps, the model sees the earlier exchange, and the second agent's own policies govern
from here (it may not write files, whatever the first one could do).
`list_conversations(save_dir)` lists what is saved.

    python examples/resume_conversation.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from antigravity_sdk import Agent, list_conversations, policy
from antigravity_sdk.testing import ScriptedModel, tool_call


def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    return {"deploy_day": "Thursday"}.get(key, "unknown")


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        save_dir, workspace = Path(tmp) / "conversations", Path(tmp)
        first = (
            Agent.builder()
            .model(ScriptedModel([tool_call("lookup", key="deploy_day"), "We deploy on Thursday."]))
            .tool(lookup)
            .policies([policy.allow_all()])
            .workspaces([workspace])
            .save_dir(save_dir)
            .build()
        )
        async with first:
            print("first agent:", (await first.chat("When do we deploy?")).text)
        conversation_id = first.conversation_id

        for saved in list_conversations(save_dir):
            print(f"saved: {saved.id} ({saved.size} bytes, {saved.modified:%H:%M:%S} UTC)")

        model = ScriptedModel(["You asked when we deploy: Thursday."])
        second = (
            Agent.builder()
            .model(model)
            .tool(lookup)
            .policies([policy.deny("write_to_file"), policy.allow_all()])
            .workspaces([workspace])
            .save_dir(save_dir)
            .resume(conversation_id)
            .build()
        )
        async with second:
            print(f"resumed {second.conversation_id} with {len(second.history)} earlier steps:")
            for step in second.history:
                print(f"  {step.kind:9} {step.text or step.output or ''}")
            answer = await second.chat("What did I ask you?")
            print("second agent:", answer.text)
        seen = model.requests[0].text  # the earlier exchange was in the model's request
        return 0 if "When do we deploy?" in seen and "Thursday" in answer.text else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
