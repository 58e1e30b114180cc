//! HTTP and MCP servers for EviCortex.
