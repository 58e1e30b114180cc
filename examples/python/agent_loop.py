"""An assistant loop over EviCortex: every turn is stored verbatim, and before each answer the
memory compiles the evidence for it into a fixed budget of the reader's tokens.

The reader (your LLM call) is a function you supply: it gets the compiled context and the user's
message and returns the reply. Run it as is to chat with a stand-in reader that shows what it
would have been given:

    pip install ./python          # from a clone of the repository
    evicortex model fetch         # the pinned encoder (or Memory(..., dense=False))
    python examples/python/agent_loop.py ./my-store
"""

from __future__ import annotations

import datetime
import sys
from typing import Callable, List

import evicortex

Reader = Callable[[evicortex.CompiledContext, str], str]


class Assistant:
    """Remembers one user's conversation in `namespace` and answers with `reader`."""

    def __init__(
        self,
        memory: evicortex.Memory,
        namespace: str,
        session: str,
        reader: Reader,
        *,
        budget: int = 1000,
        reader_tokenizer: str = "o200k_base",
    ) -> None:
        self.memory = memory
        self.namespace = namespace
        self.session = session
        self.reader = reader
        self.budget = budget
        self.reader_tokenizer = reader_tokenizer
        self.next_turn = 0  # turns are numbered within the session

    def _store(self, role: str, text: str) -> None:
        turn = evicortex.Turn(
            session=self.session,
            turn=self.next_turn,
            role=role,
            text=text,
            time=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"),
        )
        self.memory.append([turn], namespace=self.namespace)
        self.next_turn += 1

    def respond(self, message: str) -> str:
        """Compiles the context for `message` from what was said before, has the reader answer,
        and stores both turns."""
        context = self.memory.compile(
            self.namespace, message, budget=self.budget, reader_tokenizer=self.reader_tokenizer
        )
        reply = self.reader(context, message)
        self._store("user", message)
        self._store("assistant", reply)
        return reply


def echo_reader(context: evicortex.CompiledContext, message: str) -> str:
    """A stand-in for an LLM: says which remembered turns it was given."""
    if context.abstain:
        return f"(nothing in memory supports an answer to {message!r})"
    cited: List[str] = [f"{item.citation} {item.text}" for item in context.items]
    return f"({context.tokens_used} tokens of memory) " + " | ".join(cited)


def main() -> None:
    store = sys.argv[1] if len(sys.argv) > 1 else "evicortex-agent-store"
    session = datetime.datetime.now(datetime.timezone.utc).strftime("chat-%Y%m%dT%H%M%S")
    assistant = Assistant(evicortex.Memory(store), "me", session, echo_reader)
    for line in sys.stdin:
        if line.strip():
            print(assistant.respond(line.strip()), flush=True)


if __name__ == "__main__":
    main()
