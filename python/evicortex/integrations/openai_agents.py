"""OpenAI Agents SDK: the function tools `remember`, `recall` and `forget`, confined to one
namespace, with the semantics of `evicortex mcp`'s tools of the same names. Needs
`openai-agents`.

```python
from agents import Agent
from evicortex.integrations.openai_agents import evicortex_tools

agent = Agent(name="assistant", instructions="...",
              tools=evicortex_tools(memory, "alice", budget=800, reader_tokenizer="o200k_base"))
```

The namespace is fixed here, as `evicortex mcp --namespace` fixes it: no tool takes one. Every
tool returns JSON text; a refused call returns `{"error": ..., "field": ...}` (the HTTP API's
and the MCP tools' error object) for the model to read, rather than raising.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Literal, Optional

from agents import FunctionTool, function_tool
from pydantic import BaseModel, ConfigDict, Field

from .._errors import BadInputError, EvicortexError
from .._types import CompiledContext
from ._common import Store, now

__all__ = ["RememberTurn", "evicortex_tools"]


class RememberTurn(BaseModel):
    """One conversation turn to store verbatim."""

    model_config = ConfigDict(extra="forbid")

    session: str = Field(description="Session id (1 to 256 bytes, no control characters).")
    turn: int = Field(description="Index of the turn inside its session (0-based).")
    role: Literal["user", "assistant", "system", "tool"]
    text: str = Field(description="The verbatim text.")
    time: Optional[str] = Field(
        description="When it was said: RFC 3339 with an explicit offset; null for now."
    )
    speaker: Optional[str] = Field(description="Speaker name, where known; else null.")


def evicortex_tools(
    store: Store,
    namespace: str,
    *,
    budget: int,
    reader_tokenizer: str,
    **settings: Any,
) -> List[FunctionTool]:
    """The tools `remember`, `recall` and `forget` over `namespace` of `store` (a `Memory` or a
    `Client`). `recall` compiles into `budget` tokens of `reader_tokenizer` (the tokenizer of
    the model the agent runs; `o200k_base` for the GPT-4o and later families) unless the
    model asks for a smaller or larger budget; `settings` are compile settings (`rrf_k=5.0`)
    every recall uses."""

    default_budget = budget

    def remember(turns: List[RememberTurn]) -> str:
        """Store conversation turns verbatim in long-term memory (atomic and durable).
        Re-sending an identical turn is a no-op.

        Args:
            turns: The turns to store, as one atomic batch.
        """

        def call() -> Dict[str, Any]:
            objects = []
            for t in turns:
                obj: Dict[str, Any] = {
                    "session": t.session,
                    "turn": t.turn,
                    "role": t.role,
                    "text": t.text,
                    "time": t.time or now(),
                }
                if t.speaker is not None:
                    obj["speaker"] = t.speaker
                objects.append(obj)
            receipt = store.append(objects, namespace=namespace)
            return {
                "appended": receipt.appended,
                "already_present": receipt.already_present,
                "turns": [{"id": t.id, "digest": t.digest, "status": t.status} for t in receipt.turns],
            }

        return _result(call)

    def recall(query: str, budget: Optional[int], as_of: Optional[str]) -> str:
        """Recall what was said: the original turns relevant to a question, cited as [#record]
        and packed within a token budget, or an abstention when memory does not support an
        answer. Returns `text` to read, plus the cited items.

        Args:
            query: The question to recall evidence for.
            budget: Hard budget in tokens for the whole context block; null for the default.
            as_of: Only evidence said at or before this RFC 3339 time; null for no limit.
        """

        def call() -> Dict[str, Any]:
            context = store.compile(
                namespace,
                query,
                budget=default_budget if budget is None else budget,
                reader_tokenizer=reader_tokenizer,
                as_of=as_of,
                **settings,
            )
            return _recalled(context)

        return _result(call)

    def forget(session: Optional[str], record: Optional[int], all: Optional[bool]) -> str:
        """Erase turns from long-term memory: a whole session, one record, or everything. The
        text and everything derived from it are removed. Give exactly one of the three.

        Args:
            session: Erase every turn of this session; else null.
            record: Erase this one record (an id returned by remember); else null.
            all: Erase everything in this namespace (true); else null.
        """

        def call() -> Dict[str, Any]:
            if all is False:
                raise BadInputError("all: must be true when given", "all")
            receipt = store.erase(namespace, session=session, record=record, all=bool(all))
            return {
                "redaction": receipt.redaction,
                "erased": receipt.erased,
                "already_erased": receipt.already_erased,
            }

        return _result(call)

    return [function_tool(f) for f in (remember, recall, forget)]


def _recalled(context: CompiledContext) -> Dict[str, Any]:
    """What a model reads of a compiled context: the text, the abstention, the tokens, and each
    cited turn's record, session, time and speaker (the full manifest stays with the caller:
    `Memory.compile`)."""
    return {
        "text": context.text,
        "abstain": context.abstain,
        "abstain_reason": context.abstain_reason,
        "tokens_used": context.tokens_used,
        "budget": context.budget,
        "items": [
            {
                "citation": i.citation,
                "record": i.record,
                "session": i.session,
                "time": i.time,
                "role": i.role,
                "speaker": i.speaker,
            }
            for i in context.items
        ],
    }


def _result(call: Callable[[], Dict[str, Any]]) -> str:
    try:
        return json.dumps(call())
    except EvicortexError as e:
        return json.dumps({"error": e.message, "field": e.field})
