"""End-to-end cost of the SDK around the REAL harness (a script, not a test).

    .venv/bin/python benches/bench_e2e.py [--calls 50] [--reps 3] [--starts 5]

What it measures, each in a fresh subprocess so numbers do not contaminate each other:

* agent start: `async with agent` (spawn harness, handshake, initialize), median of
  `--starts` starts in one process;
* a `--calls`-call turn: the model asks for `run_command true` once per reply, then
  answers text. A `pre_tool_call` + `post_tool_call` hook and a predicate policy
  (`deny(run_command, when=rm in CommandLine)` + `allow_all`) run on every call;
  - wall time of the turn;
  - Python CPU (getrusage RUSAGE_SELF user+sys over the turn) per tool call, with the
    ScriptedModel in the same process, and with it in a separate process (SDK only);
  - Python CPU per harness callback (callHookRequest / policyDecisionRequest frames);
  - callback latency: websocket frame received -> reply sent, per request id, measured by
    wrapping websockets' `Connection.recv` / `send` (both SDKs use websockets' asyncio
    client, so both are measured at the same point);
  - peak RSS (ru_maxrss) of the SDK-only process, with bytecode caches as after a normal
    install (the bench warms a private PYTHONPYCACHEPREFIX for both SDKs first).

If `google.antigravity` (the official SDK, our `bench` extra) is importable, the same
turn runs through it and the table shows official/ours ratios.

Internal modes: `--serve N` serves a ScriptedModel for N calls (prints its base URL, runs
until stdin closes); `--worker SDK MODE` runs one measurement and prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


# -- the scripted model ---------------------------------------------------------------------


def make_script(calls: int) -> Any:
    """Stateless: the reply depends only on how many tool calls the conversation holds."""
    from antigravity_sdk.testing import text, tool_call

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if done < calls:
            return tool_call("run_command", CommandLine="true", WaitMsBeforeAsync=5000)
        return text("done")

    return script


async def serve(calls: int) -> None:
    from antigravity_sdk.testing import ScriptedModel

    async with ScriptedModel(make_script(calls)) as model:
        print(model.base_url, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


# -- probes -----------------------------------------------------------------------------------

_REQ = re.compile(r'"(callHookRequest|policyDecisionRequest)"')
_RESP = re.compile(r'"(callHookResponse|policyDecisionResponse)"')
_ID = re.compile(r'"requestId"\s*:\s*"([^"]*)"')


class Probe:
    """Timestamps callback frames at the websocket: received -> reply sent, by request id."""

    def __init__(self) -> None:
        self.active = False
        self.pending: dict[tuple[str, str], tuple[int, int]] = {}
        self.latencies_ns: list[int] = []
        self.cpu_ns: list[int] = []  # this thread's CPU from frame delivered to reply written
        self.requests = 0
        self.frames = 0

    def install(self) -> None:
        from websockets.asyncio.connection import Connection

        probe, clock, cpu_clock = self, time.perf_counter_ns, time.thread_time_ns
        recv, send = Connection.recv, Connection.send

        async def timed_recv(self: Any, *args: Any, **kwargs: Any) -> Any:
            data = await recv(self, *args, **kwargs)
            if probe.active:
                probe.frames += 1
            if probe.active and isinstance(data, str):
                kind = _REQ.search(data, 0, 200)
                if kind:
                    rid = _ID.search(data)
                    if rid:
                        probe.requests += 1
                        key = (kind.group(1)[:4], rid.group(1))
                        probe.pending[key] = (clock(), cpu_clock())
            return data

        async def timed_send(self: Any, message: Any, *args: Any, **kwargs: Any) -> Any:
            result = await send(self, message, *args, **kwargs)
            if probe.active and isinstance(message, str):
                kind = _RESP.search(message, 0, 200)
                if kind:
                    rid = _ID.search(message)
                    began = (
                        probe.pending.pop((kind.group(1)[:4], rid.group(1)), None) if rid else None
                    )
                    if began is not None:
                        probe.latencies_ns.append(clock() - began[0])
                        probe.cpu_ns.append(cpu_clock() - began[1])
            return result

        Connection.recv = timed_recv  # type: ignore[method-assign]
        Connection.send = timed_send  # type: ignore[method-assign]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sys_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# -- our SDK ----------------------------------------------------------------------------------


def ours_hook_and_policies(counter: dict[str, int]) -> tuple[Any, list[Any]]:
    """The hook and the predicate policy every measured tool call goes through."""
    from antigravity_sdk import Hook, HookResult, policy
    from antigravity_sdk.types import ToolCall, ToolResult

    class Counting(Hook):
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            counter["pre"] += 1
            return HookResult.ALLOWED

        async def post_tool_call(self, result: ToolResult) -> None:
            counter["post"] += 1

    policies = [
        policy.deny("run_command", when=lambda a: "rm" in a["CommandLine"], name="no-rm"),
        policy.allow_all(),
    ]
    return Counting(), policies


def _ours_agent(root: Path, model: Any, base_url: str | None, counter: dict[str, int]) -> Any:
    from antigravity_sdk import Agent

    hook, policies = ours_hook_and_policies(counter)
    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    builder = (
        Agent.builder()
        .hook(hook)
        .policies(policies)
        .workspaces([ws])
        .save_dir(root / "save")
        .app_data_dir(root / "app")
    )
    if base_url is None:
        builder.model(model)
    else:
        builder.model("scripted-model", base_url=base_url)
    return builder.build()


# -- the official SDK ---------------------------------------------------------------------------


def _official_agent(root: Path, base_url: str, counter: dict[str, int]) -> Any:
    from google.antigravity import Agent, LocalOpenAIAgentConfig
    from google.antigravity.hooks import hooks as ag_hooks
    from google.antigravity.hooks import policy as ag_policy

    class Pre(ag_hooks.PreToolCallDecideHook):
        async def run(self, context: Any, data: Any) -> Any:
            counter["pre"] += 1
            return ag_hooks.HookResult(allow=True)

    class Post(ag_hooks.PostToolCallHook):
        async def run(self, context: Any, data: Any) -> None:
            counter["post"] += 1

    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    (root / "save").mkdir(exist_ok=True)
    (root / "app").mkdir(exist_ok=True)
    config = LocalOpenAIAgentConfig(
        model="scripted-model",
        base_url=base_url,
        hooks=[Pre(), Post()],
        policies=[
            ag_policy.deny("run_command", when=lambda a: "rm" in a["CommandLine"], name="no-rm"),
            ag_policy.allow_all(),
        ],
        workspaces=[str(ws)],
        save_dir=str(root / "save"),
        app_data_dir=str(root / "app"),
    )
    return Agent(config)


# -- one worker ---------------------------------------------------------------------------------


async def worker(
    sdk: str, mode: str, calls: int, starts: int, model_url: str | None
) -> dict[str, Any]:
    probe = Probe()
    probe.install()
    counter = {"pre": 0, "post": 0}
    out: dict[str, Any] = {"sdk": sdk, "mode": mode}
    in_process_model = None
    if model_url is None:
        from antigravity_sdk.testing import ScriptedModel

        in_process_model = ScriptedModel(make_script(calls))
        await in_process_model.start()
        model_url = in_process_model.base_url
    try:
        with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
            root = Path(tmp)

            def build() -> Any:
                if sdk == "ours":
                    return _ours_agent(root, None, model_url, counter)
                return _official_agent(root, model_url, counter)

            if mode == "start":
                times = []
                for _ in range(starts):
                    agent = build()
                    began = time.perf_counter()
                    await agent.__aenter__()
                    times.append(time.perf_counter() - began)
                    await agent.__aexit__(None, None, None)
                out["start_s"] = statistics.median(times)
                out["start_all_s"] = times
                return out
            agent = build()
            async with agent:
                probe.active = True
                modules = set(sys.modules)
                profiler = None
                if os.environ.get("BENCH_PROFILE_TURN"):
                    import cProfile

                    profiler = cProfile.Profile()
                    profiler.enable()
                if os.environ.get("BENCH_PREWARM") and sdk == "ours":
                    from antigravity_sdk.types import ChatResponse

                    ChatResponse()  # builds the deferred pydantic schema outside the turn
                cpu0, wall0, sys0 = cpu_seconds(), time.perf_counter(), sys_seconds()
                response = await agent.chat("Run `true` as often as you are told to.")
                answer = response.text
                if callable(answer):  # the official ChatResponse streams: await the turn's end
                    answer = await answer()
                wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
                out["sys_s"] = sys_seconds() - sys0
                probe.active = False
                if profiler is not None:
                    profiler.disable()
                    profiler.dump_stats(os.environ["BENCH_PROFILE_TURN"])
                out["imported_during_turn"] = sorted(set(sys.modules) - modules)
            lat = sorted(probe.latencies_ns)
            out.update(
                wall_s=wall,
                cpu_s=cpu,
                calls=counter["pre"],
                posts=counter["post"],
                callbacks=probe.requests,
                frames=probe.frames,
                sys_call_ms=out["sys_s"] / max(1, counter["pre"]) * 1000,
                user_call_ms=(cpu - out["sys_s"]) / max(1, counter["pre"]) * 1000,
                answered=len(lat),
                cpu_call_ms=cpu / max(1, counter["pre"]) * 1000,
                cpu_callback_ms=cpu / max(1, probe.requests) * 1000,
                lat_median_us=statistics.median(lat) / 1000 if lat else None,
                lat_p90_us=lat[int(len(lat) * 0.9)] / 1000 if lat else None,
                callback_cpu_us=statistics.median(probe.cpu_ns) / 1000 if probe.cpu_ns else None,
                answer_ok=answer.strip().endswith("done"),
            )
    finally:
        if in_process_model is not None:
            await in_process_model.stop()
    out["rss_mb"] = peak_rss_mb()
    return out


# -- the orchestrator ---------------------------------------------------------------------------


def run_worker(args: list[str], env: dict[str, str], profile: Path | None = None) -> dict[str, Any]:
    cmd = [sys.executable]
    if profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile)]
    cmd += [str(Path(__file__).resolve()), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker {args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


@contextlib.contextmanager
def model_server(calls: int, env: dict[str, str]) -> Any:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", str(calls)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError("the model server did not start")
        yield url
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


_FLOOR_SERVER = """
import asyncio, json, sys
from websockets.asyncio.server import serve
frame = json.dumps({"stepUpdate": {"trajectoryId": "a" * 32, "stepIndex": 3,
    "state": "STATE_ACTIVE", "text": "Tool execution",
    "runCommand": {"commandLine": "true", "workingDir": "/tmp/ws"}}, "seqNum": "12"})
async def handler(ws):
    await ws.recv()
    for _ in range(int(sys.argv[1])):
        await ws.send(frame)
        await asyncio.sleep(float(sys.argv[2]))
    await ws.send("END")
async def main():
    async with serve(handler, "127.0.0.1", 0) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()
asyncio.run(main())
"""


async def _floor_client(port: int) -> float:
    from websockets.asyncio.client import connect

    async with connect(f"ws://127.0.0.1:{port}/", ping_interval=None, compression=None) as ws:
        await ws.send("go")
        cpu0, frames = cpu_seconds(), 0
        while (text := await ws.recv()) != "END":
            json.loads(text)
            frames += 1
        return (cpu_seconds() - cpu0) / max(1, frames)


def wake_floor_us(gap: float, frames: int = 300) -> float:
    """This box's CPU per frame for a bare websockets client that only json.loads frames
    arriving `gap` seconds apart: the cost any client pays per harness frame, before it
    does any work of its own."""
    server = subprocess.Popen(
        [sys.executable, "-c", _FLOOR_SERVER, str(frames), str(gap)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        return asyncio.run(_floor_client(port)) * 1e6
    finally:
        server.kill()
        server.wait()


_PRE_TOOL_FRAME = json.dumps(
    {
        "callHookRequest": {
            "preToolArgs": {
                "toolName": "run_command",
                "argumentsJson": '{"CommandLine":"true","Cwd":"/tmp/ws","WaitMsBeforeAsync":5000}',
                "serverName": "",
                "callId": "call_2",
                "trajectoryId": "3eea33a4e35d17e07b3e21e8d0509940",
                "stepIndex": 2,
            },
            "requestId": "hook_request_2",
            "name": "PreTool",
            "type": "LIFECYCLE_HOOK_PRE_TOOL",
        },
        "seqNum": "7",
    }
)


def callback_path_us(rounds: int = 20000) -> tuple[float, float]:
    """Our code alone on one PRE_TOOL callback, no sockets: decode, core, hook + predicate
    policy, reply, encode. Returns (inline, with the task the agent spawns per callback)."""
    from antigravity_sdk import HookRunner, policy
    from antigravity_sdk.harness.effects import HookCall
    from antigravity_sdk.harness.protocol import SessionCore
    from antigravity_sdk.harness.wire import decode_frame
    from antigravity_sdk.tools import ToolRunner

    hook, policies = ours_hook_and_policies({"pre": 0, "post": 0})
    runner = HookRunner([hook, policy.enforce(policies)])
    tools = ToolRunner()
    core = SessionCore()

    async def one() -> str:
        (call,) = core.receive(decode_frame(_PRE_TOOL_FRAME))
        assert isinstance(call, HookCall)
        answer = call.reply(await call.decide(runner, tools))  # as the agent answers
        return json.dumps(answer, separators=(",", ":"))

    async def measure() -> tuple[float, float]:
        for _ in range(1000):
            await one()
        cpu0 = time.thread_time()
        for _ in range(rounds):
            await one()
        inline = (time.thread_time() - cpu0) / rounds
        cpu0 = time.thread_time()
        for _ in range(rounds):
            await asyncio.create_task(one())
        return inline * 1e6, (time.thread_time() - cpu0) / rounds * 1e6

    return asyncio.run(measure())


def med(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs=2, metavar=("SDK", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--model-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help="cProfile one SDK-only turn")
    parser.add_argument("--no-official", action="store_true")
    parser.add_argument("--dump", default=None, metavar="FILE", help="write raw results (JSON)")
    args = parser.parse_args()

    if args.serve is not None:
        asyncio.run(serve(args.serve))
        return 0
    if args.worker:
        sdk, mode = args.worker
        result = asyncio.run(worker(sdk, mode, args.calls, args.starts, args.model_url))
        print(json.dumps(result), flush=True)
        return 0

    from antigravity_sdk.harness.install import find_harness

    harness = find_harness()
    official = not args.no_official and importlib.util.find_spec("google.antigravity") is not None
    sdks = ["ours", *(["official"] if official else [])]
    with tempfile.TemporaryDirectory(prefix="bench-e2e-home-") as home:
        env = dict(os.environ, HOME=home, ANTIGRAVITY_HARNESS_PATH=str(harness))
        env.pop("GEMINI_API_KEY", None)
        # Measure as installed: with bytecode caches, in a private prefix. Without them
        # (this sandbox sets PYTHONDONTWRITEBYTECODE) every import compiles its source, and
        # the compiler's transient memory would inflate both SDKs' peak RSS.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(home) / "pycache")
        warm = "import antigravity_sdk.agent, antigravity_sdk.harness.connection"
        if official:
            warm += "; import google.antigravity"
        subprocess.run([sys.executable, "-c", warm], env=env, check=True)
        common = ["--calls", str(args.calls)]
        results: dict[str, dict[str, list[dict[str, Any]]]] = {s: {} for s in sdks}
        with model_server(args.calls, env) as url:
            for sdk in sdks:
                results[sdk]["start"] = [
                    run_worker(
                        [
                            "--worker",
                            sdk,
                            "start",
                            "--starts",
                            str(args.starts),
                            "--model-url",
                            url,
                        ],
                        env,
                    )
                ]
            for _ in range(args.reps):  # interleave SDKs so drift affects both alike
                for sdk in sdks:
                    results[sdk].setdefault("ext", []).append(
                        run_worker(["--worker", sdk, "turn", "--model-url", url, *common], env)
                    )
                    results[sdk].setdefault("inproc", []).append(
                        run_worker(["--worker", sdk, "turn", *common], env)
                    )
            if args.profile:
                for sdk in sdks:
                    out = Path(tempfile.gettempdir()) / f"bench_e2e_{sdk}.prof"
                    run_worker(["--worker", sdk, "turn", "--model-url", url, *common], env, out)
                    print(f"profile of one SDK-only turn ({sdk}): {out}")
    report(results, sdks, args)
    return 0


def report(results: dict[str, dict[str, list[dict[str, Any]]]], sdks: list[str], args: Any) -> None:
    rows: list[tuple[str, str, str, bool]] = [
        # (label, phase, key, lower is better)
        ("agent start, median of starts (s)", "start", "start_s", True),
        (f"turn wall time, {args.calls} calls (s)", "ext", "wall_s", True),
        ("Python CPU / tool call, model in-process (ms)", "inproc", "cpu_call_ms", True),
        ("Python CPU / tool call, SDK only (ms)", "ext", "cpu_call_ms", True),
        ("  of which user (ms)", "ext", "user_call_ms", True),
        ("  of which sys (ms)", "ext", "sys_call_ms", True),
        ("Python CPU / callback, SDK only (ms)", "ext", "cpu_callback_ms", True),
        ("websocket frames received per turn", "ext", "frames", True),
        ("callbacks per turn", "ext", "callbacks", True),
        ("callback frame-in -> reply-out, median (µs)", "ext", "lat_median_us", True),
        ("callback frame-in -> reply-out, p90 (µs)", "ext", "lat_p90_us", True),
        ("callback frame-in -> reply-out, CPU (µs)", "ext", "callback_cpu_us", True),
        ("peak RSS, SDK only (MB)", "ext", "rss_mb", True),
        ("peak RSS, model in-process (MB)", "inproc", "rss_mb", True),
    ]
    targets = {
        "cpu_call_ms": "<= 1.0",
        "cpu_callback_ms": "<= 0.25",
    }
    width = 48
    header = f"{'metric (medians over ' + str(args.reps) + ' runs)':<{width}} {'ours':>10}"
    if "official" in sdks:
        header += f" {'official':>10} {'official/ours':>14}"
    header += f" {'target':>10}"
    print()
    print(header)
    print("-" * len(header))
    for label, phase, key, _ in rows:
        ours = med(results["ours"].get(phase, []), key)
        digits = 0 if key in ("callbacks", "frames") else (1 if key.endswith(("_us", "_mb")) else 3)
        line = f"{label:<{width}} {fmt(ours, digits):>10}"
        if "official" in sdks:
            theirs = med(results["official"].get(phase, []), key)
            ratio = f"{theirs / ours:.2f}x" if ours and theirs else "-"
            line += f" {fmt(theirs, digits):>10} {ratio:>14}"
        target = targets.get(key, "<= 40" if (key == "rss_mb" and phase == "ext") else "")
        line += f" {target:>10}"
        print(line)
    if "official" not in sdks:
        print("\nofficial SDK not installed; skipped")
    frames = med(results["ours"].get("ext", []), "frames") or 0
    inline, tasked = callback_path_us()
    print(
        f"\nour code per PRE_TOOL callback (in-process, no sockets): {inline:.0f} µs CPU, "
        f"{tasked:.0f} µs with the agent's task per callback (target <= 250 µs)"
    )
    print(
        "\nfloor on this box (bare websockets client, json.loads only, CPU per frame): "
        + ", ".join(f"{wake_floor_us(gap):.0f} µs at {gap * 1000:g} ms gaps" for gap in (0, 0.002))
        + f"; the harness sends {frames / max(1, args.calls):.1f} frames per tool call"
    )
    print(
        "\nofficial SDK as reported earlier: start 0.176 s, 3.8 ms CPU/tool call, "
        "0.7-0.9 ms/callback, 62.6 MB RSS"
    )
    for sdk in sdks:
        for phase in ("ext", "inproc"):
            for r in results[sdk].get(phase, []):
                if r["calls"] != args.calls or r["posts"] != args.calls or not r["answer_ok"]:
                    print(
                        f"WARNING: {sdk}/{phase} run saw {r['calls']} pre, {r['posts']} post "
                        f"hooks, answer ok={r['answer_ok']} (expected {args.calls})"
                    )
    if args.dump:
        Path(args.dump).write_text(json.dumps(results, indent=1, default=str))
        print(f"raw results: {args.dump}")


if __name__ == "__main__":
    sys.exit(main())
