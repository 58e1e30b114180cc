//! Integration tests of the pinned encoder. Tests that need the real weights fail (never skip)
//! with the command that fetches them.

mod support;

// Tamper detection on a copy of the installed model; a missing model names its fetch command.
mod artifacts;
// Parity with PyTorch sentence-transformers on the committed golden vectors.
mod parity;
// Roles, overlength policies, batching and identity of the real encoder.
mod encoder;
// The BERT cross-encoder against transformers on a generated small model.
mod cross_encoder;
