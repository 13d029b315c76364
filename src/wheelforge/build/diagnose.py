"""Reading a failed ninja run: the failing command's own output, its first errors, and hints
where the cause is known (a duplicated PyInit, a stable-ABI name the target version hides)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from wheelforge.build import genstep
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain.featureguards import feature_guards

# How many lines of the failing command's output an error shows, from its first error on.
FIRST_LINES = 30
_NEXT_STEP_RE = re.compile(r"^(\[wheelforge \d+/\d+\] |FAILED: |ninja: )", re.ASCII)
_ERROR_RE = re.compile(r"\berror\b", re.IGNORECASE)
# A compiler's diagnostic: "x.cu(12): error: ...", "x.cpp:3:1: error: ...", "... fatal error: ...".
_ERROR_LINE_RE = re.compile(r":\s*(?:fatal )?error\b|\berror:", re.IGNORECASE)
_MULTIPLE_INIT_RE = re.compile(r"multiple definition of [`‘'\"](PyInit_\w+)")
# gcc and nvcc (EDG) spell "no such member" differently; each names the member and its scope.
_MISSING_RES = (
    re.compile(r"[‘'](\w+)[’'] is not a member of [‘'](torch::[\w:]+)"),
    re.compile(r"[‘'](\w+)[’'] in namespace [‘'](torch::[\w:]+)[’'] does not name a"),
    re.compile(r"[‘'](?:class|struct) (torch::[\w:]+)[’'] has no member named [‘'](\w+)"),
    re.compile(r'(?:namespace|class|struct) "(torch::[\w:]+)" has no member "(\w+)"'),
    re.compile(r"[‘'](\w+)[’'] was not declared in this scope"),
    re.compile(r'identifier "(\w+)" is undefined'),
)


@dataclass(frozen=True, kw_only=True)
class Failure:
    failed: str  # ninja's "FAILED: <output>" line
    output: tuple[str, ...]  # the failing command's output (without the command line)


def failures(output: str) -> list[Failure]:
    """Each failed step of a ninja run with the lines its command printed."""
    lines = output.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not line.startswith("FAILED: "):
            continue
        body: list[str] = []
        for following in lines[i + 2 :]:  # i + 1 is the command line
            if _NEXT_STEP_RE.match(following):
                break
            body.append(following)
        found.append(Failure(failed=line, output=tuple(body)))
    return found


def generate_failure(failure: Failure) -> str | None:
    """The one line a failed generate step ended with (build/genstep.py), if the
    failed job is one."""
    return next(
        (ln.strip() for ln in reversed(failure.output) if ln.startswith(genstep.FAILED_MARK)),
        None,
    )


def first_error_line(failure: Failure) -> str | None:
    """The failing command's first line that names an error (``x.cu(12): error: ...``)."""
    return next((ln for ln in failure.output if _ERROR_LINE_RE.search(ln)), None) or next(
        (ln for ln in failure.output if _ERROR_RE.search(ln)), None
    )


def first_errors(failure: Failure, limit: int = FIRST_LINES) -> str:
    """The failing command's output from a little before its first error, *limit* lines long."""
    lines = list(failure.output)
    first = next((i for i, ln in enumerate(lines) if _ERROR_RE.search(ln)), 0)
    start = max(0, first - 2)  # "In function ..." context lines come just before
    shown = lines[start : start + limit]
    rest = len(lines) - start - len(shown)
    if rest > 0:
        shown.append(f"... ({rest} more lines in the build log)")
    return "\n".join(shown)


# A path in a compiler's line: as its command named it, relative to the build folder ninja runs
# in (``../../../kernels/csrc/x.cu``), or absolute (nvcc before CUDA 12.9 runs from /). It ends
# where gcc's ``:12:5`` or nvcc's ``(12)`` begins, or at a quote or a comma.
_PATH_RE = re.compile(r"""(?<![\w.~/-])(?:\.\./)+[^\s:()'"`‘’,]+|(?<![\w.~/-])/[^\s:()'"`‘’,]+""")


def project_paths(text: str, plan: VariantPlan) -> str:
    """*text* (a compiler's output) with each file in the project named relative to the project
    (``kernels/csrc/x.cu``), the way its sources are named everywhere else; a file elsewhere
    that the command named relative to the build folder becomes absolute."""
    root = os.path.realpath(plan.project)

    def shown(match: re.Match[str]) -> str:
        named = match[0]
        absolute = named.startswith("/")
        path = os.path.realpath(named if absolute else plan.build_dir / named)
        if path == root or path.startswith(root + os.sep):
            return os.path.relpath(path, root)
        return named if absolute else path

    return _PATH_RE.sub(shown, text)


def hints(text: str, plan: VariantPlan) -> list[str]:
    """Known causes found in the compiler or linker output."""
    out = []
    if m := _MULTIPLE_INIT_RE.search(text):
        out.append(
            f"hint: the sources define {m[1]} themselves, and wheelforge generated one too; "
            f"set 'module-init: false' under extension in {plan.matrix_path.name}"
        )
    if plan.abi.kind.torch_target:
        out += _hidden_names(text, plan)
    return out


def _hidden_names(text: str, plan: VariantPlan) -> list[str]:
    names = set()
    for regex in _MISSING_RES:
        for m in regex.finditer(text):
            names.add(m[1] if m[1] and not m[1].startswith("torch::") else m[2])
    if not names:
        return []
    guards = feature_guards(plan.torch.include_dir)
    target = plan.abi.target
    out = []
    for name in sorted(names):
        since = guards.get(name)
        if since is None or since <= target:
            continue
        out.append(
            f"hint: {name} exists in torch {since[0]}.{since[1]} and newer; the matrix's lowest torch "
            f"makes the target version {target[0]}.{target[1]} (-DTORCH_TARGET_VERSION), and torch's "
            f"headers hide what is newer than the target (TORCH_FEATURE_VERSION). Raise the lowest "
            f"torch to {since[0]}.{since[1]}, or do without {name}"
        )
    return out
