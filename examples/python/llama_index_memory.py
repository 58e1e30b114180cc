"""LlamaIndex over EviCortex: a query engine that reads the cited turns EviCortex retrieves, and
a chat memory whose older messages go to EviCortex verbatim and come back as cited evidence.

    pip install ./python llama-index-core    # from a clone of the repository
    evicortex model fetch                    # the pinned encoder (or Memory(..., dense=False))
    python examples/python/llama_index_memory.py ./my-store

It runs with LlamaIndex's MockLLM (which echoes its prompt, so you see what the model would
read); pass your LLM instead.
"""

from __future__ import annotations

import sys
from typing import List

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.mock import MockLLM
from llama_index.core.memory import Memory as ChatMemory
from llama_index.core.query_engine import RetrieverQueryEngine

import evicortex
from evicortex.integrations.llama_index import EvicortexMemoryBlock, EvicortexRetriever

NAMESPACE = "llama-index-demo"


def main(argv: List[str]) -> None:
    store = evicortex.Memory(argv[1] if len(argv) > 1 else "./evicortex-data", dense="--lexical" not in argv)
    chat = ChatMemory.from_defaults(
        session_id="chat-1",
        token_limit=30,
        tokenizer_fn=lambda text: text.split(),  # count words here; your model's tokens in yours
        memory_blocks=[
            EvicortexMemoryBlock(store=store, namespace=NAMESPACE, budget=300, reader_tokenizer="cl100k_base")
        ],
    )
    for said, reply in [("My dog is called Biscuit and she is a beagle.", "A beagle called Biscuit, noted."),
                        ("I moved to Lisbon for work in June.", "Lisbon, noted."),
                        ("My sister lives in Porto.", "Porto, noted.")]:
        chat.put(ChatMessage(role="user", content=said))
        chat.put(ChatMessage(role="assistant", content=reply))
    print(f"{store.stats(NAMESPACE).turns} older messages are in EviCortex")
    for message in chat.get(input="What breed is my dog?"):
        print(f"{message.role.value}: {message.content}")

    retriever = EvicortexRetriever(store, NAMESPACE, budget=300, reader_tokenizer="cl100k_base")
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("Where did I move for work?")
    for node in response.source_nodes:
        print(node.node.metadata["citation"], node.node.metadata["time"], round(node.score or 0, 4), node.node.get_content())


if __name__ == "__main__":
    main(sys.argv)
