"""The schema snapshot of every event type and version (``tests/data/event_schemas.json``).

``python -m tests.event_schemas`` adds the schema of each event class's current version when it
is not there yet; it never rewrites a version already recorded (stored events were written
under it). ``tests/test_event_contracts.py`` holds the classes to the snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from domain.events import EVENT_CLASSES, Event

SNAPSHOT = Path(__file__).parent / "data" / "event_schemas.json"


def version_key(event_type: str, version: int) -> str:
    return f"{event_type}@v{version}"


def schema_of(cls: type[Event]) -> dict[str, Any]:
    """What the log's JSON holds: the payload's keys (aliases) and types, as stored."""
    return cls.model_json_schema(by_alias=True, mode="serialization")


def current() -> dict[str, dict[str, Any]]:
    return {
        version_key(name, cls.schema_version): schema_of(cls)
        for name, cls in sorted(EVENT_CLASSES.items())
    }


def recorded() -> dict[str, dict[str, Any]]:
    return json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}


def main() -> None:
    snapshot = recorded()
    added = [key for key in current() if key not in snapshot]
    snapshot.update({key: schema for key, schema in current().items() if key in added})
    SNAPSHOT.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    print("added:", ", ".join(added) or "nothing")


if __name__ == "__main__":
    main()
