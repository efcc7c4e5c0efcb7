"""Property tests: every model option, instruction section and skill either is refused
with a clear error before anything is sent, or is safe to send."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from antigravity_sdk import BUILTIN_SECTIONS, ConfigurationError
from antigravity_sdk.instructions import overrides
from antigravity_sdk.models import GeminiOptions, ThinkingLevel


@given(st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3))
def test_headers_are_refused_or_free_of_control_characters(headers: dict[str, str]) -> None:
    try:
        options = GeminiOptions(headers=headers)
    except ConfigurationError:
        return
    for name, value in options.headers.items():
        assert name and name.isascii() and ":" not in name and not any(c.isspace() for c in name)
        assert "\r" not in value and "\n" not in value and value.isprintable()


@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.none()))
def test_max_output_tokens_is_a_positive_int32_or_refused(tokens: Any) -> None:
    try:
        options = GeminiOptions(max_output_tokens=tokens)
    except (ConfigurationError, TypeError):
        assert tokens is not None
        return
    assert tokens is None or (type(tokens) is int and 0 < tokens < 2**31)
    assert options.max_output_tokens == tokens


@given(st.one_of(st.text(max_size=12), st.sampled_from([t.value for t in ThinkingLevel])))
def test_thinking_level_is_a_known_value_or_refused(level: str) -> None:
    try:
        options = GeminiOptions(thinking_level=level)
    except ConfigurationError:
        assert level not in {t.value for t in ThinkingLevel}
        return
    assert options.thinking_level in {t.value for t in ThinkingLevel}


@given(st.one_of(st.text(max_size=20), st.sampled_from(sorted(BUILTIN_SECTIONS))))
def test_overrides_name_only_known_sections(title: str) -> None:
    try:
        result = overrides({title: None})
    except ConfigurationError:
        assert title not in BUILTIN_SECTIONS
        return
    assert result == [{"title": title, "remove": True}]
