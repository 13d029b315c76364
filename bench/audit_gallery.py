"""The gallery (tests/data/gallery.toml): released wheels audited by ``wheelforge check`` next to
torch-abi-audit and abi3audit, one row per binary.

    pip install torch-abi-audit abi3audit            # into any environment: pass its tools
    python bench/audit_gallery.py wheels/*.whl \\
        --torch-abi-audit /path/to/bin/torch-abi-audit --abi3audit /path/to/bin/abi3audit \\
        --markdown gallery.md

wheelforge reads each wheel (``check --json``, this interpreter's wheelforge); torch-abi-audit
reads the wheel unpacked into a temporary folder (it takes folders and installed packages);
abi3audit reads the wheel. Cells:

- wheelforge: the binary's role, its torch ABI (stable: shims only; unstable: libtorch's C++
  API; none), its torch floor, and its verdict with the rules that found something;
- torch-abi-audit: extension or bundled library (its split: a defined PyInit), its torch label
  (STABLE, UNSTABLE, NO-TORCH), its min-torch, its CPython label;
- abi3audit: ok, a version mismatch (the limited-API version the binary needs above the tag's),
  the count of non-abi3 symbols, or "-" where it audits nothing (a wheel not tagged abi3).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any


def wheelforge(wheel: Path) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-m", "wheelforge", "check", "--json", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    document: dict[str, Any] = json.loads(run.stdout)
    document["exit"] = run.returncode
    return document


def torch_abi_audit(tool: str, wheel: Path) -> dict[str, dict[str, Any]]:
    """Per member path: torch-abi-audit's record of it."""
    with tempfile.TemporaryDirectory(prefix="gallery-") as tmp:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)
        run = subprocess.run([tool, "--json", tmp], capture_output=True, text=True, check=False)
        report = json.loads(run.stdout)
        out = {}
        for kind in ("extensions", "bundled_libs"):
            for lib in report.get(kind, []):
                member = str(Path(lib["path"]).resolve().relative_to(Path(tmp).resolve()))
                out[member] = {**lib, "kind": "extension" if kind == "extensions" else "bundled"}
        return out


def abi3audit(tool: str, wheel: Path) -> dict[str, dict[str, Any]]:
    """Per file name (abi3audit names members by their base name): its result."""
    run = subprocess.run(
        [tool, "--report", str(wheel)], capture_output=True, text=True, check=False
    )
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        return {}
    out = {}
    for spec in report.get("specs", {}).values():
        for item in spec.get("wheel", []):
            out[item["name"]] = item["result"]
    return out


def _wf_cell(binary: dict[str, Any]) -> str:
    abi = {"torch-stable": "stable", "torch-unstable": "unstable", "no-torch": "none"}
    floor = binary["torch_floor"]["inferred"] or "-"
    rules = sorted({v["rule"] for v in binary["violations"]})
    found = f" ({', '.join(rules)})" if rules else ""
    return f"{binary['role']}, {abi[binary['torch_abi']]}, ≥{floor}: **{binary['verdict']}**{found}"


def _tabi_cell(lib: dict[str, Any] | None) -> str:
    if lib is None:
        return "not listed"
    torch = lib["torch"]
    label = "NO-TORCH" if not torch["uses_torch"] else "STABLE" if torch["stable"] else "UNSTABLE"
    cpy = lib["cpython"]
    cpython = "abi3-ok" if cpy["compliant"] else f"{len(cpy['violations'])} non-abi3"
    if not cpy["violations"] and not cpy["compliant"]:
        cpython = "no C API" if cpy["intent"] else "not abi3"
    floor = torch["min_torch_version"] or "-"
    return f"{lib['kind']}, {label}, ≥{floor}, {cpython}"


def _abi3_cell(result: dict[str, Any] | None) -> str:
    if result is None:
        return "-"
    if result["non_abi3_symbols"]:
        return f"{len(result['non_abi3_symbols'])} non-abi3 symbols"
    if not result["is_abi3_baseline_compatible"]:
        return f"needs {result['computed']} > tag {result['baseline']}"
    return "ok"


def gallery(wheels: list[Path], tabi: str, abi3: str) -> str:
    lines = []
    for wheel in wheels:
        checked = wheelforge(wheel)
        theirs = torch_abi_audit(tabi, wheel)
        audited = abi3audit(abi3, wheel)
        [whole] = checked["wheels"] or [None]
        lines += [f"#### {wheel.name}", ""]
        if whole is not None:
            requires, against = whole["requires"], whole["checked_against"]
            # A torch is named only where one was given or inferred (issue 33).
            against_text = (
                "no torch floor inferred (its binaries use no shim)"
                if against["from"] == "assumed"
                else f"checked against torch {against['torch']} ({against['from']})"
            )
            lines.append(
                f"wheelforge: exit {checked['exit']}, verdict **{whole['verdict']}**; requires "
                f"{requires['torch'] or 'no torch'}, Requires-Python {requires['python'] or '-'}; "
                f"{against_text}; its binaries allow {whole['allows'] or 'any torch'}"
            )
            lines.append("")
        lines += [
            "| binary | wheelforge | torch-abi-audit | abi3audit |",
            "| --- | --- | --- | --- |",
        ]
        for binary in checked["binaries"]:
            member = binary["path"].rsplit("!", 1)[-1]
            if binary["role"] == "wheel":
                rules = ", ".join(sorted({v["rule"] for v in binary["violations"]}))
                lines.append(f"| (the wheel) | {rules}: **{binary['verdict']}** | - | - |")
                continue
            lines.append(
                f"| {member} | {_wf_cell(binary)} | {_tabi_cell(theirs.get(member))} | "
                f"{_abi3_cell(audited.get(Path(member).name))} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--torch-abi-audit", required=True)
    parser.add_argument("--abi3audit", required=True)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    text = gallery(args.wheels, args.torch_abi_audit, args.abi3audit)
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
