"""The SSE parser (kept importable here; it lives in _sse.py)."""

from ._sse import SSEEvent, SSEParser

__all__ = ["SSEEvent", "SSEParser"]
