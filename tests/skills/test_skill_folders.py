"""A skill folder is read whole or left out with one line naming its file (docs/skills.md, "The format")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from teleton.skills.folder import FILE_CAP, SkillError, read_skill, scan

# A skill as another agent's collection writes one (the Agent Skills layout, every optional field used).
COLLECTION_SKILL = """---
name: pdf-forms
description: >-
  Fill in PDF forms and extract their fields. Use when the user sends a PDF form or asks about form fields.
license: Apache-2.0
compatibility: Needs python3 and the pypdf package
metadata:
  author: example-org
  version: "1.2"
allowed-tools: workspace_read memory_save
---

# Filling PDF forms

1. Read the fields with `scripts/fields.py` (see [the reference](references/REFERENCE.md)).
2. Ask for each missing value.
"""


def write(folder: Path, text: str, files: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)
    for rel, content in (files or {}).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return folder


def skill_text(name: str, description: str = "Does a thing.", body: str = "Steps.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


def test_a_skill_from_another_agents_collection_loads_unchanged(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "skills" / "pdf-forms", COLLECTION_SKILL,
        {"scripts/fields.py": "print('fields')\n", "references/REFERENCE.md": "# Reference\n"},
    )  # fmt: skip
    skill = read_skill(folder)
    assert skill.name == "pdf-forms"
    assert skill.description.startswith("Fill in PDF forms and extract their fields.")
    assert (skill.license, skill.compatibility) == ("Apache-2.0", "Needs python3 and the pypdf package")
    assert skill.metadata == {"author": "example-org", "version": "1.2"}
    assert skill.allowed_tools == ("workspace_read", "memory_save")
    assert skill.body.startswith("# Filling PDF forms")
    assert sorted(skill.files) == ["SKILL.md", "references/REFERENCE.md", "scripts/fields.py"]
    assert skill.digest == read_skill(folder).digest  # the same files, the same pin


def test_each_bad_skill_gives_one_line_naming_its_file_and_is_left_out(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write(root / "good", skill_text("good"))
    write(root / "no-front", "# Just Markdown\n")
    write(root / "bad-yaml", "---\nname: bad-yaml\ndescription: [unclosed\n---\nbody\n")
    write(root / "no-name", "---\ndescription: nameless\n---\nbody\n")
    write(root / "wrong-folder", skill_text("another-name"))
    write(root / "Upper", skill_text("Upper"))
    write(root / "no-description", "---\nname: no-description\n---\nbody\n")
    write(root / "too-big", skill_text("too-big"), {"blob.txt": "x" * (FILE_CAP + 1)})
    secret = tmp_path / "outside.txt"
    secret.write_text("the owner's .env")
    linked = write(root / "linked", skill_text("linked"))
    os.symlink(secret, linked / "env.txt")
    os.symlink(root / "good", root / "alias")  # a skill folder that is a link
    (root / ".archive").mkdir()  # dot-folders hold no skill
    write(tmp_path / "public" / "skills" / "good", skill_text("good", "the public twin"))

    skills, errors = scan(tmp_path)

    assert [s.name for s in skills] == ["good"] and skills[0].root == "skills"
    assert len(errors) == 10 and all("\n" not in line for line in errors)
    said = "\n".join(errors)
    for expected in (
        "skills/no-front/SKILL.md: SKILL.md must begin with '---' front matter",
        "skills/bad-yaml/SKILL.md: front matter is not valid YAML",
        "skills/no-name/SKILL.md: front matter has no name",
        "skills/wrong-folder/SKILL.md: name 'another-name' is not the folder's name 'wrong-folder'",
        "skills/Upper/SKILL.md: name 'Upper' must be 1-64 lowercase letters",
        "skills/no-description/SKILL.md: front matter has no description",
        f"skills/too-big/blob.txt: {FILE_CAP + 1:,} bytes, over the",
        "skills/linked/env.txt: a link out of the skill's folder",
        "skills/alias: a link, not a folder",
        "public/skills/good/SKILL.md: name 'good' is taken by skills/good",
    ):
        assert expected in said, (expected, said)


def test_a_skill_is_not_text_or_its_front_matter_no_mapping(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "binary"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(b"---\nname: binary\n---\n\xff\xfe")
    with pytest.raises(SkillError, match="not UTF-8 text"):
        read_skill(folder)
    write(folder, "---\n- a list\n---\n")
    with pytest.raises(SkillError, match="must be a mapping"):
        read_skill(folder)
