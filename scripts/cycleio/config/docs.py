"""The configuration reference of docs/configuration.md, generated from the schema so the two never drift."""

from __future__ import annotations

import json


def _type(sub: dict) -> str:
    """A key's type in words: its ``type`` (a list joined with "or"), its ``enum``, or the types its ``oneOf`` /
    ``anyOf`` alternatives give (an array with the type of its items)."""
    kind = sub.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array" and isinstance(sub.get("items"), dict) and _type(sub["items"]):
        items = _type(sub["items"])
        return f"array, each {items}" if items.startswith("one of") else f"array of {items}"
    if kind:
        return kind
    if "enum" in sub:
        return "one of " + ", ".join(map(str, sub["enum"]))
    alternatives = sub.get("oneOf") or sub.get("anyOf") or []
    kinds = [_type(alt) for alt in alternatives if isinstance(alt, dict)]
    return " or ".join(dict.fromkeys(k for k in kinds if k))


def _rows(schema: dict, prefix: str = ""):
    for name, sub in schema.get("properties", {}).items():
        key = f"{prefix}{name}"
        if sub.get("type") == "object" and "properties" in sub:
            yield from _rows(sub, key + ".")
            continue
        kind = _type(sub)
        default = json.dumps(sub.get("default")) if "default" in sub else "(required)"
        if len(default) > 60:
            default = "see config/config.yaml"
        yield key, kind, default, " ".join(sub.get("description", "").split())
        extra = sub.get("additionalProperties")
        if isinstance(extra, dict) and "properties" in extra:
            yield from _rows(extra, key + ".<name>.")


def schema_markdown(schema: dict) -> str:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, kind, default, description in _rows(schema):
        lines.append(f"| `{key}` | {kind} | `{default}` | {description.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def update_readme(path, table: str) -> None:
    from ..fsutil import replace_between_markers

    replace_between_markers(path, START, END, table, "the configuration table")
