"""docs/robustness.md's issue-21 section, made from recorded runs of tools/hostile.py and from
the hostile-input tests: per case the command, and before (main at f839485) and after (this
tree) its verdict, exit code and one line; the counts by class.

    # record the runs (each case in a throwaway folder under ROOT; minutes, builds included):
    python tools/hostile.py BEFORE/.venv/bin/wheelforge ROOT-before --json bench/hostile/before-f839485.json
    python tools/hostile.py .venv/bin/wheelforge ROOT-after --json bench/hostile/after.json
    # then write the section (or --check: exit 1 when docs/robustness.md is not what it makes):
    python tools/robustness_table.py [--check]

--merge FILE.json adds a partial run (--only) to the recorded one it names with --into.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tools")]

import hostile  # noqa: E402  - tools/hostile.py: the cases and their commands

DOC = REPO / "docs" / "robustness.md"
RUNS = REPO / "bench" / "hostile"
BEFORE, AFTER = RUNS / "before-f839485.json", RUNS / "after.json"
# Issue 39's cases, recorded against main at dbdd1c4, where that round started.
BEFORE_39 = RUNS / "before-dbdd1c4.json"
START, END = "<!-- issue-21-table -->", "<!-- /issue-21-table -->"
VERDICTS = ("clean", "unclear", "bad")

# The class of a case, by its name: the first entry whose prefix it starts with.
CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("deletion (removal.py)", ("prune-", "killed-")),
    ("build folder as data (issue 39)", ("build-folder-",)),
    ("screens (issue 39)", ("screen-",)),
    ("wrong success", ("test-after-", "same-name-")),
    (
        "integers (numbers.py)",
        (
            "int-",
            "unicode-",
            "version-huge",
            "torch-range-",
            "requires-python-",
            "dependency-",
            "cuda-release-",
            "tests-torch-",
            "arch-env-",
            "nvcc-threads-",
            "sde-",
            "member-cap-",
            "ratio-cap-",
            "jobs-flag-",
            "unused-for-",
            "size-budget-",
            "python-abi-",
            "toolkit-install-",
        ),
    ),
    ("the fence around init (fence.py)", ("fence-",)),
    ("tools (proc.py deadlines, caps; named toolkits)", ("nvcc-", "cxx-", "python-", "cuda-home-")),
    (
        "cache entries (cachefiles.py)",
        ("probe-", "env-marker-", "toolkit-json-", "repairs-cache-", "stamp-", "cache-list-"),
    ),
    (
        "writes and folders (writers.py, preflight)",
        ("report-", "step-summary-", "out-", "build-dir-", "cache-dir-"),
    ),
    ("wheel contents (check, inspect)", ("check-", "inspect-", "escape-in-")),
    ("packed files", ("pack-",)),
    ("metadata", ("metadata-", "summary-")),
    (
        "reads (readers.py)",
        ("matrix-", "pyproject-", "init-", "test-wheel-"),
    ),
    ("diagnoses", ("colon-", "newline-", "lock-", "pep517-")),
)

# Issue 21's defects without a command line of their own in tools/hostile.py: the unit test
# that reproduces each (it fails on f839485's code).
BY_TEST = (
    (
        "a source deleted mid-build: FileNotFoundError",
        "test_stamps::test_a_file_removed_while_the_build_runs_is_a_failed_variant",
    ),
    (
        "a read-only HOME breaks ccache ('compiling op.cpp failed')",
        "test_diagnoses (ccache left out with a warning when its folder cannot be written)",
    ),
    (
        "a full disk reads 'compiling k.cu failed' or a 600-character auditwheel command",
        "test_diagnoses (ENOSPC named in the one line; a command cut to 200 characters)",
    ),
    (
        "PEP 517 build_wheel ignores a metadata_directory that differs",
        "test_pep517 (the first differing line named)",
    ),
    (
        "check on a 346 kB wheel with crafted version needs: over 90 s",
        "test_abicheck::test_version_needs_are_bounded_in_all (3 crafted ELFs)",
    ),
    (
        "after --archs 8.0 and --archs 9.0 sharing a wheel name, test reports both passed",
        "test_stamps (a stamp whose wheel was replaced names it no more)",
    ),
)


def klass(name: str) -> str:
    return next((k for k, prefixes in CLASSES if name.startswith(prefixes)), "other")


def _short(arg: str) -> str:
    """An argument as the table shows it: long runs cut, with their length."""
    if len(arg) <= 60:
        return arg
    return f"{arg[:24]}…({len(arg):,} chars)"


def command(case: hostile.Case) -> str:
    """The case's command line, its folder written $BOX (the case's setup is its 'what')."""
    argv = [str(a).replace(sys.executable, "$PYTHON") for a in case.argv(Path("$BOX"))]
    if argv[0] == "$PYTHON" or argv[0].endswith("/python"):
        argv = ["python", *argv[1:]]
    else:
        argv = ["wheelforge", *argv]
    env = [f"{k}={_short(v.replace('{box}', '$BOX'))}" for k, v in case.env.items()]
    words = [*env, *(_short(a) for a in argv)]
    text = " ".join(w if re.fullmatch(r"[\w@%+=:,./$…()-]+", w) else repr(w) for w in words)
    return text.replace("|", "\\|").replace("\n", "\\n")


def _cell(r: dict[str, object] | None) -> str:
    if r is None:
        return "-"
    line = re.sub(rf"\S*/{re.escape(str(r['name']))}/", "…/", str(r.get("line", "")))
    line = line.replace("|", "\\|").replace("\n", " ").replace("`", "'")[:140]
    head = f"{r['verdict']}, exit {r.get('rc')}"
    return f"{head}: `{line}`" if line.strip() else head


def _counts(names: list[str], runs: dict[str, dict[str, object]]) -> str:
    counted = Counter(str(runs.get(n, {}).get("verdict", "-")) for n in names)
    return ", ".join(f"{counted[v]} {v}" for v in VERDICTS)


def hostile_tables(
    before: dict[str, dict[str, object]], after: dict[str, dict[str, object]]
) -> list[str]:
    out: list[str] = []
    cases = {c.name: c for c in hostile.CASES}
    since = {"issue39": ("dbdd1c4", _load(BEFORE_39) if BEFORE_39.is_file() else {})}
    for group, title in (
        ("issue", "Issue 21's defects"),
        ("new", "The new round (tools/hostile.py)"),
        ("issue39", "Issue 39, round five: the build folder, tracebacks, answers, screens"),
    ):
        names = [c.name for c in hostile.CASES if c.group == group]
        main, runs = since.get(group, ("f839485", before))
        out += [
            f"### {title}",
            "",
            f"| case | command | before (main {main}) | after |",
            "| --- | --- | --- | --- |",
        ]
        out += [
            f"| **{n}**: {cases[n].what} | `{command(cases[n])}` | {_cell(runs.get(n))} | {_cell(after.get(n))} |"
            for n in names
        ]
        out += [
            "",
            f"before: {len(names)} cases, {_counts(names, runs)}  ",
            f"after: {len(names)} cases, {_counts(names, after)}",
            "",
        ]
        out += [
            "| class | cases | before: clean / unclear / bad | after: clean / unclear / bad |",
            "| --- | ---: | --- | --- |",
        ]
        by_class: dict[str, list[str]] = {}
        for n in names:
            by_class.setdefault(klass(n), []).append(n)
        for k, members in sorted(by_class.items(), key=lambda kv: -len(kv[1])):
            b = Counter(str(runs.get(n, {}).get("verdict")) for n in members)
            a = Counter(str(after.get(n, {}).get("verdict")) for n in members)
            out.append(
                f"| {k} | {len(members)} | {' / '.join(str(b[v]) for v in VERDICTS)} | {' / '.join(str(a[v]) for v in VERDICTS)} |"
            )
        out.append("")
    return out


def test_counts() -> list[str]:
    """The hostile inputs that are tests: the new round (test_hostile_round.py) by class, and
    what issue 21 added to the bad-input table (test_bad_inputs.py)."""
    from tests.unit import test_bad_inputs, test_hostile_round

    rnd = Counter(k for k, _ in test_hostile_round.ROUND.values())
    rnd["terminal (log.printable)"] = test_hostile_round.terminal_cases()
    total = sum(rnd.values())
    out = [
        "### The new round as tests (tests/unit/test_hostile_round.py)",
        "",
        f"{total} cases beyond the issue's list, each exactly one `error:` line naming the bad "
        "thing with its class's exit code and no traceback (terminal: member names with control, "
        "bidirectional or zero-width characters, of a classic wheel, or of 60,000 characters, "
        "each through `inspect` and `check`, cache folders through `cache list`, a toolkit "
        "folder through `toolkit list`, a source in a dry run's commands: shown escaped and "
        "short):",
        "",
        "| class | cases |",
        "| --- | ---: |",
        *(f"| {k} | {n} |" for k, n in sorted(rnd.items(), key=lambda kv: -kv[1])),
        f"| **all** | **{total}** |",
        "",
    ]
    added = [n for n in test_bad_inputs.CASES if n.startswith(_ISSUE21_BAD_INPUTS)]
    by = Counter(_bad_input_class(n) for n in added)
    out += [
        f"Issue 21 also added {len(added)} cases to the bad-input table (tests/unit/test_bad_inputs.py, "
        f"{len(test_bad_inputs.CASES)} cases in all): "
        + ", ".join(f"{n} {k}" for k, n in sorted(by.items(), key=lambda kv: -kv[1]))
        + ".",
        "",
    ]
    return out


_ISSUE21_BAD_INPUTS = (
    "check-record-",
    "init-setup-",
    "int-",
    "matrix-dev-",
    "matrix-fifo",
    "matrix-huge",
    "matrix-link-loop",
    "matrix-summary-",
    "pyproject-fifo",
    "report-",
)


def _bad_input_class(name: str) -> str:
    if name.startswith("int-"):
        return "integers"
    if name.startswith("report-"):
        return "writes"
    if name.startswith("check-record-"):
        return "record"
    return "reads"


def exceptions() -> list[str]:
    """The grep of tests/unit/test_primitives.py over src/: every line outside the four
    primitives that reads, writes, removes or starts a process, with the reason it may."""
    from tests.unit import test_primitives as t

    rows = []
    for path in sorted(t.SRC.rglob("*.py")):
        module = path.relative_to(t.SRC).as_posix()
        if module in t.PRIMITIVES:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if t._IO_RE.search(line):
                key = next((k for k in t.ALLOWED if k[0] == module and k[1] in line), None)
                reason = t.ALLOWED[key] if key else "**not listed: the test fails**"
                code = line.strip().replace("|", "\\|").replace("`", "'")
                rows.append(f"| `{module}` | `{code[:90]}` | {reason} |")
    return [
        "### What is left outside the primitives",
        "",
        "Every line of `src/wheelforge` outside `foundation/readers.py`, `writers.py`, "
        "`removal.py` and `proc.py` that `tests/unit/test_primitives.py` greps for "
        "(`read_text(`, `read_bytes(`, `open(`, `rmtree`, `unlink(`, `Popen(`, `subprocess.run(`, "
        "`write_text(`, `rename(`, `mkdtemp`, `TemporaryDirectory(`, ...; the bounded reader's "
        "own `readers.read_text(` excluded), each with the reason it may stay; the test fails on "
        f"a line not listed ({len(rows)} lines):",
        "",
        "| module | line | reason |",
        "| --- | --- | --- |",
        *rows,
        "",
    ]


def section(before: dict[str, dict[str, object]], after: dict[str, dict[str, object]]) -> str:
    lines = [
        START,
        "",
        "Made by `python tools/robustness_table.py` from the runs recorded in `bench/hostile/` "
        "(`tools/hostile.py` against main at f839485, a pristine checkout with its own venv, and "
        "against this tree; issue 39's cases against main at dbdd1c4, where that round started, "
        "`before-dbdd1c4.json`), on the shared 2-core machine; each case in a throwaway folder ($BOX) "
        "with a throwaway `--cache-dir`, `timeout` and `ulimit -v 4000000`; its setup (the files "
        "it makes) is in `tools/hostile.py` under its name, and "
        "`python tools/hostile.py WHEELFORGE ROOT --only NAME` runs one ($PYTHON: the Python "
        "running it, with torch, which the PEP 517 cases and `--torch-from` use). clean: the outcome a user "
        "needs; unclear: no harm, but a misleading line or exit code; bad: a traceback, a hang "
        "(exit 124), memory exhausted, harm outside wheelforge's folders, a wrong success.",
        "",
        *hostile_tables(before, after),
        "Defects of the issue without a command line here, each reproduced by a unit test that "
        "fails on f839485's code:",
        "",
        *(f"- {what}: `{test}`" for what, test in BY_TEST),
        "",
        *test_counts(),
        *exceptions(),
        END,
    ]
    return "\n".join(lines)


def _load(path: Path) -> dict[str, dict[str, object]]:
    return {str(r["name"]): r for r in json.loads(path.read_text(encoding="utf-8"))}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--merge", type=Path, help="a partial run (--only) to add")
    parser.add_argument("--into", type=Path, help="the recorded run it replaces cases of")
    args = parser.parse_args()
    if args.merge:
        runs = {**_load(args.into), **_load(args.merge)}
        order = [c.name for c in hostile.CASES if c.name in runs]
        args.into.write_text(
            json.dumps([runs[n] for n in order], indent=1, ensure_ascii=False) + "\n"
        )
        return 0
    text = DOC.read_text(encoding="utf-8")
    made = section(_load(BEFORE), _load(AFTER))
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    new = head + made + tail
    if args.check:
        return 0 if new == text else 1
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
