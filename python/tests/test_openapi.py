"""The OpenAPI document of a real `evicortex serve`: valid OpenAPI 3.1 by a real validator
(openapi-spec-validator), and true: real responses of every kind validate against the schemas it
declares for them (openapi-schema-validator, its OpenAPI 3.1 schema dialect) (so a documented field cannot disappear or change type unnoticed)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Dict

from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from evicortex import Client

from conftest import Server


def _document(server: Server) -> Dict[str, Any]:
    with urllib.request.urlopen(server.url + "/openapi.json", timeout=30) as response:
        value: Dict[str, Any] = json.loads(response.read())
    return value


def _check(document: Dict[str, Any], method: str, path: str, body: Dict[str, Any]) -> None:
    schema = document["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    rooted = {**schema, "components": document["components"]}
    OAS31Validator(rooted).validate(body)


def test_the_document_is_valid_openapi(lexical_server: Server) -> None:
    document = _document(lexical_server)
    assert document["openapi"].startswith("3.1")
    validate(document)


def test_real_responses_match_the_documented_schemas(reader_server: Server) -> None:
    document = _document(reader_server)
    client = Client(reader_server.url, reader_server.key)
    turn = {"session": "openapi", "turn": 0, "role": "user", "speaker": "Alice", "text": "I moved to Lisbon in May.",
            "time": "2024-05-02T10:00:00+01:00"}
    appended = client.append([turn], namespace="alice")
    compiled = client.compile("alice", "Where did I move?", budget=200, reader_tokenizer="o200k_base")
    assert compiled.items, "the compile must cite a turn for its items to be checked"
    abstained = client.compile("alice", "zzz qqq", budget=200, reader_tokenizer="o200k_base")
    assert abstained.abstain
    answer = client.answer("alice", "Where did I move?", budget=300, max_new_tokens=4)
    assert answer.reply is not None
    ns = "/v1/namespaces/{ns}"
    _check(document, "post", ns + "/turns", {"appended": appended.appended, "already_present": appended.already_present,
                                             "turns": [vars(t) for t in appended.turns]})
    _check(document, "post", ns + "/compile", compiled.manifest)
    _check(document, "post", ns + "/compile", abstained.manifest)
    _check(document, "post", ns + "/answer", answer.raw)
    for path in ("/stats", "/export", "/sessions"):
        with urllib.request.urlopen(_get(reader_server, ns.replace("{ns}", "alice") + path), timeout=30) as r:
            _check(document, "get", ns + path, json.loads(r.read()))
    with urllib.request.urlopen(_get(reader_server, "/v1/verify", admin=True), timeout=30) as r:
        _check(document, "get", "/v1/verify", json.loads(r.read()))


def _get(server: Server, path: str, admin: bool = False) -> urllib.request.Request:
    request = urllib.request.Request(server.url + path)
    request.add_header("Authorization", f"Bearer {server.admin_key if admin else server.key}")
    return request
