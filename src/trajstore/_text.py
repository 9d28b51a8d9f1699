"""Counted nouns for the one-line summaries that recording, import and export print."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    """``count(1, "leaf")`` -> ``"1 leaf"``; ``count(3, "leaf")`` -> ``"3 leaves"``; other nouns get an ``s``."""
    plural = "leaves" if noun == "leaf" else f"{noun}s"
    return f"{n} {noun if n == 1 else plural}"
