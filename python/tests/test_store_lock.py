"""One writing process per store: a `Memory` holds the store's writer lock for as long as it
lives, so a `Memory` on a store that `evicortex serve` or another process holds is refused at
once, naming the holder, and opens once the holder is gone."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

import evicortex
from evicortex import Memory

from conftest import serving

# Opens the store in argv[1]; exit code 3 with the refusal on stdout when it is in use.
OPEN_IN_A_CHILD = """
import sys
import evicortex
try:
    evicortex.Memory(sys.argv[1], dense=False)
except evicortex.StorageError as e:
    print(e)
    sys.exit(3)
"""


def open_in_a_child(store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", OPEN_IN_A_CHILD, str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_memory_on_a_store_serve_holds_is_refused_naming_the_server(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with serving(store, "--lexical-only"):
        with pytest.raises(evicortex.StorageError) as err:
            Memory(store, dense=False)
        message = str(err.value)
        assert "is in use by another evicortex process" in message, message
        assert "pid " in message and "serve" in message, message
    Memory(store, dense=False)  # the server is stopped: its store is free


def test_a_second_python_process_is_refused_while_a_memory_holds_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    memory = Memory(store, dense=False)
    refused = open_in_a_child(store)
    assert refused.returncode == 3, refused.stderr
    assert "is in use by another evicortex process" in refused.stdout, refused.stdout
    assert f"pid {os.getpid()}" in refused.stdout, refused.stdout
    del memory
    gc.collect()
    opened = open_in_a_child(store)
    assert opened.returncode == 0, opened.stdout + opened.stderr
