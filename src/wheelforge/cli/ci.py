"""GitHub Actions: the markdown step summary of a build (appended to $GITHUB_STEP_SUMMARY),
written from the build report's model. Log groups and annotations are the logger's
(foundation/log.py)."""

from __future__ import annotations

import os
from pathlib import Path

from wheelforge.binaries.elf import member_path
from wheelforge.binaries.sizecheck import LEVERS_SHOWN
from wheelforge.configuration.archs import code_sort_key
from wheelforge.configuration.bytesizes import format_size
from wheelforge.documents.build_report_schema import BuildReportDocument, VariantDoc
from wheelforge.foundation import log, writers
from wheelforge.foundation.diagnostics import relative_to
from wheelforge.foundation.errors import WheelforgeError


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _wheels(report: BuildReportDocument) -> list[str]:
    lines = [
        "| variant | status | wheel | size | budget | time |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for v in report.variants:
        wheel = (
            f"`{v.wheel.path}`" if v.wheel else f"{v.error.kind} error (below)" if v.error else "-"
        )
        size = (
            format_size(v.wheel.size)
            if v.wheel
            else format_size(v.size.wheel_size)
            if v.size
            else "-"
        )
        budget = format_size(v.size.budget) if v.size else "-"
        over = " ❌ over" if v.size and v.size.over else ""
        lines.append(
            f"| {v.id} | {v.status} | {wheel} | {size}{over} | {budget} | {v.seconds:.1f} s |"
        )
    return lines


def _archs(v: VariantDoc) -> list[str]:
    """Per binary, kind and arch: stored and uncompressed size."""
    if v.size is None or not v.size.contributions:
        return []
    lines = [
        "",
        f"**{v.id}** (arch set `{v.arch_set.name}`: {v.arch_set.archs}, CUDA {v.toolkit})",
        "",
        "| binary | kind | arch | stored | uncompressed | compression |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    for c in sorted(
        v.size.contributions, key=lambda c: (c.binary, c.kind != "sass", code_sort_key(c.arch))
    ):
        member = member_path(c.binary)
        lines.append(
            f"| `{member}` | {c.kind.upper() if c.kind == 'ptx' else 'SASS'} | {c.arch} | "
            f"{format_size(c.stored)} | {format_size(c.uncompressed)} | {c.compression} |"
        )
    if v.size.over and v.size.levers:
        lines += ["", "Levers:", ""]
        lines += [f"- {lv.change}: {lv.saving}" for lv in v.size.levers[:LEVERS_SHOWN]]
    return lines


def _abi(report: BuildReportDocument) -> list[str]:
    lines = [
        "| variant | ABI verdict | target torch | newest shim | shims | violations |",
        "| --- | --- | --- | --- | ---: | ---: |",
    ]
    for v in report.variants:
        if v.abi is None:
            continue
        lines.append(
            f"| {v.id} | {v.abi.verdict} | {v.abi.target} | {v.abi.newest_shim or '-'} | "
            f"{len(v.abi.shims)} | {len(v.abi.violations)} |"
        )
    return lines if len(lines) > 2 else []


def _timings(report: BuildReportDocument) -> list[str]:
    names = list(dict.fromkeys(s.name for v in report.variants for s in v.stages))
    if not names:
        return []
    lines = [
        "| variant | " + " | ".join(names) + " | total |",
        "| --- |" + " ---: |" * (len(names) + 1),
    ]
    for v in report.variants:
        took = {s.name: s.seconds for s in v.stages}
        cells = [f"{took[n]:.1f} s" if n in took else "-" for n in names]
        lines.append(f"| {v.id} | " + " | ".join(cells) + f" | {v.seconds:.1f} s |")
    return lines


def _errors(report: BuildReportDocument) -> list[str]:
    """Each failure: the places it points at, and the tool's output folded away."""
    failed = [(v.id, v.error) for v in report.variants if v.error is not None]
    if not failed and report.error is not None:
        failed = [("run", report.error)]
    lines: list[str] = []
    for where, error in failed:
        assert error is not None
        lines += [f"- **{where}**: {_cell(error.message)}"]
        lines += [
            f"  - `{relative_to(d.file, log.workspace())}"
            + (f":{d.line}`" if d.line else "`")
            + f": {_cell(d.message)}"
            for d in error.diagnostics
            if d.severity == "error"
        ]
        if error.details:
            lines += [
                "",
                "<details><summary>output</summary>",
                "",
                "```",
                error.details,
                "```",
                "</details>",
                "",
            ]
    return lines


def step_summary(report: BuildReportDocument) -> str:
    """The markdown of a build: wheels, sizes, the arch table, the ABI verdict, timings."""
    m = report.matrix
    title = f"{m.package} {m.version}" if m else "build"
    mark = "✅" if report.status == "success" else "❌"
    out = [f"## {mark} wheelforge: {title}", ""]
    if report.error is not None:
        out += [
            f"**{report.error.kind} error** (exit {report.exit_code}): {_cell(report.error.message)}",
            "",
        ]
    if report.variants:
        out += ["### Wheels", "", *_wheels(report), ""]
        arch_lines = [ln for v in report.variants for ln in _archs(v)]
        if arch_lines:
            out += ["### SASS and PTX per arch", *arch_lines, ""]
        abi = _abi(report)
        if abi:
            out += ["### Stable ABI", "", *abi, ""]
        out += ["### Timings", "", *_timings(report), ""]
    errors = _errors(report)
    if errors:
        out += ["### Errors", "", *errors, ""]
    out.append(f"{report.seconds:.1f} s in all; wheelforge {report.wheelforge}")
    return "\n".join(out) + "\n"


def append_step_summary(markdown: str) -> Path | None:
    """Append to the file GitHub Actions names in $GITHUB_STEP_SUMMARY (when it names one)."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    try:
        writers.append_text(path, markdown + "\n", what=f"$GITHUB_STEP_SUMMARY {path}")
    except WheelforgeError as exc:
        log.warning(f"could not write the step summary: {exc.message}")
        return None
    return path
