"""`Memory`: an embedded store, through the native module over the `evicortex` facade."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Optional, Union

from . import _native
from ._args import AsOf, as_of_text, erase_body, settings_json, turn_objects
from ._errors import ModelMissingError, from_native
from ._types import (
    Answer,
    AppendReceipt,
    CompiledContext,
    EraseReceipt,
    NamespaceStats,
    Turn,
    TurnLike,
    VerifyReport,
)


class Memory:
    """An EviCortex store in a local directory (created when missing), no server needed.

    With `dense=True` (the default) it loads the pinned sentence encoder (all-MiniLM-L6-v2) from
    the verified model cache; when it is not installed, opening raises `ModelMissingError`
    naming `evicortex model fetch`. There is no silent fallback: `dense=False` opens it for
    lexical (BM25) retrieval only, by choice, compiling as `evicortex compile --dense off` does
    (abstention on lexical coverage). Every method that reads or writes the store, or
    runs the encoder, releases the GIL.

    A `Memory` holds the store's writer lock for as long as it lives: on a store that
    `evicortex serve`, `evicortex mcp` or another process's `Memory` holds, opening raises
    `StorageError` naming the holder's pid (send the turns through the running server's API
    instead).
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], *, dense: bool = True) -> None:
        try:
            self._native = _native.NativeMemory(os.fspath(path), dense)
        except _native.NativeError as e:
            raise from_native(e) from None

    @staticmethod
    def has_local_reader() -> bool:
        """Whether this package was built with the local reader (llama.cpp) that `answer`
        needs (`pip install ./python -C maturin.build-args="--features local-reader"`)."""
        return _native.local_reader_built()

    @property
    def has_encoder(self) -> bool:
        """Whether dense retrieval is available (the pinned encoder is loaded)."""
        return self._native.has_encoder()

    def append(self, turns: Iterable[TurnLike], namespace: Optional[str] = None) -> AppendReceipt:
        """Stores `turns` as one atomic, durable batch (idempotent per turn). Each turn gives
        its namespace, or `namespace` gives it for all (a turn naming another is refused)."""
        objects = turn_objects(turns)
        try:
            raw = self._native.append(json.dumps(objects), namespace)
        except _native.NativeError as e:
            raise from_native(e) from None
        return AppendReceipt.from_json(json.loads(raw))

    def compile(
        self,
        namespace: str,
        query: str,
        *,
        budget: int,
        reader_tokenizer: str,
        as_of: AsOf = None,
        **settings: Any,
    ) -> CompiledContext:
        """The turns of `namespace` that support `query`, cited and packed into `budget` tokens
        of `reader_tokenizer` (`o200k_base`, `cl100k_base` or a tokenizer.json path), or an
        abstention. Only turns said at or before `as_of` are used. `settings` are compile
        configuration fields set over the committed default (`rrf_k=5.0`,
        `lexical={"top_n": 20}`, `dense={"mode": "off"}`, which also makes abstention use lexical
        coverage unless `abstention` names a signal); an unknown one is refused by name.
        Turns not embedded yet are embedded first."""
        try:
            raw = self._native.compile(
                namespace,
                query,
                budget,
                reader_tokenizer,
                as_of_text(as_of),
                settings_json(settings),
            )
        except _native.NativeError as e:
            raise from_native(e) from None
        return CompiledContext.from_json(json.loads(raw))

    def answer(
        self,
        namespace: str,
        query: str,
        *,
        budget: int,
        reader: Optional[str] = None,
        as_of: AsOf = None,
        max_new_tokens: int = 64,
        **settings: Any,
    ) -> Answer:
        """A local reader (`reader`, a name from `evicortex model list`; default the pinned
        default reader, installed by `evicortex model fetch NAME`) answers `query` from a
        context of `namespace` compiled in its own tokens within `budget`, citing records, or
        abstains; `settings` as for `compile`. The model is loaded once per process.

        Needs a package built with the local reader (llama.cpp), which the default
        `pip install ./python` leaves out: `has_local_reader()` says which this is, and
        without it this raises `ModelMissingError` naming the install option. A `Client`
        answers through the server's reader in either build."""
        if not _native.local_reader_built():
            raise ModelMissingError(
                "reader: this evicortex package was built without the local reader; reinstall it "
                "with `pip install ./python -C maturin.build-args=\"--features local-reader\"` "
                "(builds llama.cpp), or answer with Client(url, key).answer against "
                "`evicortex serve --reader NAME`",
                "reader",
            )
        try:
            raw = _native.answer(
                self._native,
                namespace,
                query,
                budget,
                reader,
                as_of_text(as_of),
                settings_json(settings),
                max_new_tokens,
            )
        except _native.NativeError as e:
            raise from_native(e) from None
        return Answer.from_json(json.loads(raw))

    def config(self, **settings: Any) -> Dict[str, Any]:
        """The full compile configuration `compile(..., **settings)` would use."""
        try:
            return dict(json.loads(self._native.config_json(settings_json(settings))))
        except _native.NativeError as e:
            raise from_native(e) from None

    def erase(
        self,
        namespace: str,
        *,
        session: Optional[str] = None,
        record: Optional[int] = None,
        all: bool = False,
    ) -> EraseReceipt:
        """Forgets one session, one record, or (`all=True`) the whole namespace, everywhere:
        the ledger keeps a redaction record, derived data is purged."""
        body = erase_body(session, record, all)
        try:
            raw = self._native.erase(namespace, body.get("session"), body.get("record"), all)
        except _native.NativeError as e:
            raise from_native(e) from None
        return EraseReceipt.from_json(json.loads(raw))

    def verify(self) -> VerifyReport:
        """Checks every record's digest and chain link; raises `IntegrityError` on the first
        bad one."""
        try:
            return VerifyReport.from_json(json.loads(self._native.verify()))
        except _native.NativeError as e:
            raise from_native(e) from None

    def stats(self, namespace: str) -> NamespaceStats:
        """Counts of the namespace's live turns."""
        try:
            return NamespaceStats.from_json(json.loads(self._native.stats(namespace)))
        except _native.NativeError as e:
            raise from_native(e) from None

    def export(self, namespace: Optional[str] = None) -> List[Turn]:
        """The live turns (of `namespace`, or all), in ledger order, texts byte for byte:
        `append` takes them back."""
        try:
            raw = self._native.export(namespace)
        except _native.NativeError as e:
            raise from_native(e) from None
        return [Turn.from_dict(json.loads(line)) for line in raw.splitlines() if line]
