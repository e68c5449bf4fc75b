"""Errors raised by modules that the service's entry process imports, where torch is not imported."""
from __future__ import annotations


class CheckpointError(RuntimeError):
    """A checkpoint is missing, truncated, corrupted or not a tagger checkpoint."""
