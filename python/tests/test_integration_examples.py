"""The adapters' examples run as a user runs them (a fresh store with the pinned encoder), with
their stand-in models: no network, no LLM."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_langchain_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _load("langchain_chat").main(["langchain_chat.py", str(tmp_path)])
    out = capsys.readouterr().out
    assert "[friday] assistant: Your dog is called Biscuit" in out
    assert "monday" in out and "'My dog is called Biscuit and she is a beagle.'" in out


def test_llama_index_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _load("llama_index_memory").main(["llama_index_memory.py", str(tmp_path)])
    out = capsys.readouterr().out
    assert "older messages are in EviCortex" in out and "<evicortex>" in out
    assert "I moved to Lisbon for work in June." in out


def test_openai_agents_example(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    _load("openai_agents_tools").main(["openai_agents_tools.py", str(tmp_path)])
    out = capsys.readouterr().out
    assert "'appended': 1" in out and "My dog is called Biscuit and she is a beagle." in out
