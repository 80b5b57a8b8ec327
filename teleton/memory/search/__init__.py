"""The one hybrid search: keywords (FTS5, stemmed outside English) and vectors, fused into ranked hits."""
