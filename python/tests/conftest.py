"""Fixtures: the sample conversation, a fresh store, and a real `evicortex serve` on loopback.

The server binary is `$EVICORTEX_BIN`, else `evicortex` on PATH (scripts/test sets it to the
binary it built); the tests fail, never skip, when there is none.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample-conversation.jsonl"


def evicortex_bin() -> str:
    found = os.environ.get("EVICORTEX_BIN") or shutil.which("evicortex")
    if not found:
        pytest.fail("no evicortex binary: set EVICORTEX_BIN or put evicortex on PATH")
    return found


@pytest.fixture(scope="session")
def sample_turns() -> List[Dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def alice_turns(sample_turns: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [t for t in sample_turns if t["namespace"] == "alice"]


@dataclass
class Server:
    url: str
    key: str
    admin_key: str
    store: Path


def _create_key(store: Path, *scope: str) -> str:
    out = subprocess.run(
        [evicortex_bin(), "--store", str(store), "keys", "create", *scope],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


@contextlib.contextmanager
def serving(store: Path, *serve_args: str) -> Iterator[Server]:
    """`evicortex serve` on a free loopback port over `store`, with an `alice` key and an admin
    key, stopped (and the store released) when the block ends."""
    key = _create_key(store, "--namespace", "alice")
    admin_key = _create_key(store, "--admin")
    process = subprocess.Popen(
        [evicortex_bin(), "--store", str(store), "serve", "--listen", "127.0.0.1:0", *serve_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            process.kill()
            _, err = process.communicate(timeout=30)
            pytest.fail(f"evicortex serve did not start: {line!r} {err}")
        yield Server(line.split()[-1], key, admin_key, store)
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("served-store")) as served:
        yield served


@pytest.fixture(scope="session")
def lexical_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A BM25-only `evicortex serve` (no encoder to load) for the adapters' tests."""
    with serving(tmp_path_factory.mktemp("lexical-store"), "--lexical-only") as served:
        yield served


TEST_READER = "smollm2-135m-instruct-q4_1"


@pytest.fixture(scope="session")
def reader_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A BM25-only `evicortex serve` answering with the smallest pinned reader (scripts/test
    fetches it: `evicortex model fetch smollm2-135m-instruct-q4_1`)."""
    with serving(tmp_path_factory.mktemp("reader-store"), "--lexical-only", "--reader", TEST_READER) as served:
        yield served


@pytest.fixture(params=["memory", "client"])
def store(request: pytest.FixtureRequest, tmp_path: Path, lexical_server: Server) -> Any:
    """A fresh lexical-only embedded `Memory`, or a `Client` (admin key) of the shared
    lexical-only server: the adapters take either. Tests use a namespace of their own."""
    from evicortex import Client, Memory

    if request.param == "memory":
        return Memory(tmp_path / "store", dense=False)
    return Client(lexical_server.url, lexical_server.admin_key)


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of this test's own (the shared server outlives it)."""
    import hashlib

    return "t-" + hashlib.blake2s(request.node.nodeid.encode(), digest_size=8).hexdigest()
