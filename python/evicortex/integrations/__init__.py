"""Adapters for agent frameworks, over a `Memory` (embedded) or a `Client` (`evicortex serve`).

Each module imports its framework, which is not a dependency of `evicortex`: install the one you
use (`pip install langchain-core`, `llama-index-core` or `openai-agents`).

- `evicortex.integrations.langchain`: a retriever, a chat message history, and the compiled
  context as a runnable for prompts.
- `evicortex.integrations.llama_index`: a retriever and a memory block.
- `evicortex.integrations.openai_agents`: the function tools `remember`, `recall` and `forget`.
"""
