"""Arguments both front ends check the same way before anything is sent or stored."""

from __future__ import annotations

import datetime
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from ._errors import BadInputError
from ._types import Turn, TurnLike

AsOf = Union[str, datetime.datetime, None]


def turn_objects(turns: Iterable[TurnLike]) -> List[Dict[str, Any]]:
    """The ingest-format objects of `turns` (a `Turn` or a mapping each)."""
    if isinstance(turns, (Turn, Mapping, str, bytes)):
        raise BadInputError("turns: give a list of turns, not a single one", "turns")
    out: List[Dict[str, Any]] = []
    for i, turn in enumerate(turns):
        if isinstance(turn, Turn):
            out.append(turn.to_dict())
        elif isinstance(turn, Mapping):
            obj = dict(turn)
            if isinstance(obj.get("time"), datetime.datetime):
                obj["time"] = as_of_text(obj["time"], f"turns[{i}].time")
            out.append(obj)
        else:
            message = f"turns[{i}]: expected a Turn or a dict, got {type(turn).__name__}"
            raise BadInputError(message, f"turns[{i}]")
    return out


def as_of_text(value: AsOf, field: str = "as_of") -> Optional[str]:
    """RFC 3339 text of an `as_of` given as text or as an aware `datetime`."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise BadInputError(f"{field}: a datetime needs a time zone (an explicit offset)", field)
        return value.isoformat()
    raise BadInputError(f"{field}: expected an RFC 3339 string or a datetime", field)


def settings_json(settings: Mapping[str, Any]) -> str:
    """The compile settings as a JSON object (values must be JSON: numbers, strings, bools,
    lists and dicts)."""
    try:
        return json.dumps(dict(settings), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise BadInputError(f"settings: not JSON: {e}", "settings") from None


def erase_body(session: Optional[str], record: Optional[int], all: bool) -> Dict[str, Any]:
    """Exactly one erasure target, as the HTTP body names it."""
    given = [name for name, v in (("session", session), ("record", record)) if v is not None]
    if all:
        given.append("all")
    if len(given) != 1:
        message = "target: give exactly one of session=, record= or all=True"
        raise BadInputError(message, "target")
    if session is not None:
        return {"session": session}
    if record is not None:
        return {"record": record}
    return {"all": True}
