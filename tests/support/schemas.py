"""The JSON documents' schemas (docs/schemas): each document names its schema in ``schema``
("mqadmin/<name>/<version>"), and each schema file lists the names it describes."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
#: the journal's lines are no command's output (tests/test_journal.py validates them)
NOT_OUTPUT = ("journal.schema.json",)


@functools.cache
def validators() -> dict[str, Any]:
    """Schema name ("mqadmin/resetOffsetByTime/1") -> its validator, from every schema file."""
    from jsonschema import Draft202012Validator

    found: dict[str, Any] = {}
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        if path.name in NOT_OUTPUT:
            continue
        schema = json.loads(path.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
        names = _names(schema)
        assert names, f"{path.name} names no document in properties.schema"
        for name in names:
            assert name not in found, f"{name} is described twice"
            found[name] = Draft202012Validator(schema)
    return found


def _names(schema: dict[str, Any]) -> list[str]:
    """The names in ``properties.schema`` (enum or const), at the top or in each ``anyOf`` branch."""
    names: list[str] = []
    for part in [schema, *schema.get("anyOf", [])]:
        prop = part.get("properties", {}).get("schema", {})
        names += [n for n in prop.get("enum", [prop["const"]] if "const" in prop else []) if n not in names]
    return names


def problems(doc: object) -> list[str]:
    """Why ``doc`` (as parsed from the output) breaks its schema; empty when it follows it."""
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        return [f"no 'schema' naming the document's schema: {str(doc)[:200]}"]
    validator = validators().get(doc["schema"])
    if validator is None:
        return [f"no schema file in docs/schemas describes {doc['schema']}"]
    return [
        f"{doc['schema']}: /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
        for e in validator.iter_errors(doc)
    ]


def check(doc: object) -> None:
    found = problems(doc)
    assert not found, "the JSON output breaks its schema:\n  " + "\n  ".join(found)


def check_printed(text: str) -> None:
    """Validate the JSON a run printed: one document, or JSON lines (--watch); text that is no
    JSON (a table, an error) is left alone."""
    text = text.strip()
    if not text or text[0] != "{":
        return
    try:
        docs = [json.loads(text)]
    except ValueError:
        try:
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            return  # not JSON documents (e.g. replayed records' lines)
    for doc in docs:
        if isinstance(doc, dict) and "schema" in doc:
            check(doc)
