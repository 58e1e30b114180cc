"""The OpenAI Agents SDK tools on a real store (embedded, and through `evicortex serve`),
invoked through the SDK's own tool interface (`FunctionTool.on_invoke_tool`, what the runner
calls with the model's arguments); no model is called."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List

from agents import FunctionTool
from agents.tool_context import ToolContext

from evicortex.integrations.openai_agents import evicortex_tools


def _invoke(tool: FunctionTool, arguments: Dict[str, Any]) -> Any:
    text = json.dumps(arguments)
    context = ToolContext(context=None, tool_name=tool.name, tool_call_id="call-1", tool_arguments=text)

    async def invoke() -> Any:
        return await tool.on_invoke_tool(context, text)

    return json.loads(asyncio.run(invoke()))


def _properties(schema: Any) -> List[str]:
    """Every property name anywhere in a JSON schema."""
    if isinstance(schema, list):
        return [name for s in schema for name in _properties(s)]
    if not isinstance(schema, dict):
        return []
    own = list(schema.get("properties", {}))
    return own + [name for value in schema.values() for name in _properties(value)]


def test_remember_recall_forget_through_the_sdk(store: Any, namespace: str) -> None:
    tools = {t.name: t for t in evicortex_tools(store, namespace, budget=200, reader_tokenizer="o200k_base")}
    assert sorted(tools) == ["forget", "recall", "remember"]
    for tool in tools.values():
        assert tool.strict_json_schema and "namespace" not in _properties(tool.params_json_schema)

    turn = {"session": "s1", "turn": 0, "role": "user", "text": "My dog is called Biscuit.",
            "time": "2024-05-02T10:00:00+01:00", "speaker": None}
    stored = _invoke(tools["remember"], {"turns": [turn, {**turn, "turn": 1, "text": "She is a beagle.", "time": None}]})
    assert stored["appended"] == 2 and [t["status"] for t in stored["turns"]] == ["appended", "appended"]
    again = _invoke(tools["remember"], {"turns": [turn]})
    assert (again["appended"], again["already_present"]) == (0, 1)
    assert store.stats(namespace).turns == 2

    recalled = _invoke(tools["recall"], {"query": "What is my dog called?", "budget": None, "as_of": None})
    assert not recalled["abstain"] and recalled["tokens_used"] <= recalled["budget"] == 200
    record = stored["turns"][0]["id"]
    assert f"[#{record}]" in recalled["text"]
    assert any(i["record"] == record and i["session"] == "s1" for i in recalled["items"])
    early = _invoke(tools["recall"], {"query": "What is my dog called?", "budget": 150, "as_of": "2024-01-01T00:00:00Z"})
    assert early["abstain"] and early["budget"] == 150

    refused = _invoke(tools["remember"], {"turns": [{**turn, "turn": 2, "time": "yesterday"}]})
    assert refused["field"] == "turns[0].time" and "time" in refused["error"]
    both = _invoke(tools["forget"], {"session": "s1", "record": record, "all": None})
    assert both["field"] == "target"

    forgot = _invoke(tools["forget"], {"session": None, "record": record, "all": None})
    assert forgot["erased"] == [record]
    forgot = _invoke(tools["forget"], {"session": None, "record": None, "all": True})
    assert len(forgot["erased"]) == 1 and store.stats(namespace).turns == 0
    missing = _invoke(tools["forget"], {"session": "nope", "record": None, "all": None})
    assert "error" in missing


def test_the_tools_reach_their_namespace_only(store: Any, namespace: str) -> None:
    other = namespace + "-other"
    store.append([{"session": "s", "turn": 0, "role": "user", "text": "Bob's secret dog is Rex.",
                   "time": "2024-05-02T10:00:00Z"}], namespace=other)
    tools = {t.name: t for t in evicortex_tools(store, namespace, budget=200, reader_tokenizer="o200k_base")}
    recalled = _invoke(tools["recall"], {"query": "secret dog Rex", "budget": None, "as_of": None})
    assert recalled["abstain"] and recalled["items"] == [] and "Rex" not in recalled["text"]
    gone = _invoke(tools["forget"], {"session": None, "record": None, "all": True})
    assert "error" in gone  # nothing of this namespace to erase
    assert store.stats(other).turns == 1
