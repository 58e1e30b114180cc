"""What every adapter shares: the store it talks to, the metadata of a cited turn, and the
turns a framework's messages become."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional, Union

from .._client import Client
from .._errors import ConflictError
from .._memory import Memory
from .._types import CompiledContext, ContextItem, RankScore, Turn

Store = Union[Memory, Client]
"""An embedded `Memory` or a `Client` of `evicortex serve`: the same methods either way."""


def item_metadata(context: CompiledContext, item: ContextItem) -> Dict[str, Any]:
    """A cited turn's metadata: its citation (`#12`, as the compiled text cites it), record,
    namespace, session, turn index, time, role, speaker, digest, tokens, how it was selected,
    its scores (each retriever's rank and raw score, the fused rank and RRF score), and the
    excerpt's character range when the text is an excerpt of a long turn (else None)."""
    return {
        "citation": item.citation,
        "record": item.record,
        "namespace": context.namespace,
        "session": item.session,
        "turn": item.turn,
        "time": item.time,
        "role": item.role,
        "speaker": item.speaker,
        "digest": item.digest,
        "tokens": item.tokens,
        "selected_by": item.selected_by,
        "excerpt": item.excerpt,
        "scores": {
            "lexical": _rank(item.scores.lexical),
            "dense": _rank(item.scores.dense),
            "rerank": _rank(item.scores.rerank),
            "fused_rank": item.scores.fused_rank,
            "fused_score": item.scores.fused_score,
        },
    }


def _rank(rank: Optional[RankScore]) -> Optional[Dict[str, Any]]:
    return None if rank is None else {"rank": rank.rank, "score": rank.score}


def now() -> str:
    """The current time, RFC 3339 with its offset (UTC), as a turn's time."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def next_turn(store: Store, namespace: str, session: str) -> int:
    """One past the highest index of the session's live turns."""
    highest = -1
    for turn in store.export(namespace):
        if turn.session == session:
            highest = max(highest, turn.turn)
    return highest + 1


def append_at(
    store: Store, namespace: str, session: str, start: int, turns: List[Dict[str, Any]]
) -> int:
    """Appends `turns` (objects without session and turn index) to `session` as one batch at
    the indexes from `start` on, and returns the index after the last. An erased turn keeps its
    index, which is then refused (`ConflictError`): past an erased stretch (a cleared session)
    the batch moves further on, doubling the step, so it lands after the erased indexes."""
    step = 1
    for _ in range(64):
        batch = [{**t, "session": session, "turn": start + i} for i, t in enumerate(turns)]
        try:
            store.append(batch, namespace=namespace)
            return start + len(turns)
        except ConflictError:
            start += step
            step *= 2
    raise ConflictError(f"turns: no free turn index in session {session!r}", "turns")


def session_turns(store: Store, namespace: str, session: str) -> List[Turn]:
    """The live turns of one session, in turn order."""
    turns = [t for t in store.export(namespace) if t.session == session]
    return sorted(turns, key=lambda t: t.turn)
