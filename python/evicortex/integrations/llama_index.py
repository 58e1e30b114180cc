"""LlamaIndex: a retriever of cited turns and a memory block for `llama_index.core.memory.Memory`.
Needs `llama-index-core`.

```python
from llama_index.core.memory import Memory as ChatMemory
from evicortex.integrations.llama_index import EvicortexMemoryBlock, EvicortexRetriever

retriever = EvicortexRetriever(memory, "alice", budget=300, reader_tokenizer="cl100k_base")
nodes = retriever.retrieve("Where did I move?")   # one node per cited turn
chat_memory = ChatMemory.from_defaults(session_id="chat-1", memory_blocks=[
    EvicortexMemoryBlock(store=memory, namespace="alice", budget=300,
                         reader_tokenizer="cl100k_base")])
```
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import Field, PrivateAttr

from .._args import AsOf
from .._errors import BadInputError
from .._types import CompiledContext
from ._common import Store, append_at, item_metadata, next_turn, now

__all__ = ["EvicortexMemoryBlock", "EvicortexRetriever"]

# Kept in each node's metadata but not shown to the LLM or an embedder: they say how the turn
# ranked, not what was said.
_HIDDEN = ["digest", "tokens", "selected_by", "scores", "excerpt", "record", "namespace", "turn"]


class EvicortexRetriever(BaseRetriever):
    """The turns of `namespace` that support the query, as compiled into `budget` tokens of
    `reader_tokenizer`: one `NodeWithScore` per cited turn, in the compiled text's order. The
    node's text is the turn verbatim (or the excerpt packed of a long turn), its id
    `namespace#record`, its metadata the citation (`#12`), record, namespace, session, turn,
    time, role, speaker, digest, tokens, `selected_by`, `scores` and `excerpt`; the node's
    score is the fused (RRF) score. No nodes when the
    compiler abstains. `settings` are compile settings (`rrf_k=5.0`)."""

    def __init__(
        self,
        store: Store,
        namespace: str,
        *,
        budget: int,
        reader_tokenizer: str,
        as_of: AsOf = None,
        **settings: Any,
    ) -> None:
        super().__init__()
        self._store = store
        self._namespace = namespace
        self._budget = budget
        self._reader_tokenizer = reader_tokenizer
        self._as_of = as_of
        self._settings = settings

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        context = self._store.compile(
            self._namespace,
            query_bundle.query_str,
            budget=self._budget,
            reader_tokenizer=self._reader_tokenizer,
            as_of=self._as_of,
            **self._settings,
        )
        return context_nodes(context)


def context_nodes(context: CompiledContext) -> List[NodeWithScore]:
    """The cited turns of a compiled context as LlamaIndex nodes (see `EvicortexRetriever`)."""
    nodes = []
    for item in context.items:
        node = TextNode(
            id_=f"{context.namespace}#{item.record}",
            text=item.text,
            metadata=item_metadata(context, item),
            excluded_llm_metadata_keys=list(_HIDDEN),
            excluded_embed_metadata_keys=list(_HIDDEN),
        )
        nodes.append(NodeWithScore(node=node, score=item.scores.fused_score))
    return nodes


# LlamaIndex's roles that the ledger names otherwise.
_ROLES = {"developer": "system", "function": "tool", "chatbot": "assistant", "model": "assistant"}


class EvicortexMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for `llama_index.core.memory.Memory`, kept verbatim in EviCortex.

    Messages the chat memory flushes from its short-term queue are appended to `namespace` as
    turns of the chat memory's session (or `session`, when given), in order, timed when
    flushed (or at `additional_kwargs["time"]`, RFC 3339, when a message has one). On each
    `get`, the latest user message is compiled into a cited context of `budget` tokens of
    `reader_tokenizer`, which the chat memory puts in its prompt under this block's name;
    nothing when the compiler abstains. Text content only."""

    name: str = "evicortex"
    description: Optional[str] = "Evidence from long-term memory, cited by record."
    store: Any = Field(description="The evicortex Memory or Client.")
    namespace: str
    budget: int
    reader_tokenizer: str
    session: Optional[str] = None
    settings: Dict[str, Any] = Field(default_factory=dict)
    _next: Dict[str, int] = PrivateAttr(default_factory=dict)

    async def _aget(self, messages: Optional[List[ChatMessage]] = None, **block_kwargs: Any) -> str:
        question = next((m for m in reversed(messages or []) if m.role.value == "user"), None)
        if question is None or not question.content:
            return ""
        context = await asyncio.to_thread(
            self.store.compile,
            self.namespace,
            question.content,
            budget=self.budget,
            reader_tokenizer=self.reader_tokenizer,
            **self.settings,
        )
        return "" if context.abstain else str(context.text)

    async def _aput(self, messages: List[ChatMessage]) -> None:
        await asyncio.to_thread(self._put, messages)

    def _put(self, messages: List[ChatMessage]) -> None:
        by_session: Dict[str, List[Dict[str, Any]]] = {}
        flushed = now()
        for i, message in enumerate(messages):
            session = self.session or message.additional_kwargs.get("session_id")
            if not isinstance(session, str) or not session:
                field = f"messages[{i}].session_id"
                raise BadInputError(f"{field}: no session: give the block a session", field)
            if not isinstance(message.content, str) or any(
                type(b).__name__ != "TextBlock" for b in message.blocks
            ):
                field = f"messages[{i}].content"
                raise BadInputError(f"{field}: only text content is stored", field)
            time = message.additional_kwargs.get("time", flushed)
            by_session.setdefault(session, []).append(
                {"role": _ROLES.get(message.role.value, message.role.value), "text": message.content, "time": time}
            )
        for session, turns in by_session.items():
            start = self._next.get(session)
            if start is None:
                start = next_turn(self.store, self.namespace, session)
            self._next[session] = append_at(self.store, self.namespace, session, start, turns)
