import asyncio

from gramagent import (
    FinalResponse,
    TextDelta,
    ToolCallAnswered,
    ToolCallRequested,
    builtin_library,
    load_agent,
    run_agent_stream,
)
from gramagent.testing import ScriptedServer, call, reply


async def main() -> None:
    agent = load_agent("examples/hello_world.gram")
    script = [call("sayHello", {"personName": "Alice"}),
              reply("Hello, Alice! Nice to meet you. How can I help today?")]
    with ScriptedServer(script) as server:
        async with run_agent_stream(agent, "Hi, I'm Alice", library=builtin_library(),
                                    model="openai/scripted", base_url=server.base_url) as stream:
            async for event in stream:
                match event:
                    case ToolCallRequested(call=c):
                        print(f"[call] {c.name} {c.arguments}")
                    case ToolCallAnswered(invocation=i):
                        print(f"[result] {i.name} -> {i.result!r}")
                    case TextDelta(text=text):
                        print(f"[delta] {text!r}")
                    case FinalResponse(response=r):
                        print(f"[final] {r.content!r} ({r.usage.requests} requests)")


asyncio.run(main())
