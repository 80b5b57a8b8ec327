"""Structured facts: stored with their subject and label, merged when they repeat, recalled by meaning."""
