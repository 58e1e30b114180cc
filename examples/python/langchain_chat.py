"""LangChain over EviCortex: a chat whose every message is kept verbatim as a turn, and a prompt
that gets, for each question, the cited evidence compiled from memory within a fixed budget of
the model's tokens.

    pip install ./python langchain-core      # from a clone of the repository
    evicortex model fetch                    # the pinned encoder (or Memory(..., dense=False))
    python examples/python/langchain_chat.py ./my-store

It runs with LangChain's fake chat model, which replies with canned text; put your model in its
place (`ChatOpenAI(model="gpt-4o-mini")` with reader_tokenizer "o200k_base", for one).
"""

from __future__ import annotations

import sys
from typing import Any, List

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnablePassthrough

import evicortex
from evicortex.integrations.langchain import (
    EvicortexChatMessageHistory,
    EvicortexRetriever,
    compiled_context,
)

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "You are a helpful assistant. Answer from the evidence and cite it as [#record].\n\n{context}"),
        MessagesPlaceholder("history"),
        ("human", "{question}"),
    ]
)


class Chat:
    """A chat that keeps each session's messages in `namespace` of `store` and reads 800 tokens
    of evidence, compiled from everything remembered, for every question."""

    def __init__(self, store: evicortex.Memory, namespace: str, model: BaseChatModel) -> None:
        self.store = store
        self.namespace = namespace
        context = compiled_context(store, namespace, budget=800, reader_tokenizer="o200k_base")
        self.chain: Runnable[Any, Any] = RunnablePassthrough.assign(context=context) | PROMPT | model

    def ask(self, session: str, question: str) -> str:
        history = EvicortexChatMessageHistory(self.store, self.namespace, session)
        reply = self.chain.invoke({"question": question, "history": history.messages})
        history.add_messages([HumanMessage(question), AIMessage(str(reply.content))])
        return str(reply.content)


def main(argv: List[str]) -> None:
    store = evicortex.Memory(argv[1] if len(argv) > 1 else "./evicortex-data", dense="--lexical" not in argv)
    model = FakeListChatModel(responses=["Noted: Biscuit, a beagle.", "Your dog is called Biscuit [#0]."])
    chat = Chat(store, "langchain-demo", model)
    for session, question in [("monday", "My dog is called Biscuit and she is a beagle."),
                              ("friday", "What is my dog called?")]:
        print(f"[{session}] user: {question}\n[{session}] assistant: {chat.ask(session, question)}")
    retriever = EvicortexRetriever(store=store, namespace="langchain-demo", budget=300, reader_tokenizer="o200k_base")
    for doc in retriever.invoke("What breed is my dog?"):
        print(doc.metadata["citation"], doc.metadata["session"], doc.metadata["time"], repr(doc.page_content))


if __name__ == "__main__":
    main(sys.argv)
