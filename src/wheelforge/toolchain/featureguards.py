"""Which names of torch's stable-ABI headers (``torch/csrc/stable``, ``torch/headeronly``) sit
behind a ``#if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_0`` guard, so that a compile error
about a missing ``torch::stable`` member can say "your target version hides it; torch X.Y
introduced it" instead of leaving the user to read the headers."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from wheelforge.toolchain.shims import Version2

_HEADER_DIRS = ("torch/csrc/stable", "torch/headeronly")
_IF_RE = re.compile(r"^\s*#\s*(if|ifdef|ifndef)\b(.*)$")
_ELSE_RE = re.compile(r"^\s*#\s*(else|elif)\b")
_ENDIF_RE = re.compile(r"^\s*#\s*endif\b")
_GUARD_RE = re.compile(r"TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_(\d+)_(\d+)_\d+")
_WORD_RE = re.compile(r"\b[A-Za-z_]\w{2,}\b")
_COMMENT_RE = re.compile(r"//.*$")


def _scan(text: str, guarded: dict[str, Version2], plain: set[str]) -> None:
    stack: list[Version2 | None] = []
    for line in text.splitlines():
        if m := _IF_RE.match(line):
            g = _GUARD_RE.search(m[2]) if m[1] == "if" else None
            stack.append((int(g[1]), int(g[2])) if g else None)
            continue
        if _ELSE_RE.match(line):
            if stack:
                stack[-1] = None  # the other branch is what older targets see
            continue
        if _ENDIF_RE.match(line):
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
            _scan(header.read_text(encoding="utf-8", errors="replace"), guarded, plain)
    return {name: v for name, v in guarded.items() if name not in plain}
