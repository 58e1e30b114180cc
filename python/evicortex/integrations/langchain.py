"""LangChain: a retriever of cited turns, a chat message history kept in EviCortex, and the
compiled context as a runnable for prompts. Needs `langchain-core`.

```python
from evicortex.integrations.langchain import (
    EvicortexRetriever, EvicortexChatMessageHistory, compiled_context)

retriever = EvicortexRetriever(store=memory, namespace="alice", budget=300,
                               reader_tokenizer="o200k_base")
docs = retriever.invoke("Where did I move?")   # one Document per cited turn
chain = {"context": compiled_context(memory, "alice", budget=300,
                                     reader_tokenizer="o200k_base"),
         "question": RunnablePassthrough()} | prompt | model
```
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import ConfigDict

from .._args import AsOf
from .._errors import BadInputError
from .._types import CompiledContext
from ._common import Store, append_at, item_metadata, next_turn, now, session_turns

__all__ = [
    "EvicortexChatMessageHistory",
    "EvicortexRetriever",
    "NO_EVIDENCE",
    "compiled_context",
]

NO_EVIDENCE = "Memory holds no evidence for this question."
"""What `compiled_context` puts in the prompt when the compiler abstains (its text is empty)."""


class EvicortexRetriever(BaseRetriever):
    """The turns of `namespace` that support the query, as compiled into `budget` tokens of
    `reader_tokenizer`: one `Document` per cited turn, in the compiled text's order, its
    `page_content` the turn verbatim (or the verbatim excerpt the compiler packed of a long
    turn, with the `excerpts` setting) and its `metadata` the citation (`#12`), record,
    namespace, session, turn, time, role, speaker, digest, tokens, `selected_by`, `scores` and
    `excerpt`.
    No documents when the compiler abstains. `settings` are compile settings (`rrf_k=5.0`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any
    namespace: str
    budget: int
    reader_tokenizer: str
    as_of: AsOf = None
    settings: Dict[str, Any] = {}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> List[Document]:
        context = _compile(
            self.store, self.namespace, query, self.budget, self.reader_tokenizer, self.as_of, self.settings
        )
        return [
            Document(page_content=item.text, metadata=item_metadata(context, item))
            for item in context.items
        ]


def compiled_context(
    store: Store,
    namespace: str,
    *,
    budget: int,
    reader_tokenizer: str,
    as_of: AsOf = None,
    question_key: str = "question",
    **settings: Any,
) -> Runnable[Union[str, Mapping[str, Any]], str]:
    """A runnable from a question (a string, or a mapping holding it at `question_key`) to the
    compiled context's text: the cited turns packed into `budget` tokens of `reader_tokenizer`,
    ready for a prompt variable; `NO_EVIDENCE` when the compiler abstains. Budget the prompt
    around it: the text never exceeds `budget` tokens."""

    def run(value: Union[str, Mapping[str, Any]]) -> str:
        question = value if isinstance(value, str) else value.get(question_key)
        if not isinstance(question, str):
            message = f"{question_key}: expected the question as a string or under {question_key!r}"
            raise BadInputError(message, question_key)
        context = _compile(store, namespace, question, budget, reader_tokenizer, as_of, settings)
        return context.text if not context.abstain else NO_EVIDENCE

    return RunnableLambda(run, name="evicortex_compiled_context")


class EvicortexChatMessageHistory(BaseChatMessageHistory):
    """A conversation kept verbatim in EviCortex: `session` of `namespace`. Messages are
    appended as turns (human: `user`, AI: `assistant`, system: `system`, tool: `tool`; a
    message's `name` is the speaker) at the next turn indexes, timed now; `messages` reads the
    session back in turn order; `clear()` erases the session everywhere (ledger text and
    derived data). Text content only: a message with other content blocks is refused."""

    def __init__(self, store: Store, namespace: str, session: str) -> None:
        self.store = store
        self.namespace = namespace
        self.session = session
        self._next: Optional[int] = None

    @property
    def messages(self) -> List[BaseMessage]:  # type: ignore[override]
        return [_message(t.role, t.text, t.speaker) for t in session_turns(self.store, self.namespace, self.session)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if not messages:
            return
        time = now()
        turns = [_turn(i, m, time) for i, m in enumerate(messages)]
        if self._next is None:
            self._next = next_turn(self.store, self.namespace, self.session)
        self._next = append_at(self.store, self.namespace, self.session, self._next, turns)

    def clear(self) -> None:
        if session_turns(self.store, self.namespace, self.session):
            self.store.erase(self.namespace, session=self.session)


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _turn(index: int, message: BaseMessage, time: str) -> Dict[str, Any]:
    if not isinstance(message.content, str):
        field = f"messages[{index}].content"
        raise BadInputError(f"{field}: only text content is stored", field)
    role = _ROLES.get(message.type)
    if role is None and isinstance(message, ChatMessage):
        role = message.role
    if role is None:
        field = f"messages[{index}].type"
        raise BadInputError(f"{field}: {message.type!r} has no turn role", field)
    turn: Dict[str, Any] = {"role": role, "text": message.content, "time": time}
    if message.name:
        turn["speaker"] = message.name
    return turn


def _message(role: str, text: str, speaker: Optional[str]) -> BaseMessage:
    if role == "user":
        return HumanMessage(content=text, name=speaker)
    if role == "assistant":
        return AIMessage(content=text, name=speaker)
    if role == "system":
        return SystemMessage(content=text, name=speaker)
    return ChatMessage(role=role, content=text, name=speaker)


def _compile(
    store: Store,
    namespace: str,
    query: str,
    budget: int,
    reader_tokenizer: str,
    as_of: AsOf,
    settings: Mapping[str, Any],
) -> CompiledContext:
    return store.compile(
        namespace, query, budget=budget, reader_tokenizer=reader_tokenizer, as_of=as_of, **settings
    )
