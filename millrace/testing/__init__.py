"""Test fixtures (may import anything; nothing in millrace imports this package)."""
