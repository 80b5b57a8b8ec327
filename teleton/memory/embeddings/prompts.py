"""What an embedding model is shown before a text it stores and before a question: its prompts.

Many models were trained with them and find less without (e5 ``query: `` / ``passage: ``, EmbeddingGemma's task
lines, bge's query instruction, nomic's task prefixes). ``embedding.query_prompt`` / ``document_prompt`` set
them; unset (None) means the known model's own (``KNOWN_PROMPTS``, matched on the model's name), else none; an
explicit ``""`` means none. This module holds that rule for every provider that applies prompts (the local
ONNX models and OpenAI-compatible servers).

Vectors made with other prompts are other vectors: ``vector_identity`` folds the prompts into the id the
database and the embedding cache know the model by, so a changed prompt re-embeds as a changed model does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any


@dataclass(frozen=True)
class KnownModel:
    label: str  # how `teleton doctor` names where the prompts come from
    patterns: tuple[str, ...]  # fnmatch patterns over the model's bare name (see ``bare_name``)
    query: str
    document: str


# The prompts each model family's card prescribes for retrieval. Matched on the name without its owner
# (intfloat/, BAAI/, Xenova/ and onnx-community/ mirrors are the same model) and without an Ollama tag.
KNOWN_PROMPTS = (
    KnownModel("e5", ("multilingual-e5-*", "e5-*"), "query: ", "passage: "),
    KnownModel("EmbeddingGemma", ("embeddinggemma*",), "task: search result | query: ", "title: none | text: "),
    KnownModel("bge v1.5", ("bge-*-en-v1.5*",), "Represent this sentence for searching relevant passages: ", ""),
    KnownModel("nomic-embed-text", ("nomic-embed-text*",), "search_query: ", "search_document: "),
)
# e5's instruct variants want a task instruction of the user's own ("Instruct: ...\nQuery: "): no default.
NO_DEFAULT = ("*e5-*instruct*",)


@dataclass(frozen=True)
class Prompts:
    query: str = ""
    document: str = ""
    # Where each comes from, for `teleton doctor`: "configured", "known model e5", or "no known model".
    query_from: str = "no known model"
    document_from: str = "no known model"


def bare_name(name: str) -> str:
    """``intfloat/multilingual-e5-small`` -> ``multilingual-e5-small``; ``nomic-embed-text:latest`` ->
    ``nomic-embed-text``; lower case."""
    return name.strip().rstrip("/").rsplit("/", 1)[-1].split(":", 1)[0].lower()


def known_model(names: Sequence[str | None]) -> KnownModel | None:
    """The first known model one of ``names`` (model id, directory name) names, or None."""
    for name in (bare_name(n) for n in names if n):
        if any(fnmatchcase(name, p) for p in NO_DEFAULT):
            continue
        for known in KNOWN_PROMPTS:
            if any(fnmatchcase(name, p) for p in known.patterns):
                return known
    return None


def known_prompts(name: str) -> tuple[str, str]:
    """(query, document) prompts of the known model ``name``; ("", "") when it is none."""
    known = known_model([name])
    return (known.query, known.document) if known else ("", "")


def resolve_prompts(embedding: Any, names: Sequence[str | None]) -> Prompts:
    """The prompts ``embedding.query_prompt`` / ``document_prompt`` make for the model ``names`` name: each
    set one as written ("" = none), each unset one the known model's, else none."""
    known = known_model(names)
    default_from = f"known model {known.label}" if known else "no known model"
    query, query_from = embedding.query_prompt, "configured"
    if query is None:
        query, query_from = (known.query if known else ""), default_from
    document, document_from = embedding.document_prompt, "configured"
    if document is None:
        document, document_from = (known.document if known else ""), default_from
    return Prompts(query, document, query_from, document_from)


def vector_identity(model_id: str, prompts: Prompts, baseline: tuple[str, str] = ("", "")) -> str:
    """The id the vectors are stored and cached under: ``model_id`` when the prompts are ``baseline`` (query,
    document), those its vectors were always made with (the packaged e5's own, else none), so no database is
    re-embedded on upgrade; else ``model_id`` with a digest of the prompts."""
    if (prompts.query, prompts.document) == baseline:
        return model_id
    digest = hashlib.sha256(f"{prompts.query}\x00{prompts.document}".encode()).hexdigest()[:12]
    return f"{model_id}+prompts:{digest}"


def with_prompt(prompt: str, texts: Sequence[str]) -> list[str]:
    return [prompt + t for t in texts] if prompt else list(texts)


def describe(prompts: Prompts) -> str:
    """``query "query: ", document "passage: " (known model e5)``, for `teleton doctor`."""
    if not prompts.query and not prompts.document and prompts.query_from == prompts.document_from:
        return f"none ({prompts.query_from})"
    query, document = f'query "{prompts.query}"', f'document "{prompts.document}"'
    if prompts.query_from == prompts.document_from:
        return f"{query}, {document} ({prompts.query_from})"
    return f"{query} ({prompts.query_from}), {document} ({prompts.document_from})"
