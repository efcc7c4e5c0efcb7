"""Model options against the real harness: what reaches a (loopback) Gemini API or Vertex
AI endpoint — thinking level, output limit, tier, headers, the project and location."""

from __future__ import annotations

from typing import Any

import pytest

from antigravity_sdk import Agent, ConfigurationError, ThinkingLevel
from antigravity_sdk.testing import GeminiStub, ScriptedModel

from .conftest import AgentFactory, Workspace
from .test_examples import load_example


def gemini_agent(env: Workspace, configure: Any) -> Agent:
    builder = (
        Agent.builder()
        .workspaces([env.ws])
        .save_dir(env.save)
        .app_data_dir(env.app)
        .turn_timeout(30)
    )
    return configure(builder).build()  # type: ignore[no-any-return]


async def test_gemini_options_and_headers_reach_the_api(env: Workspace) -> None:
    async with GeminiStub(["hello from Gemini"]) as stub:
        agent = gemini_agent(
            env,
            lambda b: b.model("gemini-3.8-flash", api_key="test-key").model_options(
                thinking_level=ThinkingLevel.HIGH,
                max_output_tokens=123,
                service_tier="flex",
                headers={"X-Team": "ledger"},
                endpoint_url=stub.url,
            ),
        )
        async with agent:
            response = await agent.chat("hi")
    assert response.text == "hello from Gemini"
    request = stub.requests[0]
    assert request.path == "/v1beta/models/gemini-3.8-flash:streamGenerateContent"
    assert request.headers["x-team"] == "ledger"
    assert request.headers["x-goog-api-key"] == "test-key"
    config = request.body["generationConfig"]
    assert config["maxOutputTokens"] == 123
    assert config["thinkingConfig"]["thinkingLevel"] == "high"
    assert request.body["serviceTier"] == "flex"


async def test_without_options_the_harness_defaults_apply(env: Workspace) -> None:
    async with GeminiStub(["ok"]) as stub:
        agent = gemini_agent(
            env,
            lambda b: b.model("gemini-3.8-flash", api_key="k").model_options(endpoint_url=stub.url),
        )
        async with agent:
            await agent.chat("hi")
    body = stub.requests[0].body
    assert body["generationConfig"] == {"maxOutputTokens": 65535}  # the harness's default
    assert "serviceTier" not in body


async def test_vertex_ai_path_carries_project_and_location(env: Workspace) -> None:
    async with GeminiStub(["ok"]) as stub:
        agent = gemini_agent(
            env,
            lambda b: b.vertex_ai("proj-1", "europe-west4").model_options(
                endpoint_url=stub.url, thinking_level="low", headers={"X-Trace": "t1"}
            ),
        )
        async with agent:
            await agent.chat("hi")
    request = stub.requests[0]
    assert request.path == (
        "/v1beta1/projects/proj-1/locations/europe-west4/publishers/google/models/"
        "gemini-3.8-flash:streamGenerateContent"
    )
    assert request.headers["x-trace"] == "t1"
    assert request.body["generationConfig"]["thinkingConfig"]["thinkingLevel"] == "low"


async def test_vertex_ai_express_mode_sends_the_key(env: Workspace) -> None:
    async with GeminiStub(["ok"]) as stub:
        agent = gemini_agent(
            env,
            lambda b: (
                b.model("gemini-3.8-pro")
                .vertex_ai(api_key="vertex-key")
                .model_options(endpoint_url=stub.url)
            ),
        )
        async with agent:
            await agent.chat("hi")
    request = stub.requests[0]
    assert request.path == "/v1beta1/publishers/google/models/gemini-3.8-pro:streamGenerateContent"
    assert request.headers["x-goog-api-key"] == "vertex-key"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"thinking_level": "maximal"}, "thinking_level must be one of minimal, low"),
        ({"thinking_level": 3}, "thinking_level must be one of"),
        ({"service_tier": "gold"}, "service_tier must be one of"),
        ({"max_output_tokens": 0}, "between 1 and"),
        ({"max_output_tokens": 2**31}, "between 1 and"),
        ({"max_output_tokens": True}, "must be an int"),
        ({"max_output_tokens": 1.5}, "must be an int"),
        ({"headers": {"X-A": "v\r\nX-Injected: 1"}}, "control character"),
        ({"headers": {"Bad Name": "v"}}, "not a valid HTTP header name"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, "given twice"),
        ({"headers": {"X-A": 1}}, "must be a str"),
        ({"endpoint_url": "ftp://x"}, "http\\(s\\) URL"),
        ({"endpoint_url": "localhost:8080"}, "http\\(s\\) URL"),
    ],
)
def test_bad_model_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises((ConfigurationError, TypeError), match=message):
        Agent.builder().model("gemini-3.8-flash", api_key="k").model_options(**options)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"project": "p"}, "needs a project and a location"),
        ({"project": "p", "location": "l", "api_key": "k"}, "not both"),
        ({"project": "a/b", "location": "l"}, "not a project id"),
        ({"project": "p", "location": "  "}, "non-empty str"),
        ({"project": "p", "location": "us/../x"}, "not a location"),
    ],
)
def test_bad_vertex_settings_are_refused(
    monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], message: str
) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_LOCATION", raising=False)
    with pytest.raises(ConfigurationError, match=message):
        Agent.builder().vertex_ai(**args)


def test_vertex_project_and_location_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east1")
    builder = Agent.builder().vertex_ai()
    assert builder._settings.model.vertex is not None
    assert (builder._settings.model.vertex.project, builder._settings.model.vertex.location) == (
        "env-proj",
        "us-east1",
    )


@pytest.mark.parametrize("what", ["model_options", "vertex_ai"])
async def test_the_openai_compatible_endpoint_takes_no_options(
    make_agent: AgentFactory, what: str
) -> None:
    def configure(b: Any) -> Any:
        if what == "model_options":
            return b.model_options(headers={"X-A": "1"})
        return b.vertex_ai("p", "l")

    with pytest.raises(ConfigurationError, match="OpenAI-compatible endpoint takes only a URL"):
        make_agent(["ok"], configure=configure)
    with pytest.raises(ConfigurationError, match="OpenAI-compatible"):
        configure(Agent.builder().model("qwen3", base_url="http://127.0.0.1:1/v1")).build()
    assert isinstance(ScriptedModel(), ScriptedModel)


async def test_model_options_example_runs() -> None:
    assert await load_example("model_options").main() == 0
