"""Typed results, built from the JSON shapes the HTTP API and the native module share, so the
embedded `Memory` and the HTTP `Client` return the same types."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union


@dataclass(frozen=True)
class Turn:
    """One conversation turn, with the fields of the JSONL ingest format.

    `time` is RFC 3339 with an explicit offset (or an aware `datetime`). `namespace` may be left
    out when `append` is given one."""

    session: str
    turn: int
    role: str
    text: str
    time: Union[str, datetime.datetime]
    speaker: Optional[str] = None
    namespace: Optional[str] = None
    meta: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object of the ingest format (fields left as None are omitted)."""
        out: Dict[str, Any] = {
            "session": self.session,
            "turn": self.turn,
            "role": self.role,
            "text": self.text,
            "time": self.time.isoformat() if isinstance(self.time, datetime.datetime) else self.time,
        }
        for name in ("speaker", "namespace", "meta"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @staticmethod
    def from_dict(raw: Mapping[str, Any]) -> "Turn":
        """A turn from an ingest-format object (as `export` writes them)."""
        return Turn(
            session=raw["session"],
            turn=raw["turn"],
            role=raw["role"],
            text=raw["text"],
            time=raw["time"],
            speaker=raw.get("speaker"),
            namespace=raw.get("namespace"),
            meta=raw.get("meta"),
        )


TurnLike = Union[Turn, Mapping[str, Any]]


@dataclass(frozen=True)
class AppendedTurn:
    """Where one appended turn is stored: its record's number in the namespace (`id`, what
    citations and `erase(record=)` use), digest, and whether it was new (`appended`) or already
    stored identically (`already_present`)."""

    id: int
    digest: str
    status: str


@dataclass(frozen=True)
class AppendReceipt:
    """The outcome of one atomic append, one entry per input turn in input order."""

    appended: int
    already_present: int
    turns: List[AppendedTurn]

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> "AppendReceipt":
        return AppendReceipt(
            appended=raw["appended"],
            already_present=raw["already_present"],
            turns=[AppendedTurn(t["id"], t["digest"], t["status"]) for t in raw["turns"]],
        )


@dataclass(frozen=True)
class RankScore:
    """A retriever's rank (from 1) and raw score for one candidate."""

    rank: int
    score: float


def _rank(raw: Optional[Mapping[str, Any]]) -> Optional[RankScore]:
    return None if raw is None else RankScore(raw["rank"], raw["score"])


@dataclass(frozen=True)
class Scores:
    """How a turn ranked: BM25, dense cosine and reranker ranks and raw scores (None where that
    stage did not list it), and its fused rank and RRF score."""

    lexical: Optional[RankScore]
    dense: Optional[RankScore]
    rerank: Optional[RankScore]
    fused_rank: Optional[int]
    fused_score: Optional[float]


@dataclass(frozen=True)
class ContextItem:
    """One turn in the compiled text, cited as `citation` (`#12`)."""

    citation: str
    record: int
    digest: str
    session: str
    turn: int
    time: str
    role: str
    speaker: Optional[str]
    text: str
    tokens: int
    selected_by: str
    scores: Scores
    also_cited: List[int] = field(default_factory=list)
    excerpt: Optional[Dict[str, int]] = None
    """Where `text` lies in the turn when the compiler packed an excerpt of a long turn (the
    `excerpts` setting): `start` and `end` characters, of `turn_chars`; None for a whole turn."""

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> "ContextItem":
        return ContextItem(
            citation=raw["citation"],
            record=raw["record"],
            digest=raw["digest"],
            session=raw["session"],
            turn=raw["turn"],
            time=raw["time"],
            role=raw["role"],
            speaker=raw.get("speaker"),
            text=raw["text"],
            tokens=raw["tokens"],
            selected_by=raw["selected_by"]["kind"],
            scores=Scores(
                lexical=_rank(raw.get("lexical")),
                dense=_rank(raw.get("dense")),
                rerank=_rank(raw.get("rerank")),
                fused_rank=raw.get("fused_rank"),
                fused_score=raw.get("fused_score"),
            ),
            also_cited=list(raw.get("also_cited", [])),
            excerpt=raw.get("excerpt"),
        )


@dataclass(frozen=True)
class ExcludedCandidate:
    """A candidate left out of the text, with the reason (`budget`, `duplicate`, ...)."""

    record: int
    reason: str
    scores: Scores

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> "ExcludedCandidate":
        reason = raw["reason"]
        return ExcludedCandidate(
            record=raw["record"],
            reason=reason["kind"] if isinstance(reason, Mapping) else str(reason),
            scores=Scores(
                lexical=_rank(raw.get("lexical")),
                dense=_rank(raw.get("dense")),
                rerank=None,
                fused_rank=raw.get("fused_rank"),
                fused_score=None,
            ),
        )


@dataclass(frozen=True)
class CompiledContext:
    """A compiled context: `text` for the reader (empty when abstaining), packed into `budget`
    reader tokens, with the cited `items`, the `excluded` candidates, and the whole manifest in
    `manifest` (the JSON of `evicortex compile --json`)."""

    namespace: str
    question: str
    as_of: Optional[str]
    text: str
    tokens_used: int
    budget: int
    reader_tokenizer: str
    abstain: bool
    abstain_reason: Optional[str]
    support: Optional[float]
    items: List[ContextItem]
    excluded: List[ExcludedCandidate]
    config: Dict[str, Any]
    manifest: Dict[str, Any]

    @staticmethod
    def from_json(raw: Dict[str, Any]) -> "CompiledContext":
        reason = raw.get("abstain_reason")
        return CompiledContext(
            namespace=raw["namespace"],
            question=raw["question"],
            as_of=raw.get("as_of"),
            text=raw["text"],
            tokens_used=raw["tokens_used"],
            budget=raw["budget"],
            reader_tokenizer=raw["reader_tokenizer"],
            abstain=raw["abstain"],
            abstain_reason=None if reason is None else reason["kind"],
            support=raw.get("support"),
            items=[ContextItem.from_json(i) for i in raw["items"]],
            excluded=[ExcludedCandidate.from_json(e) for e in raw["excluded"]],
            config=raw["config"],
            manifest=raw,
        )


@dataclass(frozen=True)
class EraseReceipt:
    """What an erasure did: the redaction record it appended (None when nothing was live), the
    records it erased, and how many matching turns an earlier erasure had already erased."""

    redaction: Optional[int]
    erased: List[int]
    already_erased: int

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> "EraseReceipt":
        return EraseReceipt(raw.get("redaction"), list(raw["erased"]), raw["already_erased"])


@dataclass(frozen=True)
class VerifyReport:
    """The whole ledger checked: every record's digest and chain link. `head` is the last
    record's position in the whole ledger (all namespaces), not a record id."""

    records: int
    turns: int
    erased_turns: int
    redactions: int
    head: Optional[int]
    chain_head: str

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> "VerifyReport":
        return VerifyReport(
            records=raw["records"],
            turns=raw["turns"],
            erased_turns=raw["erased_turns"],
            redactions=raw["redactions"],
            head=raw.get("head"),
            chain_head=raw["chain_head"],
        )


@dataclass(frozen=True)
class NamespaceStats:
    """Counts of one namespace's live (unerased) turns."""

    namespace: str
    turns: int
    sessions: int
    text_bytes: int

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> "NamespaceStats":
        return NamespaceStats(raw["namespace"], raw["turns"], raw["sessions"], raw["text_bytes"])


@dataclass(frozen=True)
class ReaderReply:
    """What the reader replied: the text verbatim, the context's records it cited
    (`citations`), record ids it cited that the context does not hold (`unknown_citations`),
    whether the reply is the abstention, the reader's identity (`reader["backend"]` is
    `local_gguf` or `chat_completions`), and what it cost."""

    text: str
    citations: List[int]
    unknown_citations: List[int]
    abstained: bool
    reader: Dict[str, Any]
    prompt_tokens: int
    generated_tokens: int
    finish: str
    seconds: float

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> "ReaderReply":
        return ReaderReply(
            text=raw["text"],
            citations=list(raw["citations"]),
            unknown_citations=list(raw["unknown_citations"]),
            abstained=raw["abstained"],
            reader=dict(raw["reader"]),
            prompt_tokens=raw["prompt_tokens"],
            generated_tokens=raw["generated_tokens"],
            finish=raw["finish"],
            seconds=raw["seconds"],
        )


@dataclass(frozen=True)
class Answer:
    """An answer from memory: the reader's `reply` to a context compiled in its own tokens, or
    the abstention. `compiler_abstained` means nothing in memory supported the question and the
    reader was not asked (`reply` is None); `abstained` is that or the reader's own abstention.
    `context_text` is the context the reader read, `tokens_used` of `budget` reader tokens."""

    abstained: bool
    compiler_abstained: bool
    abstain_reason: Optional[str]
    reply: Optional[ReaderReply]
    context_text: str
    tokens_used: int
    budget: int
    reader_tokenizer: str
    support: Optional[float]
    compile_seconds: float
    raw: Dict[str, Any]

    @property
    def text(self) -> Optional[str]:
        """The reader's reply, or None when the compiler abstained."""
        return None if self.reply is None else self.reply.text

    @staticmethod
    def from_json(raw: Dict[str, Any]) -> "Answer":
        context = raw["context"]
        reply = raw.get("answer")
        return Answer(
            abstained=raw["abstained"],
            compiler_abstained=raw["compiler_abstained"],
            abstain_reason=raw.get("abstain_reason"),
            reply=None if reply is None else ReaderReply.from_json(reply),
            context_text=context["text"],
            tokens_used=context["tokens_used"],
            budget=context["budget"],
            reader_tokenizer=context["reader_tokenizer"],
            support=context.get("support"),
            compile_seconds=raw["compile_seconds"],
            raw=raw,
        )
