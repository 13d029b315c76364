"""``wheelforge build``'s screen: per variant its binaries' archs with sizes, the ABI verdict, its
shared objects, compile costs and wheel (with a variant wheel's line), then the outcome and the
next step; and ``build --dry-run``'s plan (its JSON report: documents/build_report_schema.py).
Reads result data from the lower layers; decides nothing."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from wheelforge.binaries.elf import member_path
from wheelforge.binaries.facts import BinaryContents
from wheelforge.cli.console import print_whole, shown_path
from wheelforge.configuration import abi
from wheelforge.configuration.archs import code_sort_key
from wheelforge.configuration.bytesizes import format_size as human_size
from wheelforge.foundation import log
from wheelforge.foundation.log import printable

if TYPE_CHECKING:  # a no-op `build` loads none of these, `inspect` no matrix and no plan
    from wheelforge.build.dryrun import PlannedVariant
    from wheelforge.build.results import AbiSummary, BuildReport, VariantResult
    from wheelforge.planning.selection import Member


def short_path(binary: BinaryContents) -> str:
    """``x.whl!pkg/_C.abi3.so`` → ``pkg/_C.abi3.so``."""
    return member_path(binary.path)


def binary_tables(v: VariantResult) -> list[RenderableType]:
    """One table per binary: each kind and arch, stored and uncompressed, and whether it was
    asked for (the binary's ArchCheck). Narrow enough for 80 columns: the binary is not a
    column but a line of its own above the table (as the table's title rich would fold it to
    the table's width, mid-name: ``grouped_gemm_backend.cpython-311-x86_64-linux-gnu.so``)."""
    tables: list[RenderableType] = []
    for b, check in zip(v.binaries, v.arch_checks, strict=True):
        if not b.entries and check.ok:
            continue  # no device code, and none owed: a C++-only extension, a helper library
        table = Table()
        for column in ("kind", "arch", "stored", "uncompressed", "status"):
            table.add_column(
                column,
                justify="right" if column in ("stored", "uncompressed") else "left",
                no_wrap=True,
            )
        for kind, missing, extra in (
            ("sass", check.missing_sass, check.extra_sass),
            ("ptx", check.missing_ptx, check.extra_ptx),
        ):
            sizes = {s.arch: (s.stored, s.size) for s in b.by_arch if s.kind == kind}
            label = "SASS" if kind == "sass" else "PTX"
            for arch in sorted({*sizes, *missing}, key=code_sort_key):
                if arch in missing or arch not in sizes:
                    table.add_row(label, arch, "-", "-", "[red]MISSING[/red]")
                    continue
                status = (
                    "ok"
                    if arch not in extra
                    else "[yellow]extra[/yellow]"
                    if check.applies
                    else "-"
                )
                stored, size = sizes[arch]
                table.add_row(label, arch, human_size(stored), human_size(size), status)
        tables.append(Group(Text(printable(f"{v.variant_id}: {short_path(b)}")), table))
    return tables


def shared_object_lines(v: VariantResult) -> list[str]:
    """One line per shared object of the wheel: its path, role, size (and budget), and what
    the import check did with it."""
    lines = []
    for so in v.shared_objects:
        role = "module" if so.role == "extension" else "op library"
        budget = f" of {human_size(so.budget)}" if so.budget is not None else ""
        loaded = (
            escape(so.loaded) if so.loaded else "[yellow]not loaded[/yellow] (--no-import-check)"
        )
        lines.append(f"  {escape(so.path)} ({role}, {human_size(so.size)}{budget}): {loaded}")
    return lines


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def abi_summary(found: AbiSummary, target: tuple[int, int]) -> str:
    """One line, in plain words: what the binaries call of torch and of Python."""
    bad = len(found.violations)
    status = "[green]ok[/green]" if not bad else f"[red]{_count(bad, 'violation')}[/red]"
    newest = found.newest_shim
    needs = f", the newest from torch {newest[0]}.{newest[1]}" if newest else ""
    return (
        f"stable ABI {status}: calls {_count(len(found.shims), 'function')} of torch's stable C "
        f"API{needs} (the target is {target[0]}.{target[1]}), none of libtorch's C++ API, and "
        f"{_count(len(found.python_symbols), 'function')} of Python's limited C API (abi3)"
    )


def print_build(report: BuildReport, console: Console) -> None:
    """Per variant: its binaries' archs with sizes, the ABI verdict, and the wheel's full path
    on one line of its own (never broken, so it can be copied); then what was built, what
    reused, what failed, and the next step."""

    def say(markup: str) -> None:
        log.say(markup, on=console)

    for v in report.variants:
        for table in binary_tables(v):
            print_whole(table, console)
        if not v.arch_set.specs:  # a matrix without extensions (build/purewheel.py)
            say("pure Python (py3-none-any): no extension, nothing compiled or checked")
        elif any(c.applies for c in v.arch_checks):
            say(f"arch set {escape(v.arch_set.name)}: {v.arch_set}; CUDA {v.toolkit}")
        else:
            say(
                f"no device code: the extension compiles no .cu source, so arch set "
                f"{escape(v.arch_set.name)} ({v.arch_set}) does not apply; CUDA {v.toolkit}"
            )
        if v.abi.checked:
            say(abi_summary(v.abi, report.target_version))
        if len(v.shared_objects) > 1:
            say(f"{len(v.shared_objects)} shared objects:")
            for line in shared_object_lines(v):
                say(line)
        elif v.arch_set.specs:
            say(
                f"import check: {escape('; '.join(v.import_check))}"
                if v.import_check
                else "import check: [yellow]skipped[/yellow] (--no-import-check)"
            )
        if v.compile_cache is not None:
            say(escape(v.compile_cache.summary()))
        for line in compile_costs(v):
            say(escape(line))
        budget = f", budget {human_size(v.size.budget)}" if v.size else ""
        made = (
            "reused: an earlier build made it from the same inputs"
            if v.reused
            else "built by this run"
        )
        say(f"[green]wheel[/green] {_text(shown_path(v.wheel))}")
        say(f"  {human_size(v.wheel_size)}{budget}; {made}")
        if v.reproducible:
            say(
                "  reproducible: a rebuild in another folder is identical (sha256 "
                f"{v.reproducible})"
            )
        if v.variant_label:
            say(escape(variant_summary(v)))
    if report.variants_json is not None:
        say(f"index-level variant metadata: {_text(shown_path(report.variants_json))}")
    for f in report.failures:
        say(f"[red]failed[/red] {escape(f.variant_id)}: {f.error.kind} error (below)")
    if report.no_compile_cache:
        say(f"compile cache: none ({escape(report.no_compile_cache)})")
    major, minor = report.target_version
    if all(not v.arch_set.specs for v in report.variants) and report.variants:
        how = f"pure Python, for torch {major}.{minor} and newer"
    elif abi.of(report.abi).per_torch:
        how = f"unstable ABI: each wheel pinned to the torch it was built against ({report.built_against})"
    else:
        how = f"stable-ABI target torch {major}.{minor}, built against torch {report.built_against}"
    say(f"{outcome_words(report)}; {escape(how)}")
    if step := next_step(report):
        say(step)


def outcome_words(report: BuildReport) -> str:
    """``1 wheel built, 1 reused (up to date), 0 failed``."""
    words = [f"{_count(report.built, 'wheel')} built"]
    if report.reused:
        words.append(f"{report.reused} reused (up to date)")
    words.append(f"{len(report.failures)} failed")
    return ", ".join(words)


def next_step(report: BuildReport) -> str | None:
    """What to do with the wheels: test them under the matrix's torches, else install one."""
    if not report.variants or report.failures:
        return None
    if report.test_torches:
        torches = ", ".join(report.test_torches)
        return (
            f"next: [bold]wheelforge test[/bold] installs each wheel under torch {escape(torches)} "
            "and runs the matrix's tests (--torch-from PYTHON: under a torch already installed)"
        )
    wheel = report.variants[0].wheel
    # Quoted for the shell: a folder named 'a;rm -rf ~' must paste as one argument (issue 39).
    pasted = shlex.quote(shown_path(wheel))
    return f"next: [bold]pip install {_text(pasted)}[/bold] (a 'tests' section in the matrix lets 'wheelforge test' run your tests)"


SLOWEST = 5  # compiles named in the summary; the report has them all


def compile_costs(v: VariantResult) -> list[str]:
    """What this run's compiles cost: their number, CPU time and the peak memory of the whole
    compile, the slowest ones (wall, CPU, peak memory each), and the schedule when memory
    held it back. The JSON report has every compile."""
    lines = []
    if v.jobs:
        if v.costs_in_server:
            cost = " in sccache's server (CPU, memory not measured)"
        else:
            peak = f", at most {human_size(v.peak_memory)} in use at once" if v.peak_memory else ""
            cost = f", {v.cpu_seconds:.1f} s of CPU{peak}"
        hits = v.cache_hits
        answered = (
            f" ({hits} from the compile cache, {len(v.jobs) - hits} compiled)" if hits else ""
        )
        lines.append(f"compiles: {len(v.jobs)}{answered}{cost}; the slowest:")
        for job in v.slowest(SLOWEST):
            cpu_text = f"{job.cpu_seconds:.1f} s CPU" if job.cpu_seconds is not None else "- CPU"
            mem = human_size(job.peak) if job.peak is not None else "-"
            hit = ", from the compile cache" if job.cached else ""
            lines.append(f"  {job.seconds:7.1f} s  {cpu_text}, {mem}{hit}  {job.source}")
    schedule = v.schedule
    if v.jobs and schedule is not None and (schedule.heavy_depth is not None or schedule.reduced):
        lines.append(schedule.summary())
    return lines


def _text(line: str) -> str:
    """One line of names from files (paths, commands) for console.print: no markup, no
    escape sequences (log.printable)."""
    return escape(printable(line))


def _requires(p: PlannedVariant) -> str:
    """The wheel's torch requirement and where it comes from, in words."""
    if p.torch_free:
        return (
            f"{p.torch_requirement}, the matrix's torch as written (the project's own): no binary "
            "uses torch (every extension is kind: plain, or there is none), so the wheel has no "
            "torch floor or ABI"
        )
    if p.torch_requirement is None:
        return "torch pinned to the torch it builds against"
    return p.torch_requirement


def print_dry_run(planned: Sequence[PlannedVariant], console: Console) -> None:
    """The plan: each variant's toolkit and archs, then the exact commands ninja would run."""
    for p in planned:
        console.print(
            f"[bold]{escape(p.variant_id)}[/bold]: arch set {p.arch_set} ({p.archs})",
            soft_wrap=True,
        )
        console.print(f"  toolkit: {_text(p.toolkit)}", soft_wrap=True)
        console.print(f"  torch: {p.torch or '-'}", soft_wrap=True)
        console.print(f"  requires: {escape(_requires(p))}", soft_wrap=True)
        if p.note:
            console.print(f"  [yellow]{escape(p.note)}[/yellow]", soft_wrap=True)
        if p.device_share is not None:
            state = "on" if p.device_share.on else "off"
            console.print(f"  nvcc's steps: {state}: {_text(p.device_share.why)}", soft_wrap=True)
        if p.shared_folder is not None:
            # the folder on a line of its own: a copyable path, not folded into the sentence
            console.print(
                f"  shared: {len(p.shared_commands)} compile(s), run once for every variant "
                "whose commands for them are these (a compile cache's launcher is one), in",
                soft_wrap=False,
                highlight=False,
            )
            console.print(f"    {_text(str(p.shared_folder))}", soft_wrap=True, highlight=False)
            for command in p.shared_commands:
                console.print(_text(command), soft_wrap=True, highlight=False)
            console.print("  the variant's own compiles and link:", soft_wrap=True)
        for command in p.commands:
            # The project's file names are in them: text, never escape sequences.
            console.print(_text(command), soft_wrap=True, highlight=False)
        if p.members:
            console.print(f"  wheel members ({len(p.members)}), as the packer writes them:")
            print_whole(
                Padding(_members_table(p.members, p.project), (0, 0, 0, 4), expand=False), console
            )
    console.print(f"dry run: {len(planned)} variant(s); nothing was compiled or downloaded")


def _members_table(members: Sequence[Member], project: Path | None) -> Table:
    """A wheel's planned members: kind and name, and below the name where it comes from where
    the name does not say it (the build's output, a file of another name)."""
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), pad_edge=False)
    table.add_column("kind", no_wrap=True)
    table.add_column("member", overflow="fold")
    for member in members:
        cell = Text(printable(member.path))
        origin = _member_origin(member, project)
        if origin:
            cell.append(f"\n  {origin}")
        table.add_row(member.kind, cell)
    return table


def _member_origin(member: Member, project: Path | None) -> str:
    if member.source is None:  # a .dist-info file the packer writes
        return ""
    shown = member.source
    if project is not None and shown.is_relative_to(project):
        shown = shown.relative_to(project)
    if member.kind == "binary":
        return f"built as {printable(str(shown))}"
    same = member.path.endswith(f"/licenses/{shown.as_posix()}") or shown.as_posix() == member.path
    return "" if same else f"from {printable(str(shown))}"


def variant_summary(v: VariantResult) -> str:
    """The label and the properties read from the binaries (and the null variant, if any)."""
    null = f"; null variant {v.null_wheel.name}" if v.null_wheel else ""
    props = ", ".join(v.variant_properties)
    return f"variant {v.variant_label} (experimental, PEP 825 draft): {props}{null}"
