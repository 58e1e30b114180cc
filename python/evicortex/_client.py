"""`Client`: the same methods and result types as `Memory`, over the HTTP API of
`evicortex serve` (standard library only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterable, List, Optional

from ._args import AsOf, as_of_text, erase_body, settings_json, turn_objects
from ._errors import BadInputError, TransportError, from_http
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


class Client:
    """A client of `evicortex serve` at `url` (`http://127.0.0.1:8787`), sending `key` as
    `Authorization: Bearer <key>`. A namespace key reaches its own namespace only; `verify`
    needs an admin key. Errors raise the same exception classes as `Memory`, plus `AuthError`
    (401, 403), `UnavailableError` (503, and 429 when a queue is full) and `TransportError`
    (unreachable)."""

    def __init__(self, url: str, key: str, *, timeout: float = 300.0) -> None:
        self._url = url.rstrip("/")
        self._key = key
        self._timeout = timeout

    def append(self, turns: Iterable[TurnLike], namespace: Optional[str] = None) -> AppendReceipt:
        """Stores `turns` as one atomic batch in one namespace: `namespace`, or the one the
        turns give (turns of several namespaces are refused: one request is one batch)."""
        objects = turn_objects(turns)
        for i, obj in enumerate(objects):
            own = obj.pop("namespace", None)
            if own is None:
                continue
            if namespace is None:
                namespace = own
            elif own != namespace:
                message = f"turns[{i}].namespace: {own!r} is not {namespace!r}; one append is one namespace"
                raise BadInputError(message, f"turns[{i}].namespace")
        if namespace is None:
            raise BadInputError("namespace: give namespace= or a namespace in each turn", "namespace")
        raw = self._request("POST", f"/v1/namespaces/{_segment(namespace)}/turns", {"turns": objects})
        return AppendReceipt.from_json(raw)

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
        """As `Memory.compile`, on the server (whose reader tokenizers are `o200k_base` and
        `cl100k_base`)."""
        body = _query_body(query, budget, as_of, settings, reader_tokenizer=reader_tokenizer)
        raw = self._request("POST", f"/v1/namespaces/{_segment(namespace)}/compile", body)
        return CompiledContext.from_json(raw)

    def answer(
        self,
        namespace: str,
        query: str,
        *,
        budget: int,
        as_of: AsOf = None,
        max_new_tokens: Optional[int] = None,
        **settings: Any,
    ) -> Answer:
        """The server's reader (`evicortex serve --reader NAME`) answers `query` from a context
        compiled in its own tokens within `budget`, citing records, or abstains. `max_new_tokens`
        (1 to 512, the server's default 64) bounds the reply; `settings` as for `compile`.
        Raises `UnavailableError` when the server has no reader. Works whether or not this
        package was built with the local reader."""
        body = _query_body(query, budget, as_of, settings, max_new_tokens=max_new_tokens)
        raw = self._request("POST", f"/v1/namespaces/{_segment(namespace)}/answer", body)
        return Answer.from_json(raw)

    def erase(
        self,
        namespace: str,
        *,
        session: Optional[str] = None,
        record: Optional[int] = None,
        all: bool = False,
    ) -> EraseReceipt:
        """As `Memory.erase`, on the server."""
        body = erase_body(session, record, all)
        raw = self._request("POST", f"/v1/namespaces/{_segment(namespace)}/erase", body)
        return EraseReceipt.from_json(raw)

    def verify(self) -> VerifyReport:
        """As `Memory.verify`, on the server (admin keys only)."""
        return VerifyReport.from_json(self._request("GET", "/v1/verify", None))

    def stats(self, namespace: str) -> NamespaceStats:
        """As `Memory.stats`, on the server."""
        raw = self._request("GET", f"/v1/namespaces/{_segment(namespace)}/stats", None)
        return NamespaceStats.from_json(raw)

    def export(self, namespace: Optional[str] = None) -> List[Turn]:
        """As `Memory.export`, on the server: the live turns of `namespace`, in ledger order,
        texts byte for byte. Without `namespace`, those of the one namespace the key reads (a
        namespace key's own): `Memory.export()` on the same store, as far as the key may read
        it. A key that reads several namespaces (an admin key) must name one: the server
        exports one namespace per request, and turns of several could not be put back in
        ledger order."""
        if namespace is None:
            readable = self._request("GET", "/v1/namespaces", None)["namespaces"]
            if not readable:
                return []
            if len(readable) > 1:
                message = f"namespace: this key reads {len(readable)} namespaces; name the one to export"
                raise BadInputError(message, "namespace")
            namespace = str(readable[0])
        raw = self._request("GET", f"/v1/namespaces/{_segment(namespace)}/export", None)
        return [Turn.from_dict(turn) for turn in raw["turns"]]

    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self._url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._key}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return _json_object(response.read(), path)
        except urllib.error.HTTPError as e:
            payload = e.read()
            try:
                error = _json_object(payload, path)
                message, field = str(error["error"]), error.get("field")
            except (TransportError, KeyError):
                message, field = f"HTTP {e.code}: {payload[:200]!r}", None
            raise from_http(e.code, message, field) from None
        except urllib.error.URLError as e:
            raise TransportError(f"{method} {self._url}{path}: {e.reason}") from None
        except OSError as e:
            raise TransportError(f"{method} {self._url}{path}: {e}") from None


def _query_body(
    query: str, budget: int, as_of: AsOf, settings: Dict[str, Any], **fields: Any
) -> Dict[str, Any]:
    """The body of a compile or answer request: the question, the budget, the as-of time and
    the compile settings when given, and `fields` that are not None."""
    body: Dict[str, Any] = {"query": query, "budget": budget}
    body.update((name, value) for name, value in fields.items() if value is not None)
    as_of = as_of_text(as_of)
    if as_of is not None:
        body["as_of"] = as_of
    if settings:
        body["options"] = json.loads(settings_json(settings))
    return body


def _segment(namespace: str) -> str:
    return urllib.parse.quote(namespace, safe="")


def _json_object(payload: bytes, path: str) -> Dict[str, Any]:
    try:
        value = json.loads(payload)
    except ValueError as e:
        raise TransportError(f"{path}: the answer is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise TransportError(f"{path}: the answer is not a JSON object")
    return value
