"""The LlamaIndex adapter on a real store (embedded, and through `evicortex serve`): nodes are
the cited turns with their metadata, a query engine reads them (LlamaIndex's MockLLM stands in
for the model), and the memory block stores flushed messages as turns and puts the compiled
context in the chat memory. No network, no LLM."""

from __future__ import annotations

from typing import Any, List

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.mock import MockLLM
from llama_index.core.memory import Memory as ChatMemory
from llama_index.core.query_engine import RetrieverQueryEngine

from evicortex.integrations.llama_index import EvicortexMemoryBlock, EvicortexRetriever

TURNS = [
    {"session": "s1", "turn": 0, "role": "user", "speaker": "Alice", "text": "My dog is called Biscuit.",
     "time": "2024-05-02T10:00:00+01:00"},
    {"session": "s2", "turn": 0, "role": "user", "text": "I moved to Lisbon for work.",
     "time": "2024-06-10T09:00:00+01:00"},
]


def test_retriever_returns_nodes_with_the_turns_metadata(store: Any, namespace: str) -> None:
    receipt = store.append(TURNS, namespace=namespace)
    retriever = EvicortexRetriever(store, namespace, budget=200, reader_tokenizer="cl100k_base", rrf_k=10.0)
    nodes = retriever.retrieve("What is my dog called?")
    dog = next(n for n in nodes if "Biscuit" in n.node.get_content())
    record = receipt.turns[0].id
    assert dog.node.node_id == f"{namespace}#{record}"
    assert dog.node.get_content() == "My dog is called Biscuit."
    meta = dog.node.metadata
    assert (meta["citation"], meta["record"], meta["session"], meta["speaker"]) == (f"#{record}", record, "s1", "Alice")
    assert meta["time"].startswith("2024-05-02T10:00:00") and meta["scores"]["lexical"]["rank"] >= 1
    assert dog.score == meta["scores"]["fused_score"] and dog.score is not None and dog.score > 0
    assert retriever.retrieve("zzz qqq xyzzy") == []

    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("What is my dog called?")
    assert any(n.node.node_id == f"{namespace}#{record}" for n in response.source_nodes)
    # MockLLM echoes its prompt: the turn's text reached the model, without the score metadata.
    assert "My dog is called Biscuit." in str(response) and "fused_score" not in str(response)


def test_memory_block_stores_flushed_messages_and_recalls_them(store: Any, namespace: str) -> None:
    block = EvicortexMemoryBlock(store=store, namespace=namespace, budget=200, reader_tokenizer="cl100k_base")
    chat = ChatMemory.from_defaults(
        session_id="chat-1", token_limit=40, token_flush_size=20, chat_history_token_ratio=0.5,
        memory_blocks=[block], tokenizer_fn=lambda text: text.split(),
    )
    said: List[ChatMessage] = []
    for i, (question, reply) in enumerate([
        ("My dog is called Biscuit and she is a beagle.", "Noted, a beagle called Biscuit."),
        ("I moved to Lisbon for work in June.", "Lisbon, noted."),
        ("I play the cello on Sundays.", "The cello, noted."),
        ("My sister lives in Porto.", "Porto, noted."),
    ]):
        for message in (ChatMessage(role="user", content=question), ChatMessage(role="assistant", content=reply)):
            chat.put(message)
            said.append(message)
    stored = [t for t in store.export(namespace) if t.session == "chat-1"]
    assert stored, "the chat memory flushed its oldest messages to the block"
    assert [(t.role, t.text) for t in stored] == [(m.role.value, m.content) for m in said[: len(stored)]]
    assert [t.turn for t in stored] == list(range(len(stored)))

    messages = chat.get(input="What breed is my dog?")
    blocks = "\n".join(str(m.content) for m in messages)
    assert "<evicortex>" in blocks and "beagle called Biscuit" in blocks and "[#" in blocks
