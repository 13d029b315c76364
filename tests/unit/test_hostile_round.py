"""Issue 21's new round: hostile inputs beyond the issue's own list, one class of the issue's
each (what is read, what is written, integers, names shown on the terminal, what a wheel's
RECORD says, the folders wheelforge is given), run through the CLI in-process by the bad-input
table's runner (test_bad_inputs.run_case): exactly one ``error:`` line naming the bad thing, the
exit code of its class, no traceback. ``ROUND`` gives each case its class; docs/robustness.md
counts them (tools/robustness_table.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.badinput import (
    ELF,
    FIFO,
    METADATA,
    SOCKET,
    USAGE,
    WHEEL,
    B,
    Case,
    Link,
    Sparse,
    record_row,
    recorded,
    run_case,
    shown_member,
    wheel,
)
from tests.unit.conftest import GOOD_MATRIX
from wheelforge.foundation.errors import (
    ConfigError,
    EnvironmentProblem,
    VerificationError,
)

MiB = 1 << 20
PROJECT = '[project]\nname = "demo-ops"\nversion = "1.2.0"\n'
X_PY = ("demo/x.py", "x = 1\n")
TARGET = ("check", "--target", "2.10", "{root}/x.so")


def _with_record(rows: str) -> bytes:
    """A wheel of METADATA and demo/x.py whose RECORD is *rows* (as given, true or not)."""
    return wheel(METADATA, X_PY, ("demo-1.0.dist-info/RECORD", rows))


def _true_rows() -> str:
    return record_row(METADATA) + record_row(X_PY) + "demo-1.0.dist-info/RECORD,,\n"


# (class, case) by name. The classes: reads (the bounded reader), writes (--report's checked
# output), integers (foundation/numbers), record (check holds a wheel to its RECORD), folders
# (--out, --build-dir, --cache-dir), terminal (names from files shown as text).
ROUND: dict[str, tuple[str, Case]] = {
    # --- reads: regular files only, capped, UTF-8 -------------------------------------------
    "matrix-socket": (
        "reads",
        Case(
            ("build", "--matrix", "{root}/s"),
            ConfigError,
            "s could not be read: it is a socket",
            files={"s": SOCKET},
        ),
    ),
    "matrix-link-to-dev-zero": (
        "reads",
        Case(
            ("build", "--matrix", "{root}/m.yaml"),
            ConfigError,
            "m.yaml could not be read: it is a character device",
            files={"m.yaml": Link("/dev/zero")},
        ),
    ),
    "matrix-just-over-the-cap": (
        "reads",
        Case(
            ("build", "--matrix", "{root}/big.yaml"),
            ConfigError,
            "big.yaml could not be read: it is 16 MiB, above the cap of 16 MiB",
            files={"big.yaml": Sparse(16 * MiB + 1)},
        ),
    ),
    "matrix-utf16": (
        "reads",
        Case(
            ("build", "--matrix", "{root}/u.yaml"),
            ConfigError,
            "u.yaml could not be read: it is not UTF-8 text",
            files={"u.yaml": "package:\n  name: x\n".encode("utf-16")},
        ),
    ),
    "matrix-link-to-itself": (
        "reads",
        Case(
            ("build", "--matrix", "{root}/loop.yaml"),
            ConfigError,
            "loop.yaml could not be read: Too many levels of symbolic links",
            files={"loop.yaml": Link("{root}/loop.yaml")},
        ),
    ),
    "pyproject-dev-zero": (
        "reads",
        Case(
            B,
            ConfigError,
            "pyproject.toml could not be read: it is a character device",
            files={"pyproject.toml": Link("/dev/zero")},
        ),
    ),
    "pyproject-folder": (
        "reads",
        Case(
            B,
            ConfigError,
            "pyproject.toml could not be read: it is a folder",
            files={"pyproject.toml/": 0o755},
        ),
    ),
    "pyproject-not-utf8": (
        "reads",
        Case(
            B,
            ConfigError,
            "pyproject.toml could not be read: it is not UTF-8 text",
            files={"pyproject.toml": b"[project]\nname = '\xff'\n"},
        ),
    ),
    "pyproject-huge": (
        "reads",
        Case(
            B,
            ConfigError,
            "pyproject.toml could not be read: it is 17 MiB, above the cap",
            files={"pyproject.toml": Sparse(17 * MiB)},
        ),
    ),
    "pyproject-socket": (
        "reads",
        Case(
            B,
            ConfigError,
            "pyproject.toml could not be read: it is a socket",
            files={"pyproject.toml": SOCKET},
        ),
    ),
    # pyproject-metadata reads the readme and a license file whole: through the bounded reader
    # first (a 3 GB readme was a MemoryError traceback, a FIFO 'Readme file not found').
    "pyproject-readme-huge": (
        "reads",
        Case(
            B,
            ConfigError,
            "R.md could not be read: it is 17 MiB, above the cap",
            files={"pyproject.toml": PROJECT + 'readme = "R.md"\n', "R.md": Sparse(17 * MiB)},
        ),
    ),
    "pyproject-readme-fifo": (
        "reads",
        Case(
            B,
            ConfigError,
            "R.md could not be read: it is a FIFO",
            files={
                "pyproject.toml": PROJECT
                + 'readme = {file = "R.md", content-type = "text/markdown"}\n',
                "R.md": FIFO,
            },
        ),
    ),
    "pyproject-license-file-device": (
        "reads",
        Case(
            B,
            ConfigError,
            "L.txt could not be read: it is a character device",
            files={
                "pyproject.toml": PROJECT + 'license = {file = "L.txt"}\n',
                "L.txt": Link("/dev/zero"),
            },
        ),
    ),
    # Every file of a header library's include folder is hashed: a 100 GB one took minutes.
    "header-library-file-huge": (
        "reads",
        Case(
            B,
            ConfigError,
            "big.h is 300 MiB, in the include folder of a header library",
            matrix=GOOD_MATRIX
            + "header-libraries:\n  - name: hl\n    path: hl\n    version: '1.0'\n",
            files={"hl/include/a.h": "#pragma once\n", "hl/include/big.h": Sparse(300 * MiB)},
        ),
    ),
    # A source that is not a regular file: the compiler would wait on a FIFO for the build's
    # whole deadline, or read a device forever.
    "source-fifo": (
        "reads",
        Case(
            B,
            ConfigError,
            "'csrc/*.cu' matches evil.cu, which is a FIFO (named pipe); sources must be regular",
            files={"csrc/evil.cu": FIFO},
        ),
    ),
    "source-link-to-dev-zero": (
        "reads",
        Case(
            B,
            ConfigError,
            "'csrc/*.cu' matches zero.cu, which is a character device",
            files={"csrc/zero.cu": Link("/dev/zero")},
        ),
    ),
    "source-dangling-link": (
        "reads",
        Case(
            B,
            ConfigError,
            "'csrc/*.cu' matches gone.cu, which is unreadable (No such file or directory)",
            files={"csrc/gone.cu": Link("{root}/nowhere.cu")},
        ),
    ),
    "init-setup-folder": (
        "reads",
        Case(
            ("init", "--no-run", "{root}/proj"),
            ConfigError,
            "setup.py could not be read: it is a folder",
            files={"proj/setup.py/": 0o755},
        ),
    ),
    "init-setup-urandom": (
        "reads",
        Case(
            ("init", "--no-run", "{root}/proj"),
            ConfigError,
            "setup.py could not be read: it is a character device",
            files={"proj/setup.py": Link("/dev/urandom")},
        ),
    ),
    "init-setup-huge": (
        "reads",
        Case(
            ("init", "--no-run", "{root}/proj"),
            ConfigError,
            "setup.py could not be read: it is 17 MiB, above the cap",
            files={"proj/setup.py": Sparse(17 * MiB)},
        ),
    ),
    "init-setup-link-loop": (
        "reads",
        Case(
            ("init", "--no-run", "{root}/proj"),
            ConfigError,
            "setup.py could not be read: Too many levels of symbolic links",
            files={"proj/setup.py": Link("{root}/proj/setup.py")},
        ),
    ),
    "init-setup-socket": (
        "reads",
        Case(
            ("init", "--no-run", "{root}/proj"),
            ConfigError,
            "setup.py could not be read: it is a socket",
            files={"proj/setup.py": SOCKET},
        ),
    ),
    # init runs setup.py by default: one Python cannot parse is refused before any child runs
    # (the child's traceback said '<frozen runpy> failed at line 259').
    "init-run-setup-syntax": (
        "reads",
        Case(
            ("init", "{root}/proj"),
            ConfigError,
            "setup.py:1: not valid Python ('(' was never closed)",
            files={"proj/setup.py": "setup(\n"},
        ),
    ),
    "init-run-setup-nul": (
        "reads",
        Case(
            ("init", "{root}/proj"),
            ConfigError,
            "setup.py: not valid Python (source code string cannot contain null bytes)",
            files={"proj/setup.py": b"setup()\0\n"},
        ),
    ),
    # --- writes: --report checked before the build, never read, never renamed over a stream --
    "report-folder": (
        "writes",
        Case((*B, "--report", "{root}/csrc"), USAGE, "File '{root}/csrc' is a directory"),
    ),
    "report-dev-zero": (
        "writes",
        Case(
            (*B, "--report", "/dev/zero"), ConfigError, "--report /dev/zero is a character device"
        ),
    ),
    "report-socket": (
        "writes",
        Case(
            (*B, "--report", "{root}/r.sock"),
            ConfigError,
            "--report {root}/r.sock is a socket",
            files={"r.sock": SOCKET},
        ),
    ),
    "report-link-to-dev-full": (
        "writes",
        Case(
            (*B, "--report", "{root}/r.json"),
            ConfigError,
            "--report {root}/r.json is a character device",
            files={"r.json": Link("/dev/full")},
        ),
    ),
    "report-proc-self-status": (
        "writes",
        Case(
            (*B, "--report", "/proc/self/status"),
            ConfigError,
            "--report /proc/self/status is a file of the kernel",
        ),
    ),
    "report-link-loop": (
        "writes",
        Case(
            (*B, "--report", "{root}/r.json"),
            ConfigError,
            "--report {root}/r.json: cannot be examined: Too many levels of symbolic links",
            files={"r.json": Link("{root}/r.json")},
        ),
    ),
    # $GITHUB_STEP_SUMMARY is appended to, never read or replaced: a file of the kernel, a
    # folder, a link loop leave the build's own error the one line.
    "step-summary-kernel-file": (
        "writes",
        Case(
            (*B, "--archs", "sm_80", "--ci", "github"),
            ConfigError,
            "'sm_80' is not a CUDA arch",
            env={"GITHUB_STEP_SUMMARY": "/proc/version"},
        ),
    ),
    "step-summary-folder": (
        "writes",
        Case(
            (*B, "--archs", "sm_80", "--ci", "github"),
            ConfigError,
            "'sm_80' is not a CUDA arch",
            env={"GITHUB_STEP_SUMMARY": "{root}/csrc"},
        ),
    ),
    "step-summary-link-loop": (
        "writes",
        Case(
            (*B, "--archs", "sm_80", "--ci", "github"),
            ConfigError,
            "'sm_80' is not a CUDA arch",
            env={"GITHUB_STEP_SUMMARY": "{root}/s.md"},
            files={"s.md": Link("{root}/s.md")},
        ),
    ),
    # --- integers: ASCII digits only, bounded, in one place ----------------------------------
    "max-jobs-underscore": (
        "integers",
        Case(B, ConfigError, "MAX_JOBS='1_0'", env={"MAX_JOBS": "1_0"}),
    ),
    "max-jobs-plus-sign": (
        "integers",
        Case(B, ConfigError, "MAX_JOBS='+4'", env={"MAX_JOBS": "+4"}),
    ),
    "max-jobs-above-the-bound": (
        "integers",
        Case(B, ConfigError, "MAX_JOBS='4097'", env={"MAX_JOBS": "4097"}),
    ),
    "max-jobs-two-numbers": (
        "integers",
        Case(B, ConfigError, "MAX_JOBS='4 4'", env={"MAX_JOBS": "4 4"}),
    ),
    "nvcc-threads-underscore": (
        "integers",
        Case(B, ConfigError, "NVCC_THREADS='1_6'", env={"NVCC_THREADS": "1_6"}),
    ),
    "sde-underscore": (
        "integers",
        Case(
            B,
            ConfigError,
            "SOURCE_DATE_EPOCH='1_700_000_000'",
            env={"SOURCE_DATE_EPOCH": "1_700_000_000"},
        ),
    ),
    "sde-plus-sign": (
        "integers",
        Case(
            B,
            ConfigError,
            "SOURCE_DATE_EPOCH='+1700000000'",
            env={"SOURCE_DATE_EPOCH": "+1700000000"},
        ),
    ),
    # A zip's dates end in 2107: 2108 was a struct.error when the wheel was packed.
    "sde-beyond-the-zip-format": (
        "integers",
        Case(
            B,
            ConfigError,
            "SOURCE_DATE_EPOCH='4354819200' must be whole seconds since 1970, before 2108",
            env={"SOURCE_DATE_EPOCH": "4354819200"},
        ),
    ),
    "member-cap-zero": (
        "integers",
        Case(
            ("inspect", "{root}/" + WHEEL),
            ConfigError,
            "WHEELFORGE_MAX_MEMBER_BYTES='0'",
            env={"WHEELFORGE_MAX_MEMBER_BYTES": "0"},
            files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF))},
        ),
    ),
    "ratio-cap-inf": (
        "integers",
        Case(
            ("check", "{root}/" + WHEEL),
            ConfigError,
            "WHEELFORGE_MAX_RATIO='inf'",
            env={"WHEELFORGE_MAX_RATIO": "inf"},
            files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF))},
        ),
    ),
    "jobs-underscore": ("integers", Case((*B, "-j", "1_0"), USAGE, "'1_0' is not a valid")),
    "jobs-above-the-bound": ("integers", Case((*B, "-j", "5000"), USAGE, "'5000' is not a valid")),
    "size-budget-inf": (
        "integers",
        Case((*B, "--size-budget", "infMiB"), ConfigError, "--size-budget: 'infMiB'"),
    ),
    "size-budget-nan": (
        "integers",
        Case((*B, "--size-budget", "nanMiB"), ConfigError, "--size-budget: 'nanMiB'"),
    ),
    "size-budget-exponent": (
        "integers",
        Case((*B, "--size-budget", "1e999MiB"), ConfigError, "--size-budget: '1e999MiB'"),
    ),
    "size-budget-negative": (
        "integers",
        Case((*B, "--size-budget", "-5MiB"), ConfigError, "--size-budget: '-5MiB'"),
    ),
    "size-budget-underscore": (
        "integers",
        Case((*B, "--size-budget", "1_0MiB"), ConfigError, "--size-budget: '1_0MiB'"),
    ),
    "matrix-size-budget-inf": (
        "integers",
        Case(
            B,
            ConfigError,
            "size-budget: 'infMiB' is not a size",
            matrix=GOOD_MATRIX + "size-budget: infMiB\n",
        ),
    ),
    "matrix-size-budget-negative": (
        "integers",
        Case(B, ConfigError, "size-budget", matrix=GOOD_MATRIX + "size-budget: -1MiB\n"),
    ),
    "matrix-size-budget-exponent": (
        "integers",
        Case(B, ConfigError, "size-budget", matrix=GOOD_MATRIX + "size-budget: 1e999MiB\n"),
    ),
    "matrix-python-abi-huge": (
        "integers",
        Case(
            B, ConfigError, "python-abi", matrix=GOOD_MATRIX + "python-abi: cp3" + "1" * 5000 + "\n"
        ),
    ),
    "target-underscore": (
        "integers",
        Case(
            ("check", "--target", "2.1_0", "{root}/x.so"),
            USAGE,
            "'2.1_0' is not a torch version",
            files={"x.so": ELF},
        ),
    ),
    "archs-underscore": (
        "integers",
        Case((*B, "--archs", "1_0.0"), ConfigError, "'1_0.0' is not a CUDA arch"),
    ),
    "archs-plus-sign": (
        "integers",
        Case((*B, "--archs", "+8.0"), ConfigError, "'+8.0' is not a CUDA arch"),
    ),
    "cuda-underscore": (
        "integers",
        Case(
            B,
            ConfigError,
            "is neither 'auto' nor a CUDA release",
            matrix=GOOD_MATRIX + "cuda: ['1_3.0']\n",
        ),
    ),
    "unused-for-underscore": (
        "integers",
        Case(("cache", "prune", "--unused-for", "3_0"), USAGE, "'3_0' is not a valid"),
    ),
    "toolkit-install-underscore": (
        "integers",
        Case(("toolkit", "install", "1_3.0"), ConfigError, "'1_3.0' is a malformed CUDA release"),
    ),
    "python-abi-underscore": (
        "integers",
        Case(
            ("check", "--target", "2.10", "--python-abi", "cp3_10", "{root}/x.so"),
            USAGE,
            "'cp3_10' is not like cp310",
            files={"x.so": ELF},
        ),
    ),
    # --- record: check holds a wheel to its RECORD -------------------------------------------
    "record-wrong-size": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "'demo/x.py'",
            files={
                WHEEL: lambda: _with_record(
                    record_row(METADATA)
                    + record_row(X_PY).replace(",6\n", ",7\n")
                    + "demo-1.0.dist-info/RECORD,,\n"
                )
            },
        ),
    ),
    "record-bad-csv": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "RECORD",
            files={WHEEL: lambda: _with_record(_true_rows() + '"demo/y.py,sha256=abc,1\n')},
        ),
    ),
    "record-not-base64": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "'demo/x.py'",
            files={
                WHEEL: lambda: _with_record(
                    record_row(METADATA) + "demo/x.py,sha256=!!!,6\ndemo-1.0.dist-info/RECORD,,\n"
                )
            },
        ),
    ),
    "record-not-utf8": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "RECORD",
            files={
                WHEEL: lambda: wheel(
                    METADATA, X_PY, ("demo-1.0.dist-info/RECORD", b"demo/x.py,\xff,6\n")
                )
            },
        ),
    ),
    "record-absolute-row": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "/etc/passwd",
            files={WHEEL: lambda: _with_record(_true_rows() + "/etc/passwd,sha256=abc,1\n")},
        ),
    ),
    "record-size-not-a-number": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "'demo/x.py'",
            files={
                WHEEL: lambda: _with_record(
                    record_row(METADATA)
                    + record_row(X_PY).replace(",6\n", ",٦\n")
                    + "demo-1.0.dist-info/RECORD,,\n"
                )
            },
        ),
    ),
    "record-size-huge": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "'demo/x.py'",
            files={
                WHEEL: lambda: _with_record(
                    record_row(METADATA)
                    + record_row(X_PY).replace(",6\n", "," + "9" * 5000 + "\n")
                    + "demo-1.0.dist-info/RECORD,,\n"
                )
            },
        ),
    ),
    "record-field-huge": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "its RECORD is not CSV an installer reads (field larger than field limit",
            files={WHEEL: lambda: _with_record(_true_rows() + "a" * 200_000 + ",sha256=abc,1\n")},
        ),
    ),
    "record-two-dist-infos": (
        "record",
        Case(
            ("check", "{root}/" + WHEEL),
            VerificationError,
            "has 2 .dist-info folders (demo-1.0.dist-info, other-2.0.dist-info)",
            files={
                WHEEL: lambda: recorded(
                    METADATA, X_PY, ("other-2.0.dist-info/METADATA", "Name: other\nVersion: 2.0\n")
                )
            },
        ),
    ),
    # --- folders: --out, --build-dir, --cache-dir --------------------------------------------
    "out-link-loop": (
        "folders",
        Case(
            (*B, "--out", "{root}/o"),
            EnvironmentProblem,
            "--out {root}/o",
            files={"o": Link("{root}/o")},
        ),
    ),
    "out-socket": (
        "folders",
        Case((*B, "--out", "{root}/o"), EnvironmentProblem, "--out {root}/o", files={"o": SOCKET}),
    ),
    "build-dir-link-to-dev-null": (
        "folders",
        Case(
            (*B, "--build-dir", "{root}/bd"),
            EnvironmentProblem,
            "--build-dir /dev/null is a character device, not a folder",
            files={"bd": Link("/dev/null")},
        ),
    ),
    "cache-dir-fifo": (
        "folders",
        Case(
            (*B, "--cache-dir", "{root}/c"),
            USAGE,
            "{root}/c is a FIFO (named pipe), not a folder",
            files={"c": FIFO},
        ),
    ),
    "cache-dir-link-to-a-file": (
        "folders",
        Case(
            (*B, "--cache-dir", "{root}/c"),
            USAGE,
            "{root}/c is a file, not a folder",
            files={"c": Link("{root}/csrc/ops.cpp")},
        ),
    ),
    "inspect-socket": (
        "reads",
        Case(("inspect", "{root}/s"), ConfigError, "is a socket", files={"s": SOCKET}),
    ),
    "check-link-to-dev-zero": (
        "reads",
        Case(TARGET, ConfigError, "character device", files={"x.so": Link("/dev/zero")}),
    ),
}


def test_the_round_is_large_enough() -> None:
    assert len(ROUND) + terminal_cases() >= 40


@pytest.mark.parametrize("name", list(ROUND))
def test_hostile_input_is_one_line_and_the_right_exit_code(
    name: str,
    project: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_case(ROUND[name][1], project, tmp_path, monkeypatch, capsys)


# --- terminal: names from a wheel reach the terminal as text (log.printable) -----------------
# C1 controls (0x9b is CSI to a terminal that reads 8-bit controls), DEL, the bidirectional
# overrides that reorder what is shown (Trojan Source), a carriage return that overwrites.
TERMINAL = {
    "c1-csi": "demo/\x9b31mred.abi3.so",
    "del": "demo/a\x7fb.abi3.so",
    "bidi-override": "demo/\u202eos.3iba.x",
    "bidi-isolate": "demo/\u2066x\u2069.abi3.so",
    "carriage-return": "demo/ok.abi3.so\rgood",
    "backspaces": "demo/evil" + "\b" * 4 + "good.abi3.so",
}


@pytest.mark.parametrize("command", ["inspect", "check"])
@pytest.mark.parametrize("name", list(TERMINAL))
def test_control_and_bidi_characters_in_member_names_are_shown_escaped(
    command: str,
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    member = TERMINAL[name]
    shown = shown_member(command, member, tmp_path, monkeypatch, capsys)
    raw = [c for c in member if not c.isprintable()]
    assert raw and not [c for c in raw if c in shown], shown


# A classic (one-CPython) wheel's table has its own row (no floor columns); a 60,000-character
# member name (a zip allows 65,535) was printed whole, three times on one line of `check`.
CLASSIC_WHEEL = "demo-1.0-cp311-cp311-linux_x86_64.whl"
MORE_NAMES = {
    "classic-escape": (CLASSIC_WHEEL, "demo/\x1b[2J\x1b[31mred.cpython-311-x86_64-linux-gnu.so"),
    "classic-markup": (CLASSIC_WHEEL, "demo/[/]x[bold].cpython-311-x86_64-linux-gnu.so"),
    "huge-name": (WHEEL, "demo/" + "a" * 60_000 + ".abi3.so"),
}


@pytest.mark.parametrize("command", ["inspect", "check"])
@pytest.mark.parametrize("name", list(MORE_NAMES))
def test_member_names_of_classic_wheels_and_huge_names_are_shown_as_short_text(
    command: str,
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wheel_name, member = MORE_NAMES[name]
    monkeypatch.setenv("COLUMNS", "100")
    # --abi unstable: judged as a classic extension, whose table row has no floor columns.
    classic = ("--abi", "unstable") if command == "check" and wheel_name == CLASSIC_WHEEL else ()
    shown = shown_member(
        command, member, tmp_path, monkeypatch, capsys, wheel_name=wheel_name, options=classic
    )
    assert "\x1b" not in shown
    assert max(len(line) for line in shown.splitlines()) < 3000
    assert len(shown.splitlines()) < 100  # a name folded over the table: 1,442 lines


# Folder names in the cache are names from files too: `cache list` showed them raw.
CACHE_NAMES = {
    "cache-env-escape": "envs/torch-x\x1b[31mred",
    "cache-toolkit-escape": "toolkits/cuda\x1b[2J",
    "cache-env-markup": "envs/x[bold]y[/bold]",
}


@pytest.mark.parametrize("name", list(CACHE_NAMES))
def test_cache_folder_names_are_shown_as_text(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wheelforge.cli.app import main

    (tmp_path / "c" / CACHE_NAMES[name]).mkdir(parents=True)
    assert main(["cache", "list", "--cache-dir", str(tmp_path / "c")]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "Traceback" not in out + err
    assert CACHE_NAMES[name].split("/")[1].replace("\x1b", "\\x1b") in " ".join(out.split())


def terminal_cases() -> int:
    """How many name cases this module runs (each member name through inspect and check)."""
    # and a toolkit folder (toolkit list), a dry run's commands
    return 2 * (len(TERMINAL) + len(MORE_NAMES)) + len(CACHE_NAMES) + 2


def test_every_class_is_counted() -> None:
    classes = {klass for klass, _ in ROUND.values()}
    assert classes == {"reads", "writes", "integers", "record", "folders"}


def test_docs_robustness_counts_are_current() -> None:
    """docs/robustness.md's hostile-inputs section is what tools/robustness_table.py makes of the
    recorded runs and of this round (a case added here needs the section made again)."""
    import importlib.util

    tool = Path(__file__).resolve().parents[2] / "tools" / "robustness_table.py"
    spec = importlib.util.spec_from_file_location("robustness_table", tool)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = module.section(module._load(module.BEFORE), module._load(module.AFTER))
    assert made in module.DOC.read_text(encoding="utf-8"), "run: python tools/robustness_table.py"


def test_a_toolkit_folder_of_escapes_and_markup_is_shown_as_text() -> None:
    """`toolkit list` shows where each toolkit was found ($CUDA_HOME, the PATH): a folder
    named with ESC or markup in it is text (it was markup parsed, and the ESC raw)."""
    import dataclasses
    import io

    from rich.console import Console

    from tests.unit import fakes
    from wheelforge.cli.toolkit_screen import print_toolkits
    from wheelforge.toolchain import provision

    odd = Path("/opt/cuda\x1b[2J[/]x[bold]")
    found = dataclasses.replace(fakes.toolkit(), root=odd, nvcc=odd / "bin" / "nvcc")
    console = Console(file=io.StringIO(), width=200)
    print_toolkits([found], provision.not_found([found]), console)
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b" not in shown and "\\x1b[2J[/]x[bold]" in shown


def test_a_dry_runs_commands_show_the_projects_file_names_as_text() -> None:
    """A source named with ESC (a glob of the project's folder matched it) reached the terminal
    raw in `build --dry-run`'s commands; '[/]' in a toolkit's folder was markup."""
    import io

    from rich.console import Console

    from wheelforge.build.dryrun import PlannedVariant
    from wheelforge.cli.build_screen import print_dry_run

    planned = PlannedVariant(
        variant_id="sm80-cu130",
        arch_set="default",
        archs="8.0",
        toolkit="CUDA 13.0 at /opt/cuda[/]x",
        torch=None,
        commands=("nvcc -c csrc/\x1b[2Jk.cu -o k.o",),
        note="",
    )
    console = Console(file=io.StringIO(), width=200)
    print_dry_run([planned], console)
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b" not in shown and "csrc/\\x1b[2Jk.cu" in shown and "/opt/cuda[/]x" in shown
