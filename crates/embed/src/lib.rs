//! Pinned, verified sentence encoder (MiniLM on candle), pooling, identity.
