"""EviCortex: evidence-first long-term memory for LLM assistants.

`Memory(path)` is an embedded store (no server); `Client(url, key)` talks to `evicortex serve`
with the same methods and result types. Both are front ends over the Rust `evicortex` facade.
"""

from ._client import Client
from ._errors import (
    AuthError,
    BadInputError,
    ConflictError,
    EvicortexError,
    IntegrityError,
    InternalError,
    ModelMissingError,
    NotFoundError,
    StorageError,
    TransportError,
    UnavailableError,
)
from ._memory import Memory
from ._types import (
    Answer,
    AppendedTurn,
    AppendReceipt,
    CompiledContext,
    ContextItem,
    EraseReceipt,
    ExcludedCandidate,
    NamespaceStats,
    RankScore,
    ReaderReply,
    Scores,
    Turn,
    TurnLike,
    VerifyReport,
)

__all__ = [
    "Answer",
    "AppendReceipt",
    "AppendedTurn",
    "AuthError",
    "BadInputError",
    "Client",
    "CompiledContext",
    "ConflictError",
    "ContextItem",
    "EraseReceipt",
    "EvicortexError",
    "ExcludedCandidate",
    "IntegrityError",
    "InternalError",
    "Memory",
    "ModelMissingError",
    "NamespaceStats",
    "NotFoundError",
    "RankScore",
    "ReaderReply",
    "Scores",
    "StorageError",
    "TransportError",
    "Turn",
    "TurnLike",
    "UnavailableError",
    "VerifyReport",
]
