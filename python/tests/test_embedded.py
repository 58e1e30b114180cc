"""The embedded `Memory`: append, compile, erase, verify, stats, export on a real store with
the pinned encoder (the test run needs its weights: `evicortex model fetch`)."""

from __future__ import annotations

import datetime
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import evicortex
from evicortex import Memory, Turn

from conftest import evicortex_bin

QUESTION = "Which city am I moving to for work?"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory, sample_turns: List[Dict[str, Any]]) -> Memory:
    memory = Memory(tmp_path_factory.mktemp("store"))
    receipt = memory.append(sample_turns)
    assert receipt.appended == len(sample_turns) and receipt.already_present == 0
    return memory


def test_compile_cites_the_turn_that_answers(memory: Memory) -> None:
    assert memory.has_encoder
    context = memory.compile("alice", QUESTION, budget=300, reader_tokenizer="o200k_base")
    assert isinstance(context, evicortex.CompiledContext)
    assert not context.abstain and context.abstain_reason is None
    assert 0 < context.tokens_used <= 300 and context.budget == 300
    assert any("Lisbon" in item.text for item in context.items)
    for item in context.items:
        assert item.citation in context.text
        assert item.text in context.text
        assert item.role in ("user", "assistant") and item.session and item.time
        assert item.scores.fused_rank is not None
    assert any(item.scores.dense is not None for item in context.items), "dense is on by default"
    assert context.config["dense"]["mode"] == "on"
    assert context.manifest["format"].startswith("evicortex-compiled-context")


def test_append_is_idempotent_and_typed_turns_work(memory: Memory, sample_turns: List[Dict[str, Any]]) -> None:
    again = memory.append(sample_turns[:2])
    assert again.appended == 0 and again.already_present == 2
    assert [t.status for t in again.turns] == ["already_present"] * 2
    turn = Turn(
        session="typed",
        turn=0,
        role="user",
        text="My sister Ana lives in Porto.",
        time=datetime.datetime(2024, 6, 1, 9, 0, tzinfo=datetime.timezone.utc),
    )
    receipt = memory.append([turn], namespace="alice")
    assert receipt.appended == 1 and receipt.turns[0].status == "appended"


def test_settings_use_the_config_field_names_and_unknown_ones_are_refused(memory: Memory) -> None:
    defaults = memory.config()
    assert defaults["lexical"]["top_n"] == 75 and defaults["dense"] == {"mode": "on", "top_n": 75}
    lexical = memory.compile(
        "alice", QUESTION, budget=200, reader_tokenizer="cl100k_base", rrf_k=5.0, dense={"mode": "off"}
    )
    assert lexical.config["rrf_k"] == 5.0 and lexical.config["dense"] == {"mode": "off"}
    assert lexical.config["abstention"]["signal"] == "lexical_coverage", "as `compile --dense off`"
    with pytest.raises(evicortex.BadInputError) as err:
        memory.compile(
            "alice", QUESTION, budget=200, reader_tokenizer="o200k_base",
            dense={"mode": "off"}, abstention={"signal": "max_dense_cosine"},
        )
    assert err.value.field == "abstention.signal", "the dense signal needs dense retrieval"
    assert all(item.scores.dense is None for item in lexical.items)
    with pytest.raises(evicortex.BadInputError) as err:
        memory.compile("alice", QUESTION, budget=200, reader_tokenizer="o200k_base", rrf_kk=5.0)
    assert err.value.field == "rrf_kk"
    with pytest.raises(evicortex.BadInputError) as err:
        memory.compile("alice", QUESTION, budget=200, reader_tokenizer="o200k_base", lexical={"top_k": 3})
    assert err.value.field == "lexical.top_k"


def test_a_lexical_only_memory_compiles_as_the_cli_does_with_dense_off(
    memory: Memory, tmp_path: Path, alice_turns: List[Dict[str, Any]]
) -> None:
    lexical = Memory(tmp_path, dense=False)
    lexical.append(alice_turns)
    context = lexical.compile("alice", QUESTION, budget=300, reader_tokenizer="o200k_base")
    assert not context.abstain and any("Lisbon" in item.text for item in context.items)
    assert context.config["abstention"]["signal"] == "lexical_coverage"
    assert context.config == lexical.config() == memory.config(dense={"mode": "off"})
    cli = subprocess.run(
        [
            evicortex_bin(), "--store", str(tmp_path), "compile", "--namespace", "alice",
            "--query", QUESTION, "--budget", "300", "--reader-tokenizer", "o200k_base",
            "--dense", "off", "--json",
        ],
        check=True, capture_output=True, text=True,
    )
    expected = json.loads(cli.stdout)
    assert context.config == expected["config"]
    assert context.text == expected["text"] and context.tokens_used == expected["tokens_used"]
    assert [item.record for item in context.items] == [item["record"] for item in expected["items"]]


def test_as_of_excludes_later_turns(memory: Memory) -> None:
    before = datetime.datetime(2024, 3, 1, tzinfo=datetime.timezone.utc)
    context = memory.compile("alice", QUESTION, budget=300, reader_tokenizer="o200k_base", as_of=before)
    assert context.abstain and context.items == [] and context.text == ""
    with pytest.raises(evicortex.BadInputError) as err:
        memory.compile("alice", QUESTION, budget=300, reader_tokenizer="o200k_base", as_of=before.replace(tzinfo=None))
    assert err.value.field == "as_of"


def test_bad_turns_name_the_field_and_record_and_store_nothing(tmp_path: Path) -> None:
    memory = Memory(tmp_path, dense=False)
    good = {"namespace": "bob", "session": "s", "turn": 0, "role": "user", "text": "hi", "time": "2024-01-01T00:00:00Z"}
    bad = dict(good, turn=1, time="yesterday")
    with pytest.raises(evicortex.BadInputError) as err:
        memory.append([good, bad])
    assert err.value.field == "turns[1].time", err.value
    assert memory.stats("bob").turns == 0, "the batch is atomic"
    memory.append([good])
    with pytest.raises(evicortex.ConflictError) as conflict:
        memory.append([dict(good, text="changed")])
    assert conflict.value.field == "turns[0].text"
    with pytest.raises(evicortex.BadInputError) as err:
        memory.compile("bob", "hi", budget=100, reader_tokenizer="no-such-tokenizer")
    assert err.value.field == "reader_tokenizer"


def test_erase_verify_stats_export(tmp_path: Path, alice_turns: List[Dict[str, Any]]) -> None:
    sample_turns = alice_turns
    memory = Memory(tmp_path, dense=False)
    memory.append(sample_turns)
    stats = memory.stats("alice")
    assert stats.turns == len(sample_turns) and stats.sessions >= 1
    exported = memory.export("alice")
    assert [t.text for t in exported] == [t["text"] for t in sample_turns]
    session = sample_turns[0]["session"]
    receipt = memory.erase("alice", session=session)
    in_session = sum(1 for t in sample_turns if t["session"] == session)
    assert len(receipt.erased) == in_session and receipt.redaction is not None
    assert memory.stats("alice").turns == len(sample_turns) - in_session
    assert all(t.session != session for t in memory.export())
    report = memory.verify()
    assert report.erased_turns == in_session and report.redactions == 1 and len(report.chain_head) == 64
    with pytest.raises(evicortex.NotFoundError):
        memory.erase("alice", record=10_000)
    with pytest.raises(evicortex.BadInputError) as err:
        memory.erase("alice", session=session, all=True)
    assert err.value.field == "target"


def test_missing_encoder_weights_raise_model_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "models"
    empty.mkdir()
    monkeypatch.setenv("EVICORTEX_MODELS_DIR", str(empty))
    with pytest.raises(evicortex.ModelMissingError) as err:
        Memory(tmp_path / "store")
    assert "evicortex model fetch" in str(err.value)
    assert isinstance(err.value, evicortex.EvicortexError)
    Memory(tmp_path / "store", dense=False)  # lexical only, by choice


def test_compile_releases_the_gil(memory: Memory) -> None:
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    started = time.monotonic()
    for _ in range(3):
        memory.compile("alice", QUESTION, budget=300, reader_tokenizer="o200k_base", lexical={"top_n": 40})
        memory.verify()
    elapsed = time.monotonic() - started
    stop.set()
    counter.join()
    # A thread that holds the GIL through the calls would leave the counter almost no turns.
    assert ticks >= max(3, int(elapsed * 1000 * 0.1)), (ticks, elapsed)
