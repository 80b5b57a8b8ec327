"""What the distiller asks of the utility model: its instructions and the one tool it answers through.

The tool's input is a JSON schema each fact is validated against on its own (``teleton.agent.distiller``).
"""

from __future__ import annotations

from typing import Any

FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "minLength": 3, "maxLength": 500},
        "category": {"type": "string", "minLength": 1, "maxLength": 40},
        "key": {"type": ["string", "null"], "maxLength": 80},
        "importance": {"type": "number", "minimum": 0, "maximum": 1},
        "correction": {"type": "boolean"},
        "about": {"type": ["string", "null"], "maxLength": 80},
        "replaces": {"type": ["integer", "null"]},
        "reason": {"type": ["string", "null"], "maxLength": 300},
        "from": {"type": ["array", "null"], "items": {"type": "integer"}, "maxItems": 20},
    },
    "required": ["content", "category", "importance"],
}
TOOL_NAME = "record_facts"
TOOL = {
    "name": TOOL_NAME,
    "description": "Record the durable facts worth remembering from this conversation (may be an empty list).",
    "input_schema": {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": FACT_SCHEMA}},
        "required": ["facts"],
    },
}
SYSTEM = """You maintain the long-term memory of a Telegram assistant. From the conversation below, extract facts
worth remembering in later conversations: names, relationships, preferences, plans with dates, decisions,
standing instructions. Skip small talk, anything only true for this moment, and what the assistant said
about itself. Each fact is one self-contained sentence naming who it is about.
- category: one lowercase word or two (person, preference, pet, plan, work, health, place, ...).
- key: a short stable identifier when the fact is an attribute that may change later (e.g. "cat_name"),
  otherwise null.
- importance: 0..1; 0.9+ only for what must never be forgotten (allergies, hard deadlines, explicit
  "remember this").
- correction: true when the user corrects something the assistant got wrong or believed.
- about: whom the fact is about: "speaker" (whoever said it), "owner", "group" (the group as a whole), or
  the name of another person or thing.
- replaces: when the conversation changes, corrects or cancels one of the remembered facts listed below
  (a move, a new job, a renamed pet, a changed plan or preference), the id of that fact; the new fact then
  replaces it and the old one is kept as history. Keep the same key for the same attribute. null otherwise.
- reason: for a replacement, a few words why (e.g. "moved last month").
- from: when the conversation's lines are numbered ("[3] User ..."), the numbers of the user's lines the
  fact was taken from; otherwise null.
Write when something happened or will happen as a date ("on 20 May 2023", "in June 2023"), not as
"yesterday" or "last week": the fact is read long after; the exchange's date is given.
Call record_facts exactly once; an empty list is a fine answer."""
