"""The dashboard's pages: one module each, with its routes."""
