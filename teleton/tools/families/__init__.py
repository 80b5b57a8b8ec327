"""The tool families: each validates its arguments, calls one operation below it, formats the result."""
