"""`answer`: through a `Client`, the server's reader answers in any build of this package; the
embedded `Memory` answers only in a build with the local reader, and otherwise says how to get
one."""

from __future__ import annotations

from pathlib import Path

import pytest

import evicortex
from evicortex import Client, Memory

from conftest import Server

TURN = {"session": "s1", "turn": 0, "role": "user", "text": "My dog is called Biscuit.", "time": "2024-05-02T10:00:00+01:00"}


def test_client_answers_with_the_servers_reader(reader_server: Server) -> None:
    client = Client(reader_server.url, reader_server.key)
    client.append([TURN], namespace="alice")
    answer = client.answer("alice", "What is my dog called?", budget=300, max_new_tokens=8, rrf_k=10.0)
    assert isinstance(answer, evicortex.Answer)
    assert not answer.compiler_abstained and answer.reply is not None
    assert "Biscuit" in answer.context_text and answer.tokens_used <= answer.budget == 300
    assert answer.reply.reader["backend"] == "local_gguf"
    assert answer.reply.generated_tokens <= 8 and answer.reply.prompt_tokens > 0
    assert answer.text == answer.reply.text
    with pytest.raises(evicortex.BadInputError) as err:
        client.answer("alice", "q", budget=100, max_new_tokens=0)
    assert err.value.field == "max_new_tokens"


def test_client_answer_without_a_server_reader_is_unavailable(lexical_server: Server) -> None:
    with pytest.raises(evicortex.UnavailableError):
        Client(lexical_server.url, lexical_server.key).answer("alice", "q", budget=100)


def test_embedded_answer_needs_the_local_reader_build(tmp_path: Path) -> None:
    memory = Memory(tmp_path, dense=False)
    memory.append([TURN], namespace="alice")
    if Memory.has_local_reader():
        answer = memory.answer("alice", "What is my dog called?", budget=300, reader="smollm2-135m-instruct-q4_1", max_new_tokens=8)
        assert "Biscuit" in answer.context_text and answer.reply is not None
        return
    with pytest.raises(evicortex.ModelMissingError) as err:
        memory.answer("alice", "What is my dog called?", budget=300)
    assert err.value.field == "reader"
    assert "--features local-reader" in err.value.message
