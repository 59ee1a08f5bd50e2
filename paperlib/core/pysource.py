"""Parsing the Python of chapters and modules, safely from any thread.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter state that all threads
share, so two threads parsing at once can raise ``SystemError: AST constructor recursion depth
mismatch`` (python/cpython#106905). A Dask worker runs two chapter runs side by side, and each
computes its content stamp by parsing the chapter's imports, so every parse here takes one lock.
"""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, *, drop_magics: bool = False) -> ast.Module:
    """``ast.parse(source)`` under a process-wide lock. With ``drop_magics``, IPython magics and
    shell escapes (lines starting ``%`` or ``!``), which are not Python, are dropped first."""
    if drop_magics:
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    with _LOCK:
        return ast.parse(source)
