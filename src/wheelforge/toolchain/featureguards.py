"""Which names of torch's stable-ABI headers (``torch/csrc/stable``, ``torch/headeronly``) sit
behind a ``#if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_0`` guard, so that a compile error
about a missing ``torch::stable`` member can say "your target version hides it; torch X.Y
introduced it" instead of leaving the user to read the headers."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from wheelforge.foundation import readers
from wheelforge.toolchain.shims import ELSE_RE, ENDIF_RE, GUARD_RE, IF_RE, Version2

_HEADER_DIRS = ("torch/csrc/stable", "torch/headeronly")
_WORD_RE = re.compile(r"\b[A-Za-z_]\w{2,}\b")
_COMMENT_RE = re.compile(r"//.*$")


def _scan(text: str, guarded: dict[str, Version2], plain: set[str]) -> None:
    stack: list[Version2 | None] = []
    for line in text.splitlines():
        if m := IF_RE.match(line):
            g = GUARD_RE.search(m[2]) if m[1] == "if" else None
            stack.append((int(g[1]), int(g[2])) if g else None)
            continue
        if ELSE_RE.match(line):
            if stack:
                stack[-1] = None  # the other branch is what older targets see
            continue
        if ENDIF_RE.match(line):
            if stack:
                stack.pop()
            continue
        guards = [g for g in stack if g is not None]
        words = _WORD_RE.findall(_COMMENT_RE.sub("", line))
        if not guards:
            plain.update(words)
            continue
        for word in words:
            guard = max(guards)
            if word not in guarded or guard < guarded[word]:
                guarded[word] = guard


@cache
def feature_guards(include_dir: Path) -> dict[str, Version2]:
    """Name → the torch version that introduced it, for names that appear only inside version
    guards (a name also used unguarded, like ``Tensor``, is left out: it is not new)."""
    guarded: dict[str, Version2] = {}
    plain: set[str] = set()
    for rel in _HEADER_DIRS:
        for header in sorted((include_dir / rel).rglob("*.h")):
            _scan(
                readers.read_text(header, cap=readers.HEADER_CAP, errors="replace"), guarded, plain
            )
    return {name: v for name, v in guarded.items() if name not in plain}
