"""The example agent loop runs against a real store: the second question's context cites the
first turn."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import List

from evicortex import CompiledContext, Memory

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "agent_loop.py"


def test_agent_loop_remembers_across_turns(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("agent_loop", EXAMPLE)
    assert spec is not None and spec.loader is not None
    agent_loop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent_loop)
    seen: List[CompiledContext] = []

    def reader(context: CompiledContext, message: str) -> str:
        seen.append(context)
        return "Noted."

    assistant = agent_loop.Assistant(Memory(tmp_path), "me", "chat-1", reader, budget=200)
    assistant.respond("My dog is called Biscuit and she is a beagle.")
    assert seen[0].abstain, "nothing is remembered before the first turn"
    assistant.respond("What breed is my dog?")
    assert any("Biscuit" in item.text for item in seen[1].items)
    assert assistant.memory.stats("me").turns == 4
