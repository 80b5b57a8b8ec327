"""The ``embedding``, ``storage`` and ``memory`` sections: the embedding model, where data lives, search and
the context window."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from teleton.config.schema_base import ProviderName, Section


class EmbeddingConfig(Section):
    provider: Literal["local", "anthropic", "openai_compatible", "none"] = "local"
    model: str | None = None  # local: None = the default packaged model (model_files.DEFAULT_MODEL_ID)
    model_path: Path | None = None
    preset: ProviderName | None = None  # openai_compatible: a named server (ollama, openai...) for URL and key
    base_url: str | None = None  # openai_compatible: the server's URL (overrides the preset's)
    api_key: str | None = Field(default=None, repr=False)  # openai_compatible: else the preset's key variable
    voyage_api_key: str | None = Field(default=None, repr=False)
    voyage_model: str = "voyage-3.5-lite"
    batch_size: int = Field(default=64, ge=1)
    cache_ttl_days: int = Field(default=60, ge=1)
    cache_max_entries: int = Field(default=50_000, ge=100)
    # Put before each question / each text stored (local and openai_compatible); None = the known model's own
    # (memory.embeddings.prompts: e5 "query: " / "passage: "), else none; "" = none. A change re-embeds.
    query_prompt: str | None = None
    document_prompt: str | None = None


class StorageConfig(Section):
    data_dir: Path = Path("~/.teleton")
    database: Path | None = None
    workspace: Path | None = None
    history_limit: int = Field(default=100, ge=1)

    @property
    def database_file(self) -> Path:
        """``database`` as loading resolved it (``data_dir``/teleton.db when unset)."""
        return resolved(self.database, "storage.database")

    @property
    def workspace_dir(self) -> Path:
        """``workspace`` as loading resolved it (``data_dir``/workspace when unset)."""
        return resolved(self.workspace, "storage.workspace")

    @property
    def chat_history_file(self) -> Path:
        """What was typed in `teleton chat` (prompt_toolkit's input history): kept private, scrubbed by forget."""
        return self.data_dir / "chat_history"


def resolved(path: Path | None, name: str) -> Path:
    """A path the loader fills in when the config leaves it unset."""
    if path is None:
        raise ValueError(f"{name} is resolved when the config is loaded")
    return path


class RerankerConfig(Section):
    """A second look at the best fused candidates of a memory search (issue 37; docs/memory.md, Reranking).

    ``cross_encoder``: an ONNX cross-encoder (query and text in, one relevance logit out) with a
    ``tokenizer.json``, from ``model_path`` or a Hugging Face id in ``model`` that ``teleton setup`` downloads;
    ``sha256`` pins its files (file name -> sum), and a download without pins records the sums it fetched.
    """

    kind: Literal["off", "cross_encoder"] = "off"
    model: str | None = None
    model_path: Path | None = None
    sha256: dict[str, str] = Field(default_factory=dict)
    candidates: int = Field(default=50, ge=1, le=500)


class MemoryConfig(Section):
    chunk_target: int = Field(default=500, ge=50)
    chunk_max: int = Field(default=1000, ge=100)
    vector_candidates: int = Field(default=30, ge=1)
    result_limit: int = Field(default=10, ge=1)
    min_score: float = Field(default=0.15, ge=0.0, le=1.0)
    # null: the embedding model's own (memory.embeddings.model_files.search_weights); the other is 1 - it
    vector_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    keyword_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    context_recent: int = Field(default=10, ge=0)
    context_knowledge: int = Field(default=5, ge=0)
    context_feed: int = Field(default=5, ge=0)
    masking_keep: int = Field(default=10, ge=0)
    # Old results are masked in steps: down to masking_keep once masking_keep + masking_step are held, so
    # between steps every request extends the last one's prefix and the prompt cache serves it.
    masking_step: int = Field(default=10, ge=1)
    soft_threshold: float = Field(default=0.5, gt=0.0, lt=1.0)
    hard_threshold: float = Field(default=0.75, gt=0.0, le=1.0)
    hard_max_messages: int = Field(default=200, ge=10)
    keep_last: int = Field(default=20, ge=1)
    daily_log_lines: int = Field(default=100, ge=0)
    prompt_budget_tokens: int = Field(default=3000, ge=0)
    prompt_stable_share: float = Field(default=0.5, ge=0.0, le=1.0)
    session_reset_hour: int | None = Field(default=4, ge=0, le=23)
    session_idle_minutes: int | None = Field(default=720, ge=1)
    salience_threshold: float = Field(default=0.85, ge=0.0, le=1.0)
    recency_half_life_days: float = Field(default=30.0, gt=0)
    distill: bool = True
    consolidation_interval_hours: float = Field(default=6.0, gt=0)
    watch_debounce_ms: int = Field(default=500, ge=0)
    max_file_bytes: int = Field(default=2_000_000, ge=1000)
    large_files: Literal["index", "skip"] = "index"
    reranker: RerankerConfig = Field(default_factory=RerankerConfig)
