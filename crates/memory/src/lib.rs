//! EviCortex: evidence-first long-term memory for LLM assistants (ledger + indexes + compiler).
