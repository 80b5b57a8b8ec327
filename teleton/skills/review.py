"""The owner's look at a skill before it is enabled: every word the model could be given, whole, as plain text.

A skill's body, its description and every file beside it are shown in full (never Markdown: a link shows its
address), links written out with their hosts, invisible characters named, ``allowed-tools`` spelled out, and
the code that binds an approval to exactly these files (``store.approval_code``). An update is shown as the
difference from what was approved. The text is quoted with the skill's origin: it sits in the owner's chat,
where later turns read it as the skill's words, not the owner's.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from teleton.privacy.payload import links, reveal
from teleton.privacy.quoting import outside, outside_origin, quote_lines
from teleton.skills.folder import SKILL_FILE, Skill
from teleton.skills.store import approval_code

TEXT_SHOWN = 200_000  # bytes of one file shown as text; a larger or binary file is named with its hash


def review(skill: Skill, *, why: str, command: str = "/skills approve") -> str:
    """Everything in ``skill`` and how to approve exactly it."""
    body = [f"{SKILL_FILE} (front matter as read):", f"name: {skill.name}", f"description: {skill.description}"]
    if skill.license:
        body.append(f"license: {skill.license}")
    if skill.compatibility:
        body.append(f"compatibility: {skill.compatibility}")
    body += [f"metadata: {key}: {value}" for key, value in sorted(skill.metadata.items())]
    body += ["", skill.body]
    texts = ["\n".join(body)]
    for rel in sorted(skill.files):
        if rel != SKILL_FILE:
            texts.append(f"--- {rel} (sha256 {skill.files[rel][:12]}…)\n{file_text(skill.folder / rel)}")
    return _framed(skill, why, "\n\n".join(texts), command)


def review_update(old: Skill, new: Skill, *, command: str = "/skills approve") -> str:
    """What an update changes, file by file, and how to approve exactly the new files."""
    diff: list[str] = []
    for rel in sorted(set(old.files) | set(new.files)):
        if old.files.get(rel) == new.files.get(rel):
            continue
        before = file_text(old.folder / rel).splitlines() if rel in old.files else []
        after = file_text(new.folder / rel).splitlines() if rel in new.files else []
        diff += difflib.unified_diff(before, after, f"a/{rel}", f"b/{rel}", lineterm="")
    text = "\n".join(diff) or "(no file changed)"
    return _framed(new, "an update, shown as what it changes", text, command)


def file_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data[:TEXT_SHOWN].decode("utf-8") + ("\n[… cut]" if len(data) > TEXT_SHOWN else "")
    except UnicodeDecodeError:
        return f"[{len(data):,} bytes, not text]"


def _framed(skill: Skill, why: str, text: str, command: str) -> str:
    shown = reveal(text)
    origin = outside_origin(outside("skill", skill.name))
    tools = " ".join(skill.allowed_tools) if skill.allowed_tools is not None else "(none named: nothing is narrowed)"
    lines = [
        f"Skill {skill.name} ({skill.rel}): {why}",
        f"Files: {len(skill.files)}; allowed-tools: {tools}",
        "Exactly what the model could be given, in the skill's own words:",
        quote_lines(shown.text, origin),
    ]
    found = links(text)
    if found:
        lines += ["", f"Links in it, written out in full ({len(found)}):"]
        lines += [f"- {link.url} — host {link.host or '(none)'}" for link in found]
    if shown.found:
        counts = ", ".join(f"{name} ×{n}" for name, n in shown.found.items())
        lines += ["", f"Warning: characters you could not see are shown as ⟦…⟧: {counts}."]
    code = approval_code(skill.name, skill.digest)
    lines += ["", f"{command} {skill.name} {code} enables exactly this (in a shell: teleton skills approve "
              f"{skill.name} --code {code})."]  # fmt: skip
    return "\n".join(lines)
