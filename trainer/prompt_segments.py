"""Kept for the trainer modules that import ``segments`` from here; it lives in
``domain/prompt_segments.py`` (the store's blame view splits prompts the same way)."""

from domain.prompt_segments import segments

__all__ = ["segments"]
