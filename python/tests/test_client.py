"""`Client` against a real `evicortex serve` on loopback: the same methods and result types as
the embedded `Memory`, and the server's refusals as the same exception classes."""

from __future__ import annotations

import datetime
import itertools
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import evicortex
from evicortex import Client, Memory

from conftest import Server, serving

QUESTION = "Which city am I moving to for work?"


def test_client_matches_the_embedded_memory(
    server: Server, alice_turns: List[Dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    client = Client(server.url, server.key)
    receipt = client.append(alice_turns)
    assert isinstance(receipt, evicortex.AppendReceipt) and receipt.appended == len(alice_turns)
    # The server embeds appended turns in the background: wait until every turn is a dense
    # candidate, as the manifest's coverage says.
    deadline = time.monotonic() + 120
    while True:
        remote = client.compile("alice", QUESTION, budget=300, reader_tokenizer="o200k_base", rrf_k=10.0)
        if not remote.manifest["coverage"].get("dense_pending") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert isinstance(remote, evicortex.CompiledContext)
    assert any("Lisbon" in item.text for item in remote.items)

    local = Memory(tmp_path_factory.mktemp("local"))
    local.append(alice_turns)
    embedded = local.compile("alice", QUESTION, budget=300, reader_tokenizer="o200k_base", rrf_k=10.0)
    assert remote.text == embedded.text and remote.tokens_used == embedded.tokens_used
    assert [i.record for i in remote.items] == [i.record for i in embedded.items]
    # The server widens f32 settings through serde_json::Value (k1 1.2 -> 1.2000000476837158).
    assert _rounded(remote.config) == _rounded(embedded.config)

    stats = client.stats("alice")
    assert stats == local.stats("alice")
    admin = Client(server.url, server.admin_key)
    assert admin.verify().turns >= len(alice_turns)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def test_client_errors_are_the_same_classes(server: Server) -> None:
    client = Client(server.url, server.key)
    with pytest.raises(evicortex.BadInputError) as err:
        client.compile("alice", QUESTION, budget=300, reader_tokenizer="o200k_base", rrf_kk=1.0)
    assert err.value.field == "options.rrf_kk"
    bad = {"session": "s", "turn": 0, "role": "user", "text": "x", "time": "not a time"}
    with pytest.raises(evicortex.BadInputError) as err:
        client.append([bad], namespace="alice")
    assert err.value.field == "turns[0].time"
    with pytest.raises(evicortex.AuthError):
        client.stats("bob")
    with pytest.raises(evicortex.AuthError):
        Client(server.url, "wrong-key").stats("alice")
    with pytest.raises(evicortex.AuthError):
        client.verify()
    with pytest.raises(evicortex.NotFoundError):
        client.erase("alice", record=10_000_000)
    with pytest.raises(evicortex.TransportError):
        Client("http://127.0.0.1:9", server.key, timeout=5).stats("alice")


def test_client_erase(server: Server) -> None:
    client = Client(server.url, server.key)
    turn = evicortex.Turn(session="to-erase", turn=0, role="user", text="Forget this.", time="2024-07-01T00:00:00Z")
    client.append([turn], namespace="alice")
    receipt = client.erase("alice", session="to-erase")
    assert len(receipt.erased) == 1 and receipt.redaction is not None


def test_client_export_equals_the_embedded_export_of_the_same_store(
    tmp_path: Path, sample_turns: List[Dict[str, Any]]
) -> None:
    store = tmp_path / "store"
    with serving(store, "--lexical-only") as served:
        client = Client(served.url, served.key)
        admin = Client(served.url, served.admin_key)
        # One turn per request, bob's and alice's alternating in the ledger.
        bob_turns = [t for t in sample_turns if t["namespace"] == "bob"]
        alice_turns = [t for t in sample_turns if t["namespace"] == "alice"]
        ordered = [t for pair in itertools.zip_longest(bob_turns, alice_turns) for t in pair if t is not None]
        records = [admin.append([turn]).turns[0].id for turn in ordered]
        erased = records[1]  # alice's first turn
        client.erase("alice", record=erased)
        odd = evicortex.Turn(
            session="odd", turn=0, role="user", speaker="Alice", text="two\nlines \u00e9 \"q\" \\",
            time="2024-07-01T09:30:00.250000-03:00", meta={"source": "test", "n": [1, 2.5]},
        )
        client.append([odd], namespace="alice")
        alice = client.export("alice")
        own = client.export()
        bob = admin.export("bob")
        with pytest.raises(evicortex.BadInputError) as err:
            admin.export()
        assert err.value.field == "namespace"
        with pytest.raises(evicortex.AuthError):
            client.export("bob")
        assert admin.export("nobody") == []
    memory = Memory(store, dense=False)  # the server is stopped: its store is free
    assert alice == memory.export("alice") and own == alice
    assert bob == memory.export("bob")
    assert sorted(map(repr, memory.export())) == sorted(map(repr, alice + bob))
    appended = [t for t, r in zip(ordered, records) if r != erased and t["namespace"] == "alice"]
    appended.append(dict(odd.to_dict(), namespace="alice"))
    assert [_fields(evicortex.Turn.from_dict(t)) for t in appended] == [_fields(t) for t in alice]


def _fields(turn: evicortex.Turn) -> Any:
    """A turn's fields, its time as the instant and offset it names (export writes RFC 3339 in
    its own spelling: `+00:00` for `Z`)."""
    when = turn.time if isinstance(turn.time, datetime.datetime) else _parse_time(turn.time)
    return (turn.namespace, turn.session, turn.turn, turn.role, turn.speaker, turn.text, turn.meta, when, when.utcoffset())


def _parse_time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
