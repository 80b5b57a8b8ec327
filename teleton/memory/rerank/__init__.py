"""A second look at a memory search's best candidates: a cross-encoder reads the question and each text
together and scores how well the text answers it (``cross_encoder.py``; off by default, docs/memory.md)."""
