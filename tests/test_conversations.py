"""Saved conversations without the harness: ids, listing, the resume settings on the wire,
and the usage a resumed conversation starts from."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antigravity_sdk import Agent, ConfigurationError, ConversationNotFoundError
from antigravity_sdk.conversations import check_conversation_id, list_conversations
from antigravity_sdk.harness.config import ModelSettings, harness_config
from antigravity_sdk.harness.protocol import SessionCore
from antigravity_sdk.types import CapabilitiesConfig

ID = "0123456789abcdef0123456789abcdef"
_ACCEPTED = re.compile(r"[A-Za-z0-9-]{32,200}")


@given(st.text(max_size=220) | st.from_regex(r"[A-Za-z0-9-]{28,205}", fullmatch=True))
def test_an_id_is_accepted_exactly_when_the_harness_would(value: str) -> None:
    if _ACCEPTED.fullmatch(value):
        assert check_conversation_id(value) == value
    else:
        with pytest.raises(ConfigurationError, match="32 to 200 characters"):
            check_conversation_id(value)


@pytest.mark.parametrize("value", [None, 7, b"0123456789abcdef0123456789abcdef", Path(ID)])
def test_an_id_that_is_not_a_str_is_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="must be a str"):
        Agent.builder().resume(value)


def test_bad_resume_arguments_fail_at_the_builder() -> None:
    with pytest.raises(ConfigurationError):
        Agent.builder().resume("../../" + ID)
    with pytest.raises(TypeError, match="create must be a bool"):
        Agent.builder().resume(ID, create="yes")  # type: ignore[arg-type]
    assert issubclass(ConversationNotFoundError, ConfigurationError)


def _config(**resume: Any) -> dict[str, Any]:
    frame = harness_config(
        model=ModelSettings("m", base_url="http://127.0.0.1:1/v1"),
        workspaces=[Path("/ws")],
        app_data_dir=Path("/data"),
        capabilities=CapabilitiesConfig(),
        hook_events=[],
        **resume,
    )
    config: dict[str, Any] = frame["config"]
    return config


def test_resume_settings_on_the_wire() -> None:
    fresh = _config()
    assert "cascadeId" not in fresh and "sessionContinuationMode" not in fresh
    assert _config(resume=ID)["cascadeId"] == ID
    assert _config(resume=ID)["sessionContinuationMode"] == "RESUME"
    created = _config(resume=ID, create_if_missing=True)
    assert created["sessionContinuationMode"] == "CREATE_OR_RESUME"


def test_a_resumed_conversation_counts_usage_from_where_it_was() -> None:
    core = SessionCore()
    total = {"promptTokenCount": "900", "candidatesTokenCount": "30", "totalTokenCount": "930"}
    core.receive({"initializeConversationResponse": {"cascadeId": ID, "cumulativeUsage": total}})
    core.user_input("next")
    core.receive({"usageUpdate": {"total": {**total, "candidatesTokenCount": "32"}}})
    usage = core.response().usage
    assert usage is not None
    assert (usage.candidates_token_count, usage.prompt_token_count) == (2, 0)


def test_listing(tmp_path: Path) -> None:
    assert list_conversations(tmp_path / "missing") == []
    newer, older = "b" * 32, "a-" * 16
    for name in (f"{newer}.db", f"{older}.db", f"{older}.db-journal", "short.db", "notes.txt"):
        (tmp_path / name).write_bytes(b"x" * 3)
    (tmp_path / f"{'c' * 32}.db").mkdir()  # not a file
    os.utime(tmp_path / f"{older}.db", (100, 100))
    listed = list_conversations(tmp_path)
    assert [info.id for info in listed] == [newer, older]
    assert listed[1].modified.timestamp() == 100 and listed[1].modified.tzinfo is not None
    assert listed[0].path == tmp_path / f"{newer}.db" and listed[0].size == 3
    assert list_conversations(str(tmp_path)) == listed


def test_listing_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigurationError, match="not a directory"):
        list_conversations(tmp_path / "f")


def test_listing_defaults_to_the_agents_save_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTIGRAVITY_CACHE_DIR", str(tmp_path))
    (tmp_path / "conversations").mkdir()
    (tmp_path / "conversations" / f"{ID}.db").write_bytes(b"")
    assert [info.id for info in list_conversations()] == [ID]
