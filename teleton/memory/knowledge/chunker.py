"""Split Markdown into chunks for the knowledge index (a pure function).

A heading starts a chunk and its path rides along as context; code fences and list groups stay whole where
they fit; chunks tile the document, so joining their bodies gives the text back exactly. The rules in order:
docs/memory.md, "Chunks".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TARGET_CHARS = 500
MAX_CHARS = 1000

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t#]*$")
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


@dataclass(frozen=True)
class Chunk:
    body: str  # the exact slice of the source
    heading: str  # heading path, " > "-joined
    start_line: int  # 0-based line of the source where the body starts
    prefix: str = ""  # synthetic opening fence of a continued code block
    suffix: str = ""  # synthetic closing fence of a cut code block

    @property
    def text(self) -> str:
        return self.prefix + self.body + self.suffix


@dataclass
class _Block:
    kind: str  # heading | code | list | para | blank
    lines: list[str]
    start_line: int
    heading_path: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(self.lines)


def chunk_markdown(text: str, target_chars: int = TARGET_CHARS, max_chars: int = MAX_CHARS) -> list[Chunk]:
    if max_chars < 40:
        raise ValueError("max_chars must leave room for a fenced line")
    chunks: list[Chunk] = []
    for section in _sections(_blocks(text)):
        chunks += _pack(section, target_chars, max_chars)
    return chunks


# -- parsing ---------------------------------------------------------------------------------------------
def _blocks(text: str) -> list[_Block]:
    lines = text.splitlines(keepends=True)
    blocks: list[_Block] = []
    path: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        heading_path = tuple(title for _, title in path)
        fence = _FENCE.match(line.rstrip("\r\n"))
        if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            end = _fence_end(lines, i, fence.group(1))
            blocks.append(_Block("code", lines[i:end], i, heading_path))
            i = end
            continue
        heading = _HEADING.match(line.rstrip("\r\n"))
        if heading:
            level, title = len(heading.group(1)), (heading.group(2) or "").strip()
            path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
            blocks.append(_Block("heading", [line], i, tuple(t for _, t in path)))
            i += 1
            continue
        kind = "blank" if not line.strip() else "list" if _LIST_ITEM.match(line) else "para"
        end = _block_end(lines, i, kind)
        blocks.append(_Block(kind, lines[i:end], i, heading_path))
        i = end
    return blocks


def _fence_end(lines: list[str], start: int, marker: str) -> int:
    for j in range(start + 1, len(lines)):
        close = _FENCE.match(lines[j].rstrip("\r\n"))
        if (
            close
            and close.group(1)[0] == marker[0]
            and len(close.group(1)) >= len(marker)
            and not close.group(2).strip()
        ):
            return j + 1
    return len(lines)  # unclosed: the block runs to the end of the document


def _starts_block(line: str) -> bool:
    bare = line.rstrip("\r\n")
    return bool(_FENCE.match(bare) or _HEADING.match(bare))


def _block_end(lines: list[str], start: int, kind: str) -> int:
    j = start + 1
    while j < len(lines):
        line = lines[j]
        if kind == "blank":
            if line.strip():
                break
        elif not line.strip():
            # A list continues over blank lines when an item or an indented continuation follows.
            if kind == "list" and _list_continues(lines, j):
                j += 1
                continue
            break
        elif _starts_block(line) or (kind == "para" and _LIST_ITEM.match(line)):
            break
        j += 1
    return j


def _list_continues(lines: list[str], j: int) -> bool:
    k = j
    while k < len(lines) and not lines[k].strip():
        k += 1
    return k < len(lines) and (bool(_LIST_ITEM.match(lines[k])) or lines[k][:1] in (" ", "\t"))


def _sections(blocks: list[_Block]) -> list[list[_Block]]:
    sections: list[list[_Block]] = [[]]
    for block in blocks:
        if block.kind == "heading" and sections[-1]:
            sections.append([])
        sections[-1].append(block)
    return [s for s in sections if s]


# -- packing ---------------------------------------------------------------------------------------------
def _pack(section: list[_Block], target: int, limit: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    body, start, heading = "", 0, " > ".join(section[0].heading_path)

    def flush() -> None:
        nonlocal body
        if body:
            chunks.append(Chunk(body, heading, start))
        body = ""

    for block in section:
        text = block.text
        if body and (len(body) >= target or len(body) + len(text) > limit) and block.kind != "blank":
            flush()
        unclosed = block.kind == "code" and not _is_closed_code(block)
        if len(body) + len(text) <= limit and not unclosed:
            if not body:
                start = block.start_line
            body += text
            continue
        flush()
        for piece in _split_block(block, limit):
            chunks.append(Chunk(piece.body, heading, piece.start_line, piece.prefix, piece.suffix))
    flush()
    return chunks


def _split_block(block: _Block, limit: int) -> list[Chunk]:
    if block.kind == "code":
        return _split_code(block, limit)
    if block.kind == "list":
        return _split_list(block, limit)
    return _split_lines(block.lines, block.start_line, limit)


def _split_list(block: _Block, limit: int) -> list[Chunk]:
    items: list[list[str]] = []
    for line in block.lines:
        if (_LIST_ITEM.match(line) and line[:1] not in (" ", "\t")) or not items:
            items.append([])
        items[-1].append(line)
    pieces: list[Chunk] = []
    current: list[str] = []
    line_no = block.start_line
    start = line_no
    for item in items:
        size = len("".join(item))
        if current and len("".join(current)) + size > limit:
            pieces.append(Chunk("".join(current), "", start))
            current, start = [], line_no
        if size > limit:
            pieces += _split_lines(item, line_no, limit)
            start = line_no + len(item)
        else:
            current += item
        line_no += len(item)
    if current:
        pieces.append(Chunk("".join(current), "", start))
    return pieces


def _split_lines(lines: list[str], start_line: int, limit: int) -> list[Chunk]:
    """Pack whole lines up to ``limit``; a line longer than that is cut at a sentence or word boundary."""
    pieces: list[Chunk] = []
    current, start = "", start_line
    for offset, line in enumerate(lines):
        if current and len(current) + len(line) > limit:
            pieces.append(Chunk(current, "", start))
            current, start = "", start_line + offset
        if len(line) <= limit:
            current += line
            continue
        for part in split_long(line, limit):
            pieces.append(Chunk(part, "", start_line + offset))
        start = start_line + offset + 1
    if current:
        pieces.append(Chunk(current, "", start))
    return pieces


_BREAKS = (re.compile(r"[.!?…。！？]\s+"), re.compile(r"\s+"))


def split_long(text: str, limit: int) -> list[str]:
    """Cut ``text`` into consecutive parts of at most ``limit`` chars, preferring sentence then word ends."""
    parts: list[str] = []
    while len(text) > limit:
        cut = 0
        for pattern in _BREAKS:
            ends = [m.end() for m in pattern.finditer(text, 0, limit) if limit // 2 <= m.end() <= limit]
            if ends:
                cut = ends[-1]
                break
        cut = cut or limit
        parts.append(text[:cut])
        text = text[cut:]
    if text:
        parts.append(text)
    return parts


def _split_code(block: _Block, limit: int) -> list[Chunk]:
    """Cut an oversized fenced block at line boundaries; every piece is fenced on its own."""
    opening = block.lines[0]
    marker = _FENCE.match(opening.rstrip("\r\n")).group(1)  # type: ignore[union-attr]
    reopen = opening if opening.endswith("\n") else opening + "\n"
    if len(reopen) > limit // 4:  # a huge info string: repeat the bare fence instead
        reopen = marker + "\n"
    closed = _is_closed_code(block)
    # Room for the synthetic fences of a middle piece (a marker longer than the budget is pathological).
    budget = max(16, limit - len(reopen) - len(marker) - 2)
    units: list[tuple[str, int]] = []  # (text, line) pieces no longer than budget
    for offset, line in enumerate(block.lines):
        units += [(part, block.start_line + offset) for part in split_long(line, budget)]
    pieces: list[tuple[str, int]] = []
    current, start = "", block.start_line
    for text, line_no in units:
        if current and len(current) + len(text) > budget:
            pieces.append((current, start))
            current, start = "", line_no
        current += text
    if current:
        pieces.append((current, start))
    chunks = []
    for n, (body, start) in enumerate(pieces):
        prefix = "" if n == 0 else reopen
        last = n == len(pieces) - 1
        suffix = "" if last and closed else (marker + "\n" if body.endswith("\n") else "\n" + marker)
        chunks.append(Chunk(body, "", start, prefix, suffix))
    return chunks


def _is_closed_code(block: _Block) -> bool:
    marker = _FENCE.match(block.lines[0].rstrip("\r\n")).group(1)  # type: ignore[union-attr]
    return len(block.lines) > 1 and _is_close(block.lines[-1], marker)


def _is_close(line: str, marker: str) -> bool:
    close = _FENCE.match(line.rstrip("\r\n"))
    return bool(
        close and close.group(1)[0] == marker[0] and len(close.group(1)) >= len(marker) and not close.group(2).strip()
    )
