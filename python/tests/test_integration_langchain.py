"""The LangChain adapter on a real store (embedded, and through `evicortex serve`): documents
are the cited turns with their metadata, the compiled context feeds a prompt within its budget,
and a chat history keeps every message as a turn. No network, no LLM: LangChain's fake chat
model stands in where a chain needs one."""

from __future__ import annotations

from typing import Any, List

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from evicortex.integrations.langchain import (
    NO_EVIDENCE,
    EvicortexChatMessageHistory,
    EvicortexRetriever,
    compiled_context,
)

TURNS = [
    {"session": "s1", "turn": 0, "role": "user", "speaker": "Alice", "text": "My dog is called Biscuit.",
     "time": "2024-05-02T10:00:00+01:00"},
    {"session": "s1", "turn": 1, "role": "assistant", "text": "Biscuit is a lovely name.",
     "time": "2024-05-02T10:00:05+01:00"},
    {"session": "s2", "turn": 0, "role": "user", "text": "I moved to Lisbon for work.",
     "time": "2024-06-10T09:00:00+01:00"},
]


def test_retriever_returns_the_cited_turns_with_their_metadata(store: Any, namespace: str) -> None:
    receipt = store.append(TURNS, namespace=namespace)
    retriever = EvicortexRetriever(store=store, namespace=namespace, budget=200, reader_tokenizer="o200k_base")
    docs = retriever.invoke("What is my dog called?")
    context = store.compile(namespace, "What is my dog called?", budget=200, reader_tokenizer="o200k_base")
    assert [d.page_content for d in docs] == [i.text for i in context.items]
    dog = next(d for d in docs if "Biscuit" in d.page_content)
    assert dog.page_content == TURNS[0]["text"]
    meta = dog.metadata
    assert meta["record"] == receipt.turns[0].id and meta["citation"] == f"#{receipt.turns[0].id}"
    assert f"[{meta['citation']}]" in context.text
    assert (meta["namespace"], meta["session"], meta["turn"], meta["speaker"]) == (namespace, "s1", 0, "Alice")
    assert meta["time"].startswith("2024-05-02T10:00:00") and meta["role"] == "user"
    assert meta["scores"]["lexical"]["rank"] >= 1 and meta["scores"]["fused_score"] > 0
    assert retriever.invoke("zzz qqq xyzzy") == []


def test_compiled_context_fills_a_prompt_within_its_budget(store: Any, namespace: str) -> None:
    store.append(TURNS, namespace=namespace)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from this evidence, citing records.\n{context}"), ("human", "{question}")]
    )
    seen: List[PromptValue] = []

    def capture(value: PromptValue) -> PromptValue:
        seen.append(value)
        return value

    model = FakeListChatModel(responses=["Biscuit [#0]."])
    context = compiled_context(store, namespace, budget=120, reader_tokenizer="o200k_base")
    chain = {"context": context, "question": RunnablePassthrough()} | prompt | RunnableLambda(capture) | model
    reply = chain.invoke("What is my dog called?")
    assert reply.content == "Biscuit [#0]."
    expected = store.compile(namespace, "What is my dog called?", budget=120, reader_tokenizer="o200k_base")
    assert 0 < expected.tokens_used <= 120
    system = seen[0].to_messages()[0].content
    assert system == "Answer from this evidence, citing records.\n" + expected.text
    assert "My dog is called Biscuit." in system
    assert context.invoke({"question": "zzz qqq xyzzy"}) == NO_EVIDENCE


def test_chat_history_keeps_every_message_as_a_turn(store: Any, namespace: str) -> None:
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    chain = prompt | FakeListChatModel(responses=["Noted.", "It is Biscuit."])
    seen: List[int] = []
    for question in ["My dog is called Biscuit.", "What is my dog called?"]:
        history = EvicortexChatMessageHistory(store, namespace, "chat-1")
        past = history.messages
        seen.append(len(past))
        reply = chain.invoke({"question": question, "history": past})
        history.add_messages([HumanMessage(question), AIMessage(str(reply.content))])
    assert seen == [0, 2], "the second question was asked with the first exchange as history"

    history = EvicortexChatMessageHistory(store, namespace, "chat-1")
    messages: List[BaseMessage] = history.messages
    assert [(type(m), m.content) for m in messages] == [
        (HumanMessage, "My dog is called Biscuit."),
        (AIMessage, "Noted."),
        (HumanMessage, "What is my dog called?"),
        (AIMessage, "It is Biscuit."),
    ]
    turns = [t for t in store.export(namespace) if t.session == "chat-1"]
    assert [(t.turn, t.role) for t in turns] == [(0, "user"), (1, "assistant"), (2, "user"), (3, "assistant")]
    # The history is memory: the retriever finds what was said in it.
    retriever = EvicortexRetriever(store=store, namespace=namespace, budget=200, reader_tokenizer="o200k_base")
    assert any(d.metadata["session"] == "chat-1" for d in retriever.invoke("What is my dog called?"))

    history.clear()
    assert history.messages == [] and store.stats(namespace).turns == 0
    # Erased turns keep their indexes: the next messages go after them.
    EvicortexChatMessageHistory(store, namespace, "chat-1").add_messages([HumanMessage("Hello again.")])
    again = [t for t in store.export(namespace) if t.session == "chat-1"]
    assert [t.text for t in again] == ["Hello again."] and again[0].turn >= 4
