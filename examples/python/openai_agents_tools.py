"""The OpenAI Agents SDK over EviCortex: an agent with the tools `remember`, `recall` and
`forget`, confined to one namespace.

    pip install ./python openai-agents       # from a clone of the repository
    evicortex model fetch                    # the pinned encoder (or Memory(..., dense=False))
    OPENAI_API_KEY=... python examples/python/openai_agents_tools.py ./my-store

With OPENAI_API_KEY the agent runs for real. Without it, the example calls the tools the way
the SDK's runner does when the model asks for them, and prints what the model would read.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Dict, List

from agents import Agent, FunctionTool, Runner
from agents.tool_context import ToolContext

import evicortex
from evicortex.integrations.openai_agents import evicortex_tools

INSTRUCTIONS = (
    "You have long-term memory. Call `remember` with each user message (session 'chat', the next "
    "turn index). Before answering a question about the past, call `recall` and answer from its "
    "text, citing records as [#record]. Call `forget` when the user asks to be forgotten."
)


def build_agent(store: evicortex.Memory, namespace: str) -> Agent[Any]:
    tools = evicortex_tools(store, namespace, budget=800, reader_tokenizer="o200k_base")
    return Agent(name="assistant", instructions=INSTRUCTIONS, model="gpt-4o-mini", tools=list(tools))


async def call(tool: FunctionTool, arguments: Dict[str, Any]) -> Any:
    """Runs `tool` as the runner does with a model's tool call."""
    text = json.dumps(arguments)
    context = ToolContext(context=None, tool_name=tool.name, tool_call_id="example", tool_arguments=text)
    return json.loads(await tool.on_invoke_tool(context, text))


def main(argv: List[str]) -> None:
    store = evicortex.Memory(argv[1] if len(argv) > 1 else "./evicortex-data", dense="--lexical" not in argv)
    agent = build_agent(store, "agents-demo")
    if os.environ.get("OPENAI_API_KEY"):
        Runner.run_sync(agent, "Remember: my dog is called Biscuit and she is a beagle.")
        print(Runner.run_sync(agent, "What breed is my dog?").final_output)
        return
    tools = {t.name: t for t in agent.tools if isinstance(t, FunctionTool)}
    turn = {"session": "chat", "turn": 0, "role": "user", "speaker": None, "time": None,
            "text": "My dog is called Biscuit and she is a beagle."}
    print("remember:", asyncio.run(call(tools["remember"], {"turns": [turn]})))
    recalled = asyncio.run(call(tools["recall"], {"query": "What breed is my dog?", "budget": None, "as_of": None}))
    print("recall:", json.dumps(recalled, indent=2))


if __name__ == "__main__":
    main(sys.argv)
