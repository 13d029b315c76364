"""Where a problem is: a file, a line, a severity and a message. Read from matrix.yaml's checks
and from compiler output, written out as CI annotations and into build reports."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Severity = Literal["error", "warning"]

# gcc and clang: "src/a.cpp:12:5: error: ..." (the column is optional; "fatal error" too).
_GCC_RE = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>[0-9]{1,9}):(?:(?P<col>[0-9]{1,9}):)? "
    r"(?:fatal )?(?P<sev>error|warning): (?P<msg>.+)$"
)
# nvcc's front end (cudafe++): "src/k.cu(12): error: ..." and, with --display_error_number,
# "src/k.cu(12): error #20-D: ...".
_NVCC_RE = re.compile(
    r"^(?P<file>[^\s(][^(]*)\((?P<line>[0-9]{1,9})\): (?P<sev>error|warning)(?: #[\w-]+)?: (?P<msg>.+)$"
)


@dataclass(frozen=True, kw_only=True)
class Diagnostic:
    """One problem at one place in one file."""

    file: str = field(metadata={"doc": "the file, as the tool named it"})
    line: int | None = field(default=None, metadata={"doc": "1-based line, when known"})
    column: int | None = field(default=None, metadata={"doc": "1-based column, when known"})
    severity: Severity = field(default="error", metadata={"doc": "error or warning"})
    message: str = field(metadata={"doc": "what is wrong"})


def parse_compiler_output(text: str) -> tuple[Diagnostic, ...]:
    """The errors and warnings gcc, clang and nvcc printed, in order, without repeats."""
    found: dict[tuple[str, int | None, str], Diagnostic] = {}
    for raw in text.splitlines():
        line = raw.strip()
        m = _GCC_RE.match(line) or _NVCC_RE.match(line)
        if m is None:
            continue
        col = m.groupdict().get("col")
        diag = Diagnostic(
            file=m["file"],
            line=int(m["line"]),
            column=int(col) if col else None,
            severity="error" if m["sev"] == "error" else "warning",
            message=m["msg"].strip(),
        )
        found.setdefault((diag.file, diag.line, diag.message), diag)
    return tuple(found.values())


def relative_to(path: str, root: Path | None) -> str:
    """*path* relative to *root* when it lies in it; else as given."""
    if root is None:
        return path
    candidate = Path(path)
    if not candidate.is_absolute():
        return path
    try:
        return str(candidate.resolve().relative_to(root.resolve()))
    except (ValueError, OSError):
        return path
