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
