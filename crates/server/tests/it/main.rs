//! Integration tests of the HTTP server: the real server on loopback (and the router in-process
//! for fuzzing), over a real store in a temporary directory.

// Test harness: a real server on 127.0.0.1 over a temporary store, with keys and a client.
mod harness;

// Answers with the real smallest reader; the served reader is for admin keys only.
mod answer;
// The chat-completions router and the reader crate's client against it.
mod chat_completions;
// Keys: 401 without a key, the same 403 for any namespace the key does not grant, admin routes.
mod auth;
// Every operation of the OpenAPI document under every kind of key, generated from the document.
mod auth_matrix;
// Bad input: 400/413/422 naming the field, 409 on conflicts, nothing stored by a refused batch.
mod bad_input;
// Appending, stats, erasure and verify through the API.
mod round_trip;
// Export: the facade's export of one namespace, its key rules, and a body read at the client's
// pace that holds up no writer.
mod export;
// Concurrent appends over real sockets: every acknowledged turn is stored, the ledger verifies.
mod concurrency;
// Random requests against the router: never a 5xx, never a non-JSON error.
mod fuzz;
// 10,000 random operations over 20 namespaces: no response carries another namespace's text.
mod isolation;
// The inspector's assets (types, CSP) and its routes: namespaces and sessions, same 401/403.
mod inspector;
// The OpenAPI document lists every route.
mod openapi;
