"""Hostile cases against a wheelforge executable (issue 21's list, then a round of new ones):
each runs in a throwaway folder of its own under ROOT, with a throwaway --cache-dir, a time
limit and a memory limit (ulimit -v), and is judged clean, unclear or bad.

    python tools/hostile.py WHEELFORGE ROOT [--project DIR] [--only NAME ...] [--json OUT]
    python tools/hostile.py --table BEFORE.json AFTER.json   # the markdown table of two runs

WHEELFORGE is the executable to try (a checkout's .venv/bin/wheelforge); ROOT a scratch folder
(it is filled, never cleaned); DIR a copy of the kernels payload (kernels/ and matrix.yaml) for
the cases that build (default: the repository's, copied). Nothing outside ROOT is written or
removed: targets that stand for /etc/shadow or /dev/stdout are files and links made in ROOT.

clean: the outcome a user needs (one error line naming the thing and exit code of its class, or
a success that is one); unclear: no harm, but the line misleads or the code is wrong; bad: a
traceback, a hang or memory blow-up, harm outside wheelforge's folders, a wrong success.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEMORY_KB = 4_000_000  # ulimit -v: a reader that never ends stops here, not in the OOM killer
BUILD = ("--archs", "8.0", "--no-import-check")
SUMMARY = "  summary: silu/gelu-and-mul and RMSNorm kernels for PyTorch, on the stable ABI"


@dataclass
class Run:
    rc: int  # 124: the time limit; 137: killed (memory)
    out: str
    err: str
    box: Path
    seconds: float

    @property
    def errors(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.startswith("error:")]

    @property
    def line(self) -> str:
        """The one line a user reads: the error line, else the last line of stderr."""
        lines = self.errors or [ln for ln in self.err.splitlines() if ln.strip()] or [""]
        return lines[-1][:200]

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.err + self.out


Judge = Callable[[Run], tuple[str, str]]


@dataclass
class Case:
    name: str
    group: str  # "issue" (issue 21's list) or "new" (this round)
    what: str
    argv: Callable[[Path], list[str]]  # given the case's folder
    judge: Judge
    setup: Callable[[Path], None] = lambda _box: None
    env: dict[str, str] = field(default_factory=dict)
    timeout: int = 90
    builds: bool = False


def refused(needle: str, code: int) -> Judge:
    """Clean: exit *code*, exactly one error line holding *needle*, no traceback."""

    def judge(r: Run) -> tuple[str, str]:
        if r.traceback or r.rc in (124, 137) or r.rc == 0:
            return "bad", "traceback" if r.traceback else "hang/killed" if r.rc else "exit 0"
        if len(r.errors) == 1 and needle in r.errors[0] and r.rc == code:
            return "clean", ""
        return "unclear", f"exit {r.rc}; wanted {code} and {needle!r}"

    return judge


def succeeds(check: Callable[[Run], str | None] = lambda _r: None) -> Judge:
    """Clean: exit 0 and *check* (what else must hold) finds nothing wrong."""

    def judge(r: Run) -> tuple[str, str]:
        if r.traceback or r.rc in (124, 137):
            return "bad", "traceback" if r.traceback else "hang/killed"
        if r.rc != 0:
            return "unclear", f"exit {r.rc}: {r.line}"
        problem = check(r)
        return ("bad", problem) if problem else ("clean", "")

    return judge


def either(*judges: Judge) -> Judge:
    def judge(r: Run) -> tuple[str, str]:
        verdicts = [j(r) for j in judges]
        return next((v for v in verdicts if v[0] == "clean"), verdicts[-1])

    return judge


def short_lines(then: Judge) -> Judge:
    """Bad whenever a line of the output is over 1,000 characters (a file's content printed)."""

    def judge(r: Run) -> tuple[str, str]:
        if max(map(len, (r.err + r.out).splitlines() or [""])) > 1000:
            return "bad", "a line of over 1,000 characters"
        return then(r)

    return judge


def unharmed(paths: Callable[[Path], list[Path]], then: Judge) -> Judge:
    """Bad whenever something outside wheelforge's folders (*paths*: what must stay) changed."""

    def judge(r: Run) -> tuple[str, str]:
        for p in paths(r.box):
            if not p.exists() and not p.is_symlink():
                return "bad", f"{p.relative_to(r.box)} was removed"
        return then(r)

    return judge


# -- fixtures ---------------------------------------------------------------------------------
PROJECT: Path = REPO


def project(box: Path, matrix_edit: Callable[[str], str] = lambda t: t) -> Path:
    dest = box / "proj"
    shutil.copytree(
        PROJECT / "kernels", dest / "kernels", ignore=shutil.ignore_patterns("__pycache__")
    )
    text = (PROJECT / "matrix.yaml").read_text()
    (dest / "matrix.yaml").write_text(matrix_edit(text))
    return dest


def fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def tool(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def wheel(path: Path, members: dict[str, bytes | str], record: bool = True) -> Path:
    import base64
    import hashlib

    rows = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            blob = data.encode() if isinstance(data, str) else data
            zf.writestr(name, blob)
            digest = base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={digest},{len(blob)}\n")
        if record:
            zf.writestr(
                "demo-1.0.dist-info/RECORD", "".join(rows) + "demo-1.0.dist-info/RECORD,,\n"
            )
    return path


ELF = (REPO / "tests" / "data" / "abicheck" / "ext.so").read_bytes()
WHEEL = "demo-1.0-cp310-abi3-manylinux_2_17_x86_64.whl"
META = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: torch>=2.10\n"


def cache(box: Path) -> list[str]:
    return ["--cache-dir", str(box / "cache")]


def matrix(box: Path) -> list[str]:
    return ["--matrix", str(box / "proj" / "matrix.yaml")]


def build(box: Path, *extra: str) -> list[str]:
    return ["build", *matrix(box), *BUILD, *cache(box), *extra]


def _elsewhere(box: Path) -> None:
    (box / "elsewhere" / "project" / "src").mkdir(parents=True)
    (box / "elsewhere" / "project" / "src" / "main.c").write_text("int main(){}\n")
    (box / "elsewhere" / "notes.txt").write_text("keep me\n")


def _kept(box: Path) -> list[Path]:
    return [box / "elsewhere" / "notes.txt", box / "elsewhere" / "project" / "src" / "main.c"]


def _cache_with(link: str) -> Callable[[Path], None]:
    def setup(box: Path) -> None:
        _elsewhere(box)
        target = box / "cache" / link
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(box / "elsewhere")

    return setup


def _metadata_of(r: Run) -> str | None:
    wheels = sorted((r.box / "proj" / "dist").glob("*.whl"))
    if not wheels:
        return "no wheel"
    with zipfile.ZipFile(wheels[0]) as zf:
        text = zf.read(next(n for n in zf.namelist() if n.endswith("METADATA"))).decode()
    from email.parser import Parser

    msg = Parser().parsestr(text)
    return (
        None
        if msg.get_all("Requires-Dist") and msg["Requires-Python"]
        else "METADATA lost Requires-Dist"
    )


def _no_secret_packed(r: Run) -> str | None:
    for w in (r.box / "proj" / "dist").glob("*.whl"):
        with zipfile.ZipFile(w) as zf:
            if any(b"TOP SECRET" in zf.read(n) for n in zf.namelist()):
                return "the secret file is in the wheel"
    return None


def _project_link(name: str, pattern: str | None) -> Callable[[Path], None]:
    def setup(box: Path) -> None:
        edit = (
            (lambda t: t.replace("  packages:", f"  package-data: ['{pattern}']\n  packages:"))
            if pattern
            else (lambda t: t)
        )
        proj = project(box, edit)
        (box / "secret.txt").write_text("TOP SECRET\n")
        (proj / "kernels" / "wheelforge_kernels" / name).symlink_to(box / "secret.txt")

    return setup


def _null_device(box: Path) -> None:
    """A project and a throwaway character device 1:3 (what /dev/null is) in the case's folder:
    a wheelforge that renames over its target replaces this one, never the system's."""
    import stat

    project(box)
    os.mknod(box / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))


def _stdout_link(box: Path) -> None:
    project(box)
    (box / "stdout").symlink_to("/proc/self/fd/1")


def _link_kept(r: Run) -> str | None:
    return None if (r.box / "stdout").is_symlink() else "the stdout link was replaced by a file"


def _two_builds(box: Path) -> None:
    project(box)
    wf = os.environ["WF_UNDER_TEST"]
    subprocess.run([wf, *build(box)], capture_output=True, timeout=900, check=False)


def _failed_build(box: Path) -> None:
    proj = project(box)
    (proj / "matrix.yaml").write_text(
        (proj / "matrix.yaml")
        .read_text()
        .replace('  torch: ["2.13.0", "2.14.1"]', '  torch: ["2.13.0"]')
    )
    wf = os.environ["WF_UNDER_TEST"]
    subprocess.run([wf, *build(box)], capture_output=True, timeout=900, check=False)
    (proj / "kernels" / "csrc" / "ops.cpp").write_text("#error broken on purpose\n")
    subprocess.run([wf, *build(box)], capture_output=True, timeout=900, check=False)


def _nvcc(box: Path, body: str) -> None:
    project(box)
    tool(box / "cuda" / "bin" / "nvcc", body)


def _record_wheel(kind: str) -> Callable[[Path], None]:
    def setup(box: Path) -> None:
        members = {"demo-1.0.dist-info/METADATA": META, "demo/x.py": "x = 1\n"}
        if kind == "missing":
            wheel(box / WHEEL, members, record=False)
        elif kind == "hash":
            wheel(box / WHEEL, members)
            data = {
                n: zipfile.ZipFile(box / WHEEL).read(n)
                for n in zipfile.ZipFile(box / WHEEL).namelist()
            }
            data["demo/x.py"] = b"import os\n"
            with zipfile.ZipFile(box / WHEEL, "w") as zf:
                for n, b in data.items():
                    zf.writestr(n, b)
        elif kind == "unlisted":
            wheel(box / WHEEL, members)
            with zipfile.ZipFile(box / WHEEL, "a") as zf:
                zf.writestr("demo/extra.py", "")
        else:  # duplicate
            import warnings

            wheel(box / WHEEL, members)
            with warnings.catch_warnings(), zipfile.ZipFile(box / WHEEL, "a") as zf:
                warnings.simplefilter("ignore")
                zf.writestr("demo/x.py", "y = 2\n")

    return setup


def _with_record_line(path: Path, line: str) -> None:
    """A whole wheel whose RECORD then lists one more file (*line*)."""
    wheel(path, {"demo-1.0.dist-info/METADATA": META})
    with zipfile.ZipFile(path) as zf:
        data = {n: zf.read(n) for n in zf.namelist()}
    data["demo-1.0.dist-info/RECORD"] += line.encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, blob in data.items():
            zf.writestr(name, blob)


def _readme_project(box: Path, make: Callable[[Path], object]) -> None:
    """The project with a pyproject.toml whose [project] readme is R.md, made by *make*."""
    proj = project(box, lambda t: t.replace("pyproject: false", "pyproject: p.toml"))
    (proj / "p.toml").write_text(
        '[project]\nname = "wheelforge-kernels"\nversion = "0.1.0"\nreadme = "R.md"\n'
    )
    make(proj / "R.md")


def _huge_matrix(box: Path) -> None:
    """matrix.yaml with arch sets enough for 62 MB: each one a few YAML nodes in memory."""
    proj = project(box)
    head = (proj / "matrix.yaml").read_text().split("arch-sets:")[0]
    with (proj / "matrix.yaml").open("w") as f:
        f.write(head + "arch-sets:\n")
        f.writelines(f"  s{i}: '8.0 9.0'\n" for i in range(3_000_000))


def _verneed_so(box: Path) -> None:
    sys.path.insert(0, str(REPO))
    from tests.unit.test_abicheck import _elf_with_version_needs

    (box / "x.so").write_bytes(_elf_with_version_needs(1000, 4096))


def _probe_entry(value: str) -> Callable[[Path], None]:
    def setup(box: Path) -> None:
        project(box)
        wf = os.environ["WF_UNDER_TEST"]
        subprocess.run(
            [wf, "matrix", *matrix(box), *cache(box)], capture_output=True, timeout=300, check=False
        )
        for entry in (box / "cache" / "probes").rglob("*.json"):
            if entry.parent.name == "nvcc":
                entry.unlink()
                if value == "FIFO":
                    os.mkfifo(entry)
                else:
                    entry.write_text(value)

    return setup


def _marker(value: str) -> Callable[[Path], None]:
    def setup(box: Path) -> None:
        project(box)
        for key in ("torch-2.13.0-0000000000",):
            folder = box / "cache" / "envs" / key
            folder.mkdir(parents=True)
            (folder / "wheelforge-env.json").write_text(value)

    return setup


def _kept_repair_truncated(box: Path) -> None:
    project(box)
    wf = os.environ["WF_UNDER_TEST"]
    subprocess.run([wf, *build(box)], capture_output=True, timeout=900, check=False)
    for hit in (box / "cache" / "repairs").glob("*/*.whl"):
        hit.write_bytes(hit.read_bytes()[:1000])
    shutil.rmtree(box / "proj" / "dist", ignore_errors=True)
    shutil.rmtree(box / "proj" / "build", ignore_errors=True)


def _setup_py(text: bytes | None, kind: str = "file") -> Callable[[Path], None]:
    def setup(box: Path) -> None:
        (box / "p").mkdir()
        if kind == "fifo":
            os.mkfifo(box / "p" / "setup.py")
        elif kind == "zero":
            (box / "p" / "setup.py").symlink_to("/dev/zero")
        else:
            (box / "p" / "setup.py").write_bytes(text or b"")
        (box / "p" / "k.cu").write_text("// the source _CUDA_SETUP names\n")

    return setup


_CUDA_SETUP = (
    b"from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
    b"setup(name='x', version='1', ext_modules=[CUDAExtension('x._C', ['k.cu'])])\n"
)


def _killed_pack(box: Path) -> None:
    """A build SIGKILLed while it packs (auditwheel is slowed by a launcher of our own)."""
    proj = project(box)
    wf = os.environ["WF_UNDER_TEST"]
    subprocess.run([wf, *build(box)], capture_output=True, timeout=900, check=False)
    (proj / "kernels" / "wheelforge_kernels" / "__init__.py").write_text("# changed\n")
    stage = proj / "build" / "wheelforge" / "sm80-cu130"
    dist = proj / "dist"
    (stage / "stage-999999-left").mkdir(parents=True, exist_ok=True)
    (stage / "stage-999999-left" / "raw.whl").write_bytes(b"x" * 4096)
    (dist / ".x.whl.999999-abcd.part").write_bytes(b"x")
    (dist / ".y.whl.abcdefgh.part").write_bytes(b"x")
    os.utime(dist / ".y.whl.abcdefgh.part", (0, 0))


def _leftovers_gone(r: Run) -> str | None:
    left = [*r.box.glob("proj/build/wheelforge/*/stage-*"), *r.box.glob("proj/dist/.*.part")]
    return f"{len(left)} leftovers remain" if left else None


def _same_name(box: Path) -> None:
    project(box)
    wf = os.environ["WF_UNDER_TEST"]
    subprocess.run(
        [wf, "build", *matrix(box), "--archs", "8.0", "--no-import-check", *cache(box)],
        capture_output=True,
        timeout=900,
        check=False,
    )


def _write_matrix(text: str | bytes) -> Callable[[Path], None]:
    def setup(box: Path) -> None:
        proj = project(box)
        data = text.encode() if isinstance(text, str) else text
        (proj / "matrix.yaml").write_bytes(data)

    return setup


def _edit(old: str, new: str) -> Callable[[Path], None]:
    return lambda box: project(box, lambda t: t.replace(old, new))


def _sock(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))


CASES: list[Case] = [
    # ===== issue 21's defects ===================================================================
    Case(
        "prune-probes-kind-symlink",
        "issue",
        "cache prune --all with probes/nvcc -> elsewhere/",
        lambda b: ["cache", "prune", "--all", *cache(b)],
        unharmed(_kept, succeeds()),
        _cache_with("probes/nvcc"),
    ),
    Case(
        "prune-envs-symlink",
        "issue",
        "cache prune --all with envs -> elsewhere/",
        lambda b: ["cache", "prune", "--all", *cache(b)],
        unharmed(
            _kept,
            succeeds(
                lambda r: (
                    "lock files written elsewhere"
                    if list((r.box / "elsewhere").glob(".*.lock"))
                    else None
                )
            ),
        ),
        _cache_with("envs"),
    ),
    Case(
        "pack-symlink-package-data",
        "issue",
        "notes.txt -> a secret file, matched by package-data",
        build,
        refused("is a symbolic link to", 2),
        _project_link("notes.txt", "*.txt"),
        timeout=900,
        builds=True,
    ),
    Case(
        "pack-symlink-module",
        "issue",
        "helpers.py -> a secret file",
        build,
        refused("is a symbolic link to", 2),
        _project_link("helpers.py", None),
        timeout=900,
        builds=True,
    ),
    Case(
        "report-dev-full",
        "issue",
        "--report /dev/full",
        lambda b: [*build(b), "--report", "/dev/full"],
        refused("/dev/full is a character device", 2),
        project,
        timeout=900,
        builds=True,
    ),
    Case(
        "report-stdout-link",
        "issue",
        "--report to a link to /proc/self/fd/1 (as /dev/stdout is)",
        lambda b: [*build(b), "--report", str(b / "stdout")],
        succeeds(_link_kept),
        _stdout_link,
        timeout=900,
        builds=True,
    ),
    Case(
        "report-fifo",
        "issue",
        "--report to a FIFO nobody reads",
        lambda b: [*build(b), "--report", str(b / "r.json")],
        refused("FIFO (named pipe) that nobody reads", 2),
        lambda b: (project(b), fifo(b / "r.json")),
        timeout=900,
        builds=True,
    ),
    Case(
        "report-proc-version",
        "issue",
        "--report /proc/version",
        lambda b: [*build(b), "--report", "/proc/version"],
        refused("/proc/version is a file of the kernel", 2),
        project,
        timeout=900,
        builds=True,
    ),
    Case(
        "metadata-multiline-summary",
        "issue",
        "a multi-line summary: in matrix.yaml",
        build,
        either(refused("package.summary must be one line", 2), succeeds(_metadata_of)),
        _edit(SUMMARY, '  summary: "x\\nRequires-Dist: evil"'),
        timeout=900,
        builds=True,
    ),
    Case(
        "metadata-multiline-license",
        "issue",
        "a multi-line license: in matrix.yaml",
        build,
        succeeds(_metadata_of),
        _edit("  license: Apache-2.0", '  license: "Apache-2.0\\n\\nCopyright x"'),
        timeout=900,
        builds=True,
    ),
    Case(
        "cuda-home-garbage",
        "issue",
        "$CUDA_HOME's nvcc prints garbage",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("CUDA_HOME=", 2),
        lambda b: _nvcc(b, "echo garbage"),
        env={"CUDA_HOME": "{box}/cuda"},
    ),
    Case(
        "cuda-home-segfault",
        "issue",
        "$CUDA_HOME's nvcc segfaults",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("CUDA_HOME=", 2),
        lambda b: _nvcc(b, "kill -SEGV $$"),
        env={"CUDA_HOME": "{box}/cuda"},
    ),
    Case(
        "cuda-home-silent",
        "issue",
        "$CUDA_HOME's nvcc prints nothing",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("CUDA_HOME=", 2),
        lambda b: _nvcc(b, "exit 0"),
        env={"CUDA_HOME": "{box}/cuda"},
    ),
    Case(
        "test-after-failed-build",
        "issue",
        "wheelforge test after a failed build",
        lambda b: ["test", *matrix(b), *cache(b), "--torch-from", sys.executable],
        refused("its last build failed", 4),
        _failed_build,
        timeout=1800,
        builds=True,
    ),
    Case(
        "same-name-second-build",
        "issue",
        "a second build with other --archs into the same --out",
        lambda b: ["build", *matrix(b), "--archs", "8.6", "--no-import-check", *cache(b)],
        refused("is the wheel variant sm80-cu130 published", 2),
        _same_name,
        timeout=1800,
        builds=True,
    ),
    Case(
        "check-record-hash",
        "issue",
        "check a wheel whose RECORD has a replaced file's hash",
        lambda b: ["check", str(b / WHEEL)],
        refused("does not have the sha256 RECORD gives it", 4),
        _record_wheel("hash"),
    ),
    Case(
        "check-record-missing",
        "issue",
        "check a wheel without RECORD",
        lambda b: ["check", str(b / WHEEL)],
        refused("has no NAME-VERSION.dist-info/RECORD", 4),
        _record_wheel("missing"),
    ),
    Case(
        "check-record-unlisted",
        "issue",
        "check a wheel with a member missing from RECORD",
        lambda b: ["check", str(b / WHEEL)],
        refused("is not in RECORD", 4),
        _record_wheel("unlisted"),
    ),
    Case(
        "check-record-duplicate",
        "issue",
        "check a wheel with duplicate member names",
        lambda b: ["check", str(b / WHEEL)],
        refused("appears more than once", 4),
        _record_wheel("duplicate"),
    ),
    Case(
        "matrix-dev-zero",
        "issue",
        "--matrix /dev/zero",
        lambda b: ["matrix", "--matrix", "/dev/zero", *cache(b)],
        refused("/dev/zero could not be read", 2),
    ),
    Case(
        "matrix-dev-urandom",
        "issue",
        "--matrix /dev/urandom",
        lambda b: ["matrix", "--matrix", "/dev/urandom", *cache(b)],
        refused("/dev/urandom could not be read", 2),
    ),
    Case(
        "matrix-fifo",
        "issue",
        "--matrix a FIFO",
        lambda b: ["matrix", "--matrix", str(b / "m.yaml"), *cache(b)],
        refused("is a FIFO", 2),
        lambda b: fifo(b / "m.yaml"),
    ),
    Case(
        "matrix-62mb",
        "issue",
        "a 62 MB matrix (3 million arch sets) under a 4 GB cap",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("above the cap", 2),
        _huge_matrix,
    ),
    Case(
        "pyproject-matrix-dev-zero",
        "issue",
        "[tool.wheelforge] matrix = '/dev/zero' (PEP 517 backend)",
        lambda _b: [
            sys.executable,
            "-c",
            "from wheelforge import build_meta; build_meta.prepare_metadata_for_build_wheel('meta')",
        ],
        refused("/dev/zero could not be read", 2),
        lambda b: (b / "pyproject.toml").write_text("[tool.wheelforge]\nmatrix = '/dev/zero'\n"),
    ),
    Case(
        "nvcc-hangs",
        "issue",
        "an nvcc that hangs on --version",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("did not finish within", 2),
        lambda b: _nvcc(b, "exec sleep 3600"),
        env={"CUDA_HOME": "{box}/cuda"},
        timeout=240,
    ),
    Case(
        "nvcc-prints-forever",
        "issue",
        "an nvcc that prints forever",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("printed more than", 2),
        lambda b: _nvcc(b, "exec yes nvcc"),
        env={"CUDA_HOME": "{box}/cuda"},
        timeout=240,
    ),
    Case(
        "cxx-hangs",
        "issue",
        "a CXX that hangs on -dumpversion",
        lambda b: ["build", "--dry-run", *matrix(b), "--archs", "8.0", *cache(b)],
        refused("did not finish within", 3),
        lambda b: (
            project(b),
            tool(
                b / "bin" / "g++",
                'case "$1" in -dumpversion) exec sleep 3600;; esac; exec c++ "$@"',
            ),
        ),
        env={"CXX": "{box}/bin/g++"},
        timeout=300,
    ),
    Case(
        "check-verneed-sections",
        "issue",
        "check a .so with 1,000 version-need sections",
        lambda b: ["check", "--target", "2.10", str(b / "x.so")],
        refused("implausible count of version", 4),
        _verneed_so,
        timeout=200,
    ),
    Case(
        "int-max-jobs-huge",
        "issue",
        "MAX_JOBS of 5,000 digits",
        build,
        refused("MAX_JOBS=", 2),
        project,
        env={"MAX_JOBS": "9" * 5000},
    ),
    Case(
        "int-archs-huge",
        "issue",
        "--archs with a 5,000-digit major",
        lambda b: ["matrix", *matrix(b), "--archs", "9" * 5000 + ".0", *cache(b)],
        refused("is not a CUDA arch", 2),
        project,
    ),
    Case(
        "int-sde-huge",
        "issue",
        "SOURCE_DATE_EPOCH of 5,000 digits",
        build,
        refused("SOURCE_DATE_EPOCH=", 2),
        project,
        env={"SOURCE_DATE_EPOCH": "1" * 5000},
    ),
    Case(
        "int-target-huge",
        "issue",
        "check --target 2.<5,000 digits>",
        lambda b: ["check", "--target", "2." + "1" * 5000, str(b / "x.so")],
        refused("is not a torch version", 2),
        lambda b: (b / "x.so").write_bytes(ELF),
    ),
    Case(
        "int-c-jobs-superscript",
        "issue",
        "-C jobs=² (PEP 517)",
        lambda _b: [
            sys.executable,
            "-c",
            "from wheelforge import build_meta; build_meta.get_requires_for_build_wheel({'jobs': '²'})",
        ],
        refused("-C jobs=²", 2),
        project,
    ),
    Case(
        "int-size-budget-309",
        "issue",
        "--size-budget of 309 digits",
        lambda b: build(b, "--size-budget", "9" * 309),
        refused("--size-budget", 2),
        project,
    ),
    Case(
        "int-requires-dist-huge",
        "issue",
        "check a wheel whose Requires-Dist has 5,000 digits",
        lambda b: ["check", str(b / WHEEL)],
        # The defect was the traceback: a wheel of no binaries asks for no floor since issue 20.
        either(refused("states no torch requirement", 2), succeeds()),
        lambda b: wheel(
            b / WHEEL,
            {
                "demo-1.0.dist-info/METADATA": "Name: demo\nRequires-Dist: torch>=2."
                + "1" * 5000
                + "\n"
            },
        ),
    ),
    Case(
        "probe-cache-wrong-shape",
        "issue",
        "a probe-cache entry of valid JSON, the wrong shape",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        succeeds(),
        _probe_entry('{"watch": [], "value": {}}'),
        timeout=300,
    ),
    Case(
        "env-marker-wrong-shape",
        "issue",
        "an environment marker of valid JSON, the wrong shape",
        lambda b: ["cache", "list", *cache(b)],
        succeeds(),
        _marker("[1, 2]"),
    ),
    Case(
        "repairs-cache-truncated",
        "issue",
        "a truncated wheel in the repairs cache",
        build,
        succeeds(),
        _kept_repair_truncated,
        timeout=1800,
        builds=True,
    ),
    Case(
        "init-deep-nesting",
        "issue",
        "init on a setup.py nested 5,000 deep",
        lambda b: ["init", str(b / "p")],
        refused("setup.py", 2),
        _setup_py(b"x = " + b"[" * 5000 + b"]" * 5000),
    ),
    Case(
        "init-not-utf8",
        "issue",
        "init on a setup.py that is not UTF-8",
        lambda b: ["init", str(b / "p")],
        refused("not UTF-8", 2),
        _setup_py(b"\xff\xfe"),
    ),
    Case(
        "init-nul",
        "issue",
        "init on a setup.py with a NUL byte",
        lambda b: ["init", str(b / "p")],
        refused("null bytes", 2),
        _setup_py(b"x = 1\0"),
    ),
    Case(
        "init-huge-literal",
        "issue",
        "init on a setup.py with a 400 kB literal",
        lambda b: ["init", str(b / "p")],
        short_lines(
            either(
                refused("", 2),
                refused("setup.py failed at line 3: NameError", 3),  # it runs: v is not defined
                succeeds(),
            )
        ),
        _setup_py(
            b"from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
            b"setup(name='x', version=v('" + b"a" * 400_000 + b"'), "
            b"ext_modules=[CUDAExtension('x._C', ['k.cu'])])\n"
        ),
    ),
    Case(
        "init-fifo",
        "issue",
        "init on a setup.py that is a FIFO",
        lambda b: ["init", str(b / "p")],
        refused("setup.py could not be read: it is a FIFO", 2),
        _setup_py(None, "fifo"),
    ),
    Case(
        "init-dev-zero",
        "issue",
        "init on a setup.py that is /dev/zero",
        lambda b: ["init", str(b / "p")],
        refused("setup.py could not be read", 2),
        _setup_py(None, "zero"),
    ),
    Case(
        "lock-symlink",
        "issue",
        "a symlinked .wheelforge.lock",
        build,
        refused("cannot be taken (a symbolic link)", 5),
        lambda b: (
            project(b),
            (b / "proj" / "build" / "wheelforge").mkdir(parents=True),
            (b / "proj" / "build" / "wheelforge" / ".wheelforge.lock").symlink_to(
                b / "elsewhere-lock"
            ),
        ),
        timeout=300,
    ),
    Case(
        "pep517-tool-text",
        "issue",
        "[tool] wheelforge = 'text' in pyproject.toml",
        lambda _b: [
            sys.executable,
            "-c",
            "from wheelforge import build_meta; build_meta.get_requires_for_build_wheel()",
        ],
        refused("tool.wheelforge must be a table", 2),
        lambda b: (b / "pyproject.toml").write_text('[tool]\nwheelforge = "text"\n'),
    ),
    Case(
        "newline-in-path",
        "issue",
        "a newline in the project path",
        lambda b: [
            "build",
            "--matrix",
            str(b / "a\nb" / "proj" / "matrix.yaml"),
            *BUILD,
            *cache(b),
        ],
        refused("line break", 2),
        lambda b: project(b / "a\nb"),
        timeout=300,
    ),
    Case(
        "escape-in-member-name",
        "issue",
        "terminal escapes in wheel member names (inspect)",
        lambda b: ["inspect", str(b / WHEEL)],
        succeeds(lambda r: "raw ESC reached the terminal" if "\x1b" in r.out + r.err else None),
        lambda b: wheel(
            b / WHEEL, {"demo-1.0.dist-info/METADATA": META, "demo/\x1b[2J\x1b[31mx.abi3.so": ELF}
        ),
    ),
    Case(
        "colon-in-project-path",
        "issue",
        "':' in the project path (ccache)",
        lambda b: ["build", "--matrix", str(b / "a:b" / "proj" / "matrix.yaml"), *BUILD, *cache(b)],
        succeeds(),
        lambda b: project(b / "a:b"),
        timeout=900,
        builds=True,
    ),
    Case(
        "killed-pack-leftovers",
        "issue",
        "stage-* and .part files a SIGKILLed pack left",
        build,
        succeeds(_leftovers_gone),
        _killed_pack,
        timeout=1800,
        builds=True,
    ),
    Case(
        "unicode-archs",
        "issue",
        "--archs ８.０",
        lambda b: ["matrix", *matrix(b), "--archs", "８.０", *cache(b)],
        refused("'８.０' is not a CUDA arch", 2),
        project,
    ),
    Case(
        "unicode-max-jobs",
        "issue",
        "MAX_JOBS=٤",
        build,
        refused("MAX_JOBS='٤'", 2),
        project,
        env={"MAX_JOBS": "٤"},
    ),
    Case(
        "pep517-c-only",
        "issue",
        "-C only=nope names -C only",
        lambda _b: [
            sys.executable,
            "-c",
            "import os; os.chdir('proj'); from wheelforge import build_meta; build_meta.build_wheel('out', {'only': 'nope', 'archs': '8.0'})",
        ],
        refused("-C only nope", 2),
        project,
        timeout=300,
    ),
]


def _in(group: str) -> Callable[..., Case]:
    """The constructor of one group's cases: Case with its group filled in."""

    def make(
        name: str,
        what: str,
        argv: Callable[[Path], list[str]],
        judge: Judge,
        setup: Callable[[Path], None] = lambda _b: None,
        **kw: object,
    ) -> Case:
        return Case(name, group, what, argv, judge, setup, **kw)  # type: ignore[arg-type]

    return make


_new = _in("new")


# -- the fence around init's run of a project's code (issue 39 item 1) ------------------------
# setup.py tries what lies outside the project through the C socket type and plain os calls,
# and writes what it reached to reach.json in the project (which it may write).
_REACH = """import json, os, _socket
r = {{}}
def t(name, fn):
    try:
        r[name] = "reached " + repr(fn())[:80]
    except Exception as e:
        r[name] = "refused " + type(e).__name__
def unix(a):
    s = _socket.socket(_socket.AF_UNIX)
    s.settimeout(5)
    _socket.socket.connect(s, a)
    return _socket.socket.send(s, b"x")
{probes}
json.dump(r, open("reach.json", "w"))
from setuptools import Extension, setup
setup(name="x", version="1", packages=["x"], ext_modules=[Extension("x._C", ["k.cpp"])])
"""
_LISTENERS: dict[Path, socket.socket] = {}  # alive while the case runs; the judge asks them
_SECRET = "ghp_hostile_fence_secret"
_FENCE_ENV = {
    "HOME": "{box}/home",
    "SSH_AUTH_SOCK": "{box}/home/agent.sock",
    "GITHUB_TOKEN": _SECRET,
}


def _reach(probes: str, listen: str | None = None) -> Callable[[Path], None]:
    """setup.py in box/p running *probes*; *listen*: a unix listener's address ({box} filled;
    a leading NUL: abstract) the judge asks whether anything came."""

    def setup(box: Path) -> None:
        (box / "p").mkdir()
        (box / "home").mkdir()
        (box / "home" / ".netrc").write_text("machine github.com password hunter2\n")
        (box / "p" / "setup.py").write_text(_REACH.format(probes=probes.replace("{box}", str(box))))
        (box / "p" / "k.cpp").write_text("// the source setup.py names\n")
        (box / "p" / "x").mkdir()
        (box / "p" / "x" / "__init__.py").write_text("")
        if listen is not None:
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(listen.replace("{box}", str(box)))
            listener.listen(4)
            listener.setblocking(False)
            _LISTENERS[box] = listener

    return setup


def _reached_nothing(r: Run) -> str | None:
    listener = _LISTENERS.pop(r.box, None)
    if listener is not None:
        try:
            listener.accept()
        except BlockingIOError:
            pass
        else:
            return "setup.py reached the listener"
        finally:
            listener.close()
    try:
        seen = json.loads((r.box / "p" / "reach.json").read_text())
    except (OSError, ValueError):
        return "setup.py wrote no reach.json"
    reached = [k for k, v in seen.items() if str(v).startswith("reached")]
    if reached or _SECRET in r.out + r.err:
        return f"setup.py reached {', '.join(reached) or 'the token (on the screen)'}"
    return None


def _fenced(name: str, what: str, setup: Callable[[Path], None]) -> Case:
    """Clean: init succeeds and setup.py reached nothing, or no sandbox works here (exit 5)."""
    return _new(
        name,
        what,
        lambda b: ["init", "-v", "--cache-dir", str(b / "c"), str(b / "p")],
        either(refused("only inside a sandbox", 5), succeeds(_reached_nothing)),
        setup,
        env=dict(_FENCE_ENV),
        timeout=300,
    )


def _host_devices() -> list[str]:
    return sorted(
        str(d)
        for d in Path("/dev").iterdir()
        if not d.is_symlink()
        and (d.is_char_device() or d.is_block_device())
        and not d.name.startswith(("null", "zero", "full", "random", "urandom", "tty", "ptmx"))
        and not d.name.startswith("nvidia")
    )[:40]


def _repository_around(box: Path) -> None:
    """FlashAttention-3's hopper/: setup.py opens ../README.md and lists ../csrc/cutlass."""
    (box / "p" / "csrc" / "cutlass" / "include").mkdir(parents=True)
    (box / "p" / "README.md").write_text("# FA\n")
    (box / "p" / "hopper").mkdir()
    (box / "p" / "hopper" / "setup.py").write_text(
        "import os\nopen('../README.md').read()\nos.listdir('../csrc/cutlass/include')\n"
        "from setuptools import Extension, setup\n"
        "setup(name='x', version='1', packages=['x'], ext_modules=[Extension('x._C', ['k.cpp'])])\n"
    )
    (box / "p" / "hopper" / "k.cpp").write_text("// the source setup.py names\n")
    (box / "p" / "hopper" / "x").mkdir()
    (box / "p" / "hopper" / "x" / "__init__.py").write_text("")
    subprocess.run(["git", "init", "-q", str(box / "p")], check=True)


CASES += [
    _fenced(
        "fence-socket-home",
        "init: setup.py connects (C _socket) to a unix listener in $HOME, and to SSH_AUTH_SOCK",
        _reach(
            't("home", lambda: unix("{box}/home/agent.sock"))\n'
            't("agent", lambda: unix(os.environ.get("SSH_AUTH_SOCK", "{box}/home/agent.sock")))',
            listen="{box}/home/agent.sock",
        ),
    ),
    _fenced(
        "fence-socket-abstract",
        "init: setup.py connects to an abstract unix listener",
        _reach('t("abstract", lambda: unix("\\0wf-hostile-{box}"))', listen="\0wf-hostile-{box}"),
    ),
    _fenced(
        "fence-socket-project",
        "init: setup.py connects to a unix listener inside the project folder",
        _reach('t("project", lambda: unix("{box}/p/d.sock"))', listen="{box}/p/d.sock"),
    ),
    _fenced(
        "fence-home-file",
        "init: setup.py reads a file in $HOME (~/.netrc)",
        _reach('t("netrc", lambda: open("{box}/home/.netrc").read())'),
    ),
    _fenced(
        "fence-host-devices",
        "init: setup.py opens the host's device nodes (/dev/kmsg, a disk, /dev/fuse ...)",
        _reach(
            "for d in " + repr(_host_devices()) + ":\n"
            "    t(d, lambda: os.close(os.open(d, os.O_RDONLY | os.O_NONBLOCK)))"
        ),
    ),
    _fenced(
        "fence-env-secret",
        "init: setup.py reads GITHUB_TOKEN and SSH_AUTH_SOCK from its environment",
        _reach(
            'for k in ("GITHUB_TOKEN", "SSH_AUTH_SOCK"):\n'
            "    if k in os.environ:\n"
            '        r[k] = "reached " + os.environ[k]'
        ),
    ),
    _new(
        "fence-repository-around",
        "init on hopper/ whose setup.py opens ../README.md and lists ../csrc/cutlass (FA3)",
        lambda b: ["init", "--cache-dir", str(b / "c"), str(b / "p" / "hopper")],
        either(refused("only inside a sandbox", 5), succeeds()),
        _repository_around,
        timeout=300,
    ),
]

CASES += [
    # ===== a new round: hostile cases beyond the list ===================================
    _new(
        "matrix-socket",
        "--matrix is a UNIX socket",
        lambda b: ["matrix", "--matrix", str(b / "s"), *cache(b)],
        refused("is a socket", 2),
        lambda b: _sock(b / "s"),
    ),
    _new(
        "matrix-link-loop",
        "--matrix is a symlink loop",
        lambda b: ["matrix", "--matrix", str(b / "m.yaml"), *cache(b)],
        refused("m.yaml could not be read", 2),
        lambda b: (b / "m.yaml").symlink_to(b / "m.yaml"),
    ),
    _new(
        "matrix-proc-self-fd0",
        "--matrix /proc/self/fd/0 (stdin, a pipe)",
        lambda b: ["matrix", "--matrix", "/proc/self/fd/0", *cache(b)],
        refused("could not be read", 2),
    ),
    _new(
        "matrix-nul-byte",
        "a NUL byte in matrix.yaml",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("matrix.yaml", 2),
        lambda b: project(b, lambda t: t + "\0\n"),
    ),
    _new(
        "matrix-crlf-bom",
        "matrix.yaml with a BOM and CRLF line ends (valid)",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        succeeds(),
        lambda b: project(b, lambda t: "\ufeff" + t.replace("\n", "\r\n")),
    ),
    _new(
        "matrix-deep-yaml",
        "a YAML list nested 50,000 deep",
        lambda b: ["matrix", "--matrix", str(b / "m.yaml"), *cache(b)],
        refused("invalid YAML", 2),
        lambda b: (b / "m.yaml").write_text("package: " + "[" * 50000 + "]" * 50000),
    ),
    _new(
        "summary-line-separator",
        "a summary holding U+2028",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("package.summary must be one line", 2),
        _edit(SUMMARY, '  summary: "a\\u2028b"'),
    ),
    _new(
        "version-huge",
        "package.version 1.<5,000 digits>",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("is not a PEP 440 version", 2),
        _edit("version: 0.1.0", "version: '1." + "2" * 5000 + "'"),
    ),
    _new(
        "torch-range-huge",
        "torch: '>=2.<5,000 digits>'",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("torch", 2),
        _edit('torch: ">=2.10"', "torch: '>=2." + "1" * 5000 + "'"),
    ),
    _new(
        "requires-python-huge",
        "requires-python with 5,000 digits",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("is not a version range", 2),
        _edit(
            "  license: Apache-2.0",
            "  license: Apache-2.0\n  requires-python: '>=3." + "1" * 5000 + "'",
        ),
    ),
    _new(
        "dependency-huge",
        "a dependency with 5,000 digits",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("is not a requirement", 2),
        _edit(
            "  license: Apache-2.0",
            "  license: Apache-2.0\n  dependencies: ['numpy>=1." + "1" * 5000 + "']",
        ),
    ),
    _new(
        "cuda-release-huge",
        "cuda: ['1<5,000 digits>.0']",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("is neither 'auto' nor a CUDA release", 2),
        lambda b: project(b, lambda t: t + "cuda: ['1" + "3" * 5000 + ".0']\n"),
    ),
    _new(
        "tests-torch-huge",
        "tests.torch with 5,000 digits",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("tests.torch", 2),
        _edit('torch: ["2.13.0", "2.14.1"]', "torch: ['2." + "1" * 5000 + "']"),
    ),
    _new(
        "arch-env-arabic",
        "TORCH_CUDA_ARCH_LIST=٨.٠",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("TORCH_CUDA_ARCH_LIST", 2),
        project,
        env={"TORCH_CUDA_ARCH_LIST": "٨.٠"},
    ),
    _new(
        "nvcc-threads-superscript",
        "NVCC_THREADS=²",
        build,
        refused("NVCC_THREADS='²'", 2),
        project,
        env={"NVCC_THREADS": "²"},
    ),
    _new(
        "sde-fullwidth",
        "SOURCE_DATE_EPOCH=１７００",
        build,
        refused("SOURCE_DATE_EPOCH=", 2),
        project,
        env={"SOURCE_DATE_EPOCH": "１７００"},
    ),
    _new(
        "sde-year-10000",
        "SOURCE_DATE_EPOCH beyond the year 9999",
        build,
        refused("SOURCE_DATE_EPOCH=", 2),
        project,
        env={"SOURCE_DATE_EPOCH": "999999999999999"},
    ),
    _new(
        "sde-year-2108",
        "SOURCE_DATE_EPOCH in 2108 (a zip's dates end in 2107)",
        build,
        refused("SOURCE_DATE_EPOCH=", 2),
        project,
        env={"SOURCE_DATE_EPOCH": "4354819200"},
        timeout=900,
    ),
    _new(
        "member-cap-huge",
        "WHEELFORGE_MAX_MEMBER_BYTES of 5,000 digits",
        lambda b: ["inspect", str(b / WHEEL)],
        refused("WHEELFORGE_MAX_MEMBER_BYTES=", 2),
        lambda b: wheel(b / WHEEL, {"demo-1.0.dist-info/METADATA": META, "demo/_C.abi3.so": ELF}),
        env={"WHEELFORGE_MAX_MEMBER_BYTES": "7" * 5000},
    ),
    _new(
        "ratio-cap-arabic",
        "WHEELFORGE_MAX_RATIO=٢٠٠",
        lambda b: ["inspect", str(b / WHEEL)],
        refused("WHEELFORGE_MAX_RATIO=", 2),
        lambda b: wheel(b / WHEEL, {"demo-1.0.dist-info/METADATA": META, "demo/_C.abi3.so": ELF}),
        env={"WHEELFORGE_MAX_RATIO": "٢٠٠"},
    ),
    _new(
        "jobs-flag-arabic",
        "-j ٤",
        lambda b: [*build(b), "-j", "٤"],
        refused("'٤' is not a valid integer", 2),
        project,
    ),
    _new(
        "unused-for-arabic",
        "cache prune --unused-for ٣٠",
        lambda b: ["cache", "prune", "--unused-for", "٣٠", *cache(b)],
        refused("is not a valid integer", 2),
    ),
    _new(
        "size-budget-fraction",
        "--size-budget 1.<5,000 digits>MiB",
        lambda b: build(b, "--size-budget", "1." + "5" * 5000 + "MiB"),
        refused("--size-budget", 2),
        project,
    ),
    _new(
        "python-abi-arabic",
        "check --python-abi cp3١٠",
        lambda b: ["check", "--target", "2.10", "--python-abi", "cp3١٠", str(b / "x.so")],
        refused("is not like cp310", 2),
        lambda b: (b / "x.so").write_bytes(ELF),
    ),
    _new(
        "toolkit-install-arabic",
        "toolkit install ١٣.٠",
        lambda b: ["toolkit", "install", "١٣.٠", *cache(b)],
        refused("malformed CUDA release", 2),
    ),
    _new(
        "report-dev-null",
        "--report to a null device (as /dev/null is: written through, never replaced)",
        lambda b: [*build(b), "--report", str(b / "null")],
        succeeds(
            lambda r: None if (r.box / "null").is_char_device() else "the device was replaced"
        ),
        _null_device,
        timeout=900,
        builds=True,
    ),
    _new(
        "report-below-a-file",
        "--report below a regular file",
        lambda b: [*build(b), "--report", str(b / "f" / "r.json")],
        refused("cannot write there", 5),
        lambda b: (project(b), (b / "f").write_text("x")),
    ),
    _new(
        "report-link-kernel",
        "--report to a link to /proc/version",
        lambda b: [*build(b), "--report", str(b / "r.json")],
        refused("is a file of the kernel", 2),
        lambda b: (project(b), (b / "r.json").symlink_to("/proc/version")),
    ),
    _new(
        "report-link-to-file",
        "--report to a link to a regular file elsewhere (the link is kept)",
        lambda b: [*build(b), "--report", str(b / "r.json")],
        succeeds(
            lambda r: (
                None
                if (r.box / "r.json").is_symlink() and (r.box / "real.json").stat().st_size > 100
                else "link replaced or target empty"
            )
        ),
        lambda b: (
            project(b),
            (b / "real.json").write_text("old"),
            (b / "r.json").symlink_to(b / "real.json"),
        ),
        timeout=900,
        builds=True,
    ),
    _new(
        "out-symlink-loop",
        "--out is a symlink loop",
        lambda b: [*build(b), "--out", str(b / "o")],
        refused("--out", 5),
        lambda b: (project(b), (b / "o").symlink_to(b / "o")),
    ),
    _new(
        "build-dir-fifo",
        "--build-dir is a FIFO",
        lambda b: [*build(b), "--build-dir", str(b / "bd")],
        either(refused("--build-dir", 5), refused("--build-dir", 2)),
        lambda b: (project(b), fifo(b / "bd")),
    ),
    _new(
        "cache-dir-link-to-proc",
        "--cache-dir is a link into /proc",
        lambda b: ["build", *matrix(b), *BUILD, "--cache-dir", str(b / "c")],
        refused("--cache-dir", 5),
        lambda b: (project(b), (b / "c").symlink_to("/proc/self")),
    ),
    _new(
        "prune-repairs-symlink",
        "cache prune --all with repairs -> elsewhere/",
        lambda b: ["cache", "prune", "--all", *cache(b)],
        unharmed(_kept, succeeds()),
        _cache_with("repairs"),
    ),
    _new(
        "prune-toolkits-symlink",
        "cache prune --all with toolkits -> elsewhere/",
        lambda b: ["cache", "prune", "--all", *cache(b)],
        unharmed(_kept, succeeds()),
        _cache_with("toolkits"),
    ),
    _new(
        "prune-probes-symlink",
        "cache prune --all with probes -> elsewhere/",
        lambda b: ["cache", "prune", "--all", *cache(b)],
        unharmed(_kept, succeeds()),
        _cache_with("probes"),
    ),
    _new(
        "probe-entry-fifo",
        "a probe-cache entry that is a FIFO",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        succeeds(),
        _probe_entry("FIFO"),
        timeout=300,
    ),
    _new(
        "probe-entry-deep-json",
        "a probe-cache entry of JSON nested 100,000 deep",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        succeeds(),
        _probe_entry("[" * 100000 + "]" * 100000),
        timeout=300,
    ),
    _new(
        "env-marker-fifo",
        "an environment marker that is a FIFO (cache list)",
        lambda b: ["cache", "list", *cache(b)],
        succeeds(),
        lambda b: fifo(b / "cache" / "envs" / "torch-x" / "wheelforge-env.json"),
        timeout=60,
    ),
    _new(
        "toolkit-json-fifo",
        "a provisioned toolkit.json that is a FIFO (toolkit list)",
        lambda b: ["toolkit", "list", *cache(b)],
        succeeds(),
        lambda b: fifo(b / "cache" / "toolkits" / "cuda-13.0-pypi" / "toolkit.json"),
        timeout=120,
    ),
    _new(
        "toolkit-json-list",
        "a provisioned toolkit.json that is a JSON list",
        lambda b: ["toolkit", "list", *cache(b)],
        succeeds(),
        lambda b: (
            (b / "cache" / "toolkits" / "cuda-13.0-pypi").mkdir(parents=True)
            or (b / "cache" / "toolkits" / "cuda-13.0-pypi" / "toolkit.json").write_text("[1]")
        ),
        timeout=120,
    ),
    _new(
        "stamp-fifo",
        "the reuse stamp wheel.json is a FIFO (wheelforge test)",
        lambda b: ["test", *matrix(b), *cache(b), "--torch-from", sys.executable],
        refused("no built wheel", 2),
        lambda b: (
            project(b),
            (b / "proj" / "build" / "wheelforge" / "sm80-cu130").mkdir(parents=True),
            fifo(b / "proj" / "build" / "wheelforge" / "sm80-cu130" / "wheel.json"),
        ),
        timeout=120,
    ),
    _new(
        "step-summary-fifo",
        "$GITHUB_STEP_SUMMARY is a FIFO nobody reads (a failing build with --ci github)",
        lambda b: ["build", *matrix(b), "--archs", "sm_80", *cache(b), "--ci", "github"],
        refused("sm_80", 2),
        lambda b: (project(b), fifo(b / "summary")),
        env={"GITHUB_STEP_SUMMARY": "{box}/summary"},
        timeout=120,
    ),
    _new(
        "step-summary-dev-full",
        "$GITHUB_STEP_SUMMARY=/dev/full (a failing build with --ci github)",
        lambda b: ["build", *matrix(b), "--archs", "sm_80", *cache(b), "--ci", "github"],
        refused("sm_80", 2),
        project,
        env={"GITHUB_STEP_SUMMARY": "/dev/full"},
        timeout=120,
    ),
    _new(
        "check-member-newline",
        "check a wheel whose member name holds a newline and ESC",
        lambda b: ["check", str(b / WHEEL)],
        either(refused("", 4), succeeds()),
        lambda b: wheel(
            b / WHEEL, {"demo-1.0.dist-info/METADATA": META, "demo/a\nb\x1b[31m.abi3.so": ELF}
        ),
    ),
    _new(
        "check-member-markup",
        "check a wheel whose member name reads as rich markup ([/])",
        lambda b: ["check", str(b / WHEEL)],
        either(refused("", 4), succeeds()),
        lambda b: wheel(
            b / WHEEL, {"demo-1.0.dist-info/METADATA": META, "demo/[/]x[bold].abi3.so": ELF}
        ),
    ),
    _new(
        "check-record-weak",
        "check a wheel whose RECORD uses md5",
        lambda b: ["check", str(b / WHEEL)],
        refused("md5", 4),
        lambda b: wheel(
            b / WHEEL,
            {
                "demo-1.0.dist-info/METADATA": META,
                "demo-1.0.dist-info/RECORD": "demo-1.0.dist-info/METADATA,md5=abc,1\n",
            },
            record=False,
        ),
    ),
    _new(
        "check-record-lists-absent",
        "check a wheel whose RECORD lists a file it lacks",
        lambda b: ["check", str(b / WHEEL)],
        refused("which the wheel does not hold", 4),
        lambda b: _with_record_line(b / WHEEL, "gone.py,sha256=x,1\n"),
    ),
    _new(
        "check-record-field-huge",
        "check a wheel whose RECORD holds a 200 kB field (beyond csv's limit)",
        lambda b: ["check", str(b / WHEEL)],
        refused("RECORD is not CSV", 4),
        lambda b: _with_record_line(b / WHEEL, "a" * 200_000 + ",sha256=x,1\n"),
    ),
    _new(
        "check-two-dist-infos",
        "check a wheel of two .dist-info folders (pip refuses it)",
        lambda b: ["check", str(b / WHEEL)],
        refused(".dist-info folders", 4),
        lambda b: wheel(
            b / WHEEL,
            {
                "demo-1.0.dist-info/METADATA": META,
                "other-2.0.dist-info/METADATA": "Name: other\nVersion: 2.0\n",
            },
        ),
    ),
    _new(
        "inspect-bidi-name",
        "inspect a wheel whose member name holds U+202E (Trojan Source)",
        lambda b: ["inspect", str(b / WHEEL)],
        succeeds(lambda r: "U+202E reached the terminal" if "\u202e" in r.out + r.err else None),
        lambda b: wheel(
            b / WHEEL, {"demo-1.0.dist-info/METADATA": META, "demo/\u202eos.3iba.x": ELF}
        ),
    ),
    _new(
        "check-huge-member-name",
        "check a wheel whose member name is 60,000 characters",
        lambda b: ["check", str(b / WHEEL)],
        short_lines(either(refused("", 4), succeeds())),
        lambda b: wheel(
            b / WHEEL, {"demo-1.0.dist-info/METADATA": META, f"demo/{'a' * 60_000}.abi3.so": ELF}
        ),
    ),
    _new(
        "build-dir-link-to-dev-null",
        "--build-dir is a link to /dev/null",
        lambda b: [*build(b), "--build-dir", str(b / "bd")],
        refused("is a character device, not a folder", 5),
        lambda b: (project(b), (b / "bd").symlink_to("/dev/null")),
    ),
    _new(
        "cache-dir-fifo",
        "--cache-dir is a FIFO",
        lambda b: ["build", *matrix(b), *BUILD, "--cache-dir", str(b / "c")],
        refused("is a FIFO (named pipe), not a folder", 2),
        lambda b: (project(b), fifo(b / "c")),
    ),
    _new(
        "pyproject-readme-3gb",
        "[project] readme is a 3 GB file (sparse) under a 4 GB cap",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("R.md could not be read: it is 3072 MiB, above the cap", 2),
        lambda b: _readme_project(b, lambda r: r.open("wb").truncate(3 << 30)),
    ),
    _new(
        "pyproject-readme-fifo",
        "[project] readme is a FIFO",
        lambda b: ["matrix", *matrix(b), *cache(b)],
        refused("R.md could not be read: it is a FIFO", 2),
        lambda b: _readme_project(b, os.mkfifo),
    ),
    _new(
        "init-pyproject-dev-zero",
        "init where pyproject.toml is /dev/zero",
        lambda b: ["init", str(b / "p")],
        refused("pyproject.toml could not be read", 2),
        lambda b: (
            _setup_py(_CUDA_SETUP)(b),
            (b / "p" / "pyproject.toml").symlink_to("/dev/zero"),
        ),
    ),
    _new(
        "init-setup-syntax",
        "init on a setup.py with a syntax error",
        lambda b: ["init", str(b / "p")],
        refused("not valid Python", 2),
        _setup_py(b"setup(\n"),
    ),
    _new(
        "init-long-chain",
        "init on a setup.py with a 200,000-term expression",
        lambda b: ["init", str(b / "p")],
        refused("setup.py", 2),
        _setup_py(b"x = " + b"+".join([b"a"] * 200_000) + b"\n"),
    ),
    _new(
        "init-matrix-fifo-force",
        "init --force where matrix.yaml is a FIFO",
        lambda b: ["init", "--force", str(b / "p")],
        refused("is a FIFO", 2),
        lambda b: (
            _setup_py(_CUDA_SETUP)(b),
            fifo(b / "p" / "matrix.yaml"),
        ),
    ),
    _new(
        "python-hangs",
        "--python names an interpreter that hangs",
        lambda b: [
            "build",
            "--dry-run",
            *matrix(b),
            "--archs",
            "8.0",
            *cache(b),
            "--python",
            str(b / "py"),
        ],
        either(
            refused("did not finish within", 5),
            refused("did not finish within", 3),
            refused("did not answer within", 3),
        ),
        lambda b: (project(b), tool(b / "py", "exec sleep 3600")),
        timeout=300,
    ),
    _new(
        "python-garbage",
        "--python names an interpreter that prints garbage",
        lambda b: [
            "build",
            "--dry-run",
            *matrix(b),
            "--archs",
            "8.0",
            *cache(b),
            "--python",
            str(b / "py"),
        ],
        refused("", 5),
        lambda b: (project(b), tool(b / "py", "echo '{not json'")),
    ),
    _new(
        "cxx-prints-forever",
        "a CXX that prints forever on -dumpversion",
        lambda b: ["build", "--dry-run", *matrix(b), "--archs", "8.0", *cache(b)],
        refused("printed more than", 3),
        lambda b: (
            project(b),
            tool(b / "bin" / "g++", 'case "$1" in -dumpversion) exec yes 13;; esac; exec c++ "$@"'),
        ),
        env={"CXX": "{box}/bin/g++"},
        timeout=300,
    ),
    _new(
        "test-wheel-fifo",
        "test --wheel a FIFO",
        lambda b: ["test", *matrix(b), *cache(b), "--wheel", str(b / "w.whl")],
        refused("w.whl is a FIFO", 2),
        lambda b: (project(b), fifo(b / "w.whl")),
    ),
]


# ===== issue 39 (round five, helper robust): a build folder that is data, every input one line,
# the right answers, screens at any width ===================================================


_r5 = _in("issue39")


def _built_then(edit: Callable[[Path], None]) -> Callable[[Path], None]:
    """A project built once (its build folder filled), then *edit* of the box."""

    def setup(box: Path) -> None:
        project(box)
        wf = os.environ["WF_UNDER_TEST"]
        subprocess.run([wf, *build(box)], capture_output=True, timeout=900, check=False)
        edit(box)

    return setup


_PICKLE_RUNS = (
    "import os, pickle, sys\n"
    "class R:\n"
    "    def __reduce__(self):\n"
    "        return (os.system, ('touch ' + sys.argv[1],))\n"
    "data = pickle.dumps(R())\n"
    "for name in ('wheel-verified.pickle', 'wheel-verified.json'):\n"
    "    for folder in sys.argv[2:]:\n"
    "        open(os.path.join(folder, name), 'wb').write(data)\n"
)


def _crafted_pickles(box: Path) -> None:
    """The variant folders' stored findings replaced by a pickle that runs a shell command."""
    folders = [str(p) for p in (box / "proj" / "build" / "wheelforge").glob("sm*")]
    subprocess.run([sys.executable, "-c", _PICKLE_RUNS, str(box / "ran"), *folders], check=True)


def _nothing_ran(r: Run) -> str | None:
    return "the crafted pickle ran a command" if (r.box / "ran").exists() else None


def _built_and_copied(box: Path) -> None:
    """The project built (its matrix named relative to the case's folder, as a user in its
    parent folder does), then copied with its build folder, as cp -a does (CI caches
    likewise)."""
    project(box)
    wf = os.environ["WF_UNDER_TEST"]
    argv = [wf, "build", "--matrix", "proj/matrix.yaml", *BUILD, *cache(box)]
    subprocess.run(argv, cwd=box, capture_output=True, timeout=900, check=False)
    shutil.copytree(box / "proj", box / "copy", symlinks=True)


def _sbom_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".cdx.json"))
        sbom = json.loads(zf.read(name))
    return sorted(c["name"] for c in sbom.get("components", []) if c.get("type") == "file")


def _same_sbom(r: Run) -> str | None:
    made = sorted((r.box / "proj" / "dist").glob("*.whl"))
    again = sorted((r.box / "copy" / "dist").glob("*.whl"))
    if not made or not again:
        return "no wheel"
    lost = set(_sbom_files(made[0])) - set(_sbom_files(again[0]))
    if lost:
        return f"the copy's SBOM lost {sorted(lost)[0]}"
    # What the copy's next SBOM is made of: the files its stamps say the build read.
    for stamp in sorted((r.box / "copy" / "build").rglob("up-to-date.json")):
        if str(r.box / "proj") in stamp.read_text():
            return f"{stamp.relative_to(r.box)} names the original project's files"
    return None


_DEEP_SETUP = (
    b"from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
    b"x = []\nfor _ in range(100000):\n    x = [x]\n"
    b"setup(name='x', version='1', packages=['x'], keywords=x,\n"
    b"      ext_modules=[CUDAExtension('x._C', ['k.cu'])])\n"
)


def _deep_setup(box: Path) -> None:
    _setup_py(_DEEP_SETUP)(box)
    (box / "p" / "x").mkdir()
    (box / "p" / "x" / "__init__.py").write_text("")


# A command run in a user and mount namespace where the cache is mounted read-only (EROFS,
# even for root): python -c this CACHE WHEELFORGE-ARGS...
_READ_ONLY = (
    "import os, sys\n"
    "cache = sys.argv[1]\n"
    'script = \'mount --bind -o ro "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"\'\n'
    "os.execvp('unshare', ['unshare', '-rm', 'sh', '-c', script, cache, sys.executable, '-m',"
    " 'wheelforge', *sys.argv[2:], '--cache-dir', cache])\n"
)


def _cache_entry(box: Path) -> None:
    entry = box / "cache" / "repairs" / ("0" * 32)
    entry.mkdir(parents=True)
    (entry / "x.whl").write_bytes(b"PK")


def _entry_kept(r: Run) -> str | None:
    kept = r.box / "cache" / "repairs" / ("0" * 32) / "x.whl"
    return None if kept.is_file() else "the entry was removed or half removed"


def _text_so(box: Path) -> None:
    wheel(
        box / WHEEL, {"demo/_C.abi3.so": "not a shared obj\n", "demo-1.0.dist-info/METADATA": META}
    )


def _xindex(link: int | None) -> Callable[[Path], None]:
    """A real fatbin ELF whose e_shstrndx is SHN_XINDEX, section 0's sh_link *link* (None:
    the real index, as the ELF specification says)."""

    def setup(box: Path) -> None:
        import struct

        data = bytearray((REPO / "tests" / "data" / "fatbin" / "sm80_sm90a_ptx90.so").read_bytes())
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        index = struct.unpack_from("<H", data, 0x3E)[0]
        struct.pack_into("<H", data, 0x3E, 0xFFFF)
        struct.pack_into("<I", data, shoff + 0x28, index if link is None else link)
        (box / "x.so").write_bytes(bytes(data))

    return setup


def _shows_sm80(r: Run) -> str | None:
    return None if "sm_80" in r.out else "the fatbin was not read"


_NO_ARCHS = 'case "$1" in --version) echo "Cuda compilation tools, release 13.0, V13.0.88";; esac'
_GARBAGE_ARCHS = (
    'case "$1" in --version) echo "Cuda compilation tools, release 13.0, V13.0.88";;'
    " --list-gpu-code) echo 'sm_banana compute_xx';; esac"
)


def _source_kept(r: Run) -> str | None:
    ops = r.box / "proj" / "kernels" / "csrc" / "ops.cpp"
    return (
        None
        if ops.read_bytes() == (PROJECT / "kernels" / "csrc" / "ops.cpp").read_bytes()
        else ("ops.cpp was replaced by the report")
    )


def _pip_one_line(r: Run) -> tuple[str, str]:
    said = r.out + r.err
    if r.traceback or "setup.py develop" in said:
        return "bad", "a traceback (setup.py develop)"
    if r.rc != 0 and "[1 lines of output]" in said and "makes no editable installs" in said:
        return "clean", ""
    return "unclear", f"exit {r.rc}: {r.line}"


# The wheelforge under test at a terminal (a pty, by script(1)) of COLUMNS: python -c this ARGS.
_AT_A_TERMINAL = (
    "import os, shlex, sys\n"
    "wf = shlex.join([os.path.join(os.path.dirname(sys.executable), 'wheelforge'), *sys.argv[1:]])\n"
    "os.execvp('script', ['script', '-qec', wf, '/dev/null'])\n"
)


def _shown_at_a_terminal(r: Run) -> tuple[str, str]:
    words = " ".join((r.out + r.err).split())
    if r.traceback:
        return "bad", "traceback"
    if r.rc == 2 and "error:" in words and "no such file or folder" in words:
        return "clean", ""
    return "bad" if not words else "unclear", f"exit {r.rc}: {words[:100]!r}"


_SHELL_NAME = "a b;touch pwned;$(id)"


def _shell_named(box: Path) -> None:
    project(box, lambda t: t.split("\ntests:")[0] + "\n")  # no tests: the hint is pip install
    (box / "proj").rename(box / _SHELL_NAME)
    (box / "proj").symlink_to(box / _SHELL_NAME)  # build() names proj/matrix.yaml


def _hint_pastes(r: Run) -> str | None:
    import shlex

    said = (r.out + r.err).splitlines()
    line = next((ln for ln in said if ln.startswith("next: pip install ")), None)
    if line is None:
        return "no pip install hint"
    words = shlex.split(line.removeprefix("next: ").split(" (a 'tests'")[0])
    if len(words) != 3 or not Path(r.box, words[2]).is_file():
        return f"the hint pastes as {words!r}"
    return None


def _killed_jobserver(box: Path) -> None:
    project(box)
    (box / "tmp").mkdir()
    code = (
        "import os, signal\nfrom wheelforge.build.jobserver import Jobserver\n"
        "Jobserver(4, ninjas=2).makeflags()\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    python = Path(os.environ["WF_UNDER_TEST"]).parent / "python"
    subprocess.run(
        [python, "-c", code], env={**os.environ, "TMPDIR": str(box / "tmp")}, check=False
    )


def _no_jobserver_left(r: Run) -> str | None:
    left = sorted((r.box / "tmp").glob("wheelforge-jobserver-*"))
    return f"{left[0].name} is left in TMPDIR" if left else None


def _noop_record(box: Path) -> None:
    records = box / "cache" / "probes" / "quick-noop"
    records.mkdir(parents=True)
    (records / f"{'a' * 32}.json").write_text("{}")


def _all_own(r: Run) -> str | None:
    return "a record is not wheelforge's" if "not wheelforge's" in r.out + r.err else None


CASES += [
    _r5(
        "build-folder-pickle",
        "a build folder whose stored findings are a pickle that runs a shell command",
        build,
        succeeds(_nothing_ran),
        _built_then(_crafted_pickles),
        builds=True,
        timeout=900,
    ),
    _r5(
        "build-folder-copied",
        "a project copied with its build folder (cp -a), built in the copy",
        lambda b: ["build", "--matrix", "copy/matrix.yaml", *BUILD, *cache(b)],
        succeeds(_same_sbom),
        _built_and_copied,
        builds=True,
        timeout=900,
    ),
    _r5(
        "init-deep-record",
        "init on a setup.py passing setup() a list 100,000 deep",
        lambda b: ["init", str(b / "p")],
        succeeds(),
        _deep_setup,
        timeout=300,
    ),
    _r5(
        "cache-dir-read-only-prune",
        "cache prune --all of a cache mounted read-only",
        lambda b: [sys.executable, "-c", _READ_ONLY, str(b / "cache"), "cache", "prune", "--all"],
        unharmed(lambda b: [b / "cache" / "repairs"], refused("cannot write in the cache", 5)),
        _cache_entry,
    ),
    _r5(
        "cache-dir-read-only-toolkit",
        "toolkit install 13.0 into a cache mounted read-only",
        lambda b: [
            sys.executable,
            "-c",
            _READ_ONLY,
            str(b / "cache"),
            "toolkit",
            "install",
            "13.0",
        ],
        refused("provisioning CUDA 13.0: cannot write in the cache", 5),
        _cache_entry,
    ),
    _r5(
        "pep517-editable",
        "pip install -e of a project using the backend",
        lambda b: [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "--prefix",
            str(b / "prefix"),
            "-e",
            str(b / "proj" / "kernels"),
        ],
        _pip_one_line,
        project,
        timeout=300,
    ),
    _r5(
        "check-text-abi3-so",
        "check a wheel whose _C.abi3.so is 17 bytes of text",
        lambda b: ["check", str(b / WHEEL)],
        refused("named as a shared object but not an ELF file", 4),
        _text_so,
    ),
    _r5(
        "inspect-shn-xindex-unset",
        "inspect an ELF whose e_shstrndx is SHN_XINDEX and section 0's sh_link 0",
        lambda b: ["inspect", str(b / "x.so")],
        refused("e_shstrndx is SHN_XINDEX", 4),
        _xindex(0),
    ),
    _r5(
        "inspect-shn-xindex",
        "inspect an ELF whose e_shstrndx is SHN_XINDEX, the index in section 0's sh_link",
        lambda b: ["inspect", str(b / "x.so")],
        succeeds(_shows_sm80),
        _xindex(None),
    ),
    _r5(
        "cuda-home-no-archs",
        "$CUDA_HOME's nvcc prints nothing for --list-gpu-code",
        lambda b: ["build", "--dry-run", *matrix(b), "--archs", "8.0", *cache(b)],
        refused("--list-gpu-code listed no sm_ code", 2),
        lambda b: _nvcc(b, _NO_ARCHS),
        env={"CUDA_HOME": "{box}/cuda"},
    ),
    _r5(
        "cuda-home-garbage-archs",
        "$CUDA_HOME's nvcc prints garbage for --list-gpu-code",
        lambda b: ["build", "--dry-run", *matrix(b), "--archs", "8.0", *cache(b)],
        refused("--list-gpu-code listed no sm_ code", 2),
        lambda b: _nvcc(b, _GARBAGE_ARCHS),
        env={"CUDA_HOME": "{box}/cuda"},
    ),
    _r5(
        "report-is-a-source",
        "build --report naming a source of the build",
        lambda b: build(b, "--report", str(b / "proj" / "kernels" / "csrc" / "ops.cpp")),
        unharmed(
            lambda _b: [],
            lambda r: (
                ("bad", "ops.cpp was replaced")
                if _source_kept(r)
                else refused("which the build reads", 2)(r)
            ),
        ),
        project,
    ),
    _r5(
        "report-in-a-package",
        "build --report naming a new file in a package folder",
        lambda b: build(
            b, "--report", str(b / "proj" / "kernels" / "wheelforge_kernels" / "r.json")
        ),
        refused("lies in the package folder", 2),
        project,
    ),
    *(
        _r5(
            f"screen-columns-{columns}",
            f"an error at a terminal of COLUMNS={columns}",
            lambda b: [sys.executable, "-c", _AT_A_TERMINAL, "check", str(b / "none.whl")],
            _shown_at_a_terminal,
            env={"COLUMNS": columns},
        )
        for columns in ("0", "1", "20", "10000")
    ),
    _r5(
        "screen-hint-shell-characters",
        f"the next: pip install hint for a project in a folder named {_SHELL_NAME!r}",
        build,
        succeeds(_hint_pastes),
        _shell_named,
        builds=True,
        timeout=900,
    ),
    _r5(
        "killed-jobserver",
        "a build after one SIGKILLed while it held a jobserver in TMPDIR",
        build,
        succeeds(_no_jobserver_left),
        _killed_jobserver,
        env={"TMPDIR": "{box}/tmp"},
        builds=True,
        timeout=900,
    ),
    _r5(
        "cache-list-quick-noop",
        "cache list of a cache holding a quick no-op's record",
        lambda b: ["cache", "list", *cache(b)],
        succeeds(_all_own),
        _noop_record,
    ),
    # a METADATA header cannot hold a line break: refused by the matrix check, before a compile
    # (main dbdd1c4 compiled, then died packing: email's HeaderParseError)
    _r5(
        "metadata-newline-url",
        "build with a line break in a package.urls value",
        build,
        refused("one line", 2),
        _edit(
            "  license: Apache-2.0",
            '  license: Apache-2.0\n  urls: {Home: "https://a.example/\\nb"}',
        ),
        builds=True,
        timeout=900,
    ),
    _r5(
        "metadata-newline-author",
        "build with a line break in a package.authors entry",
        build,
        refused("one line", 2),
        _edit(
            "  license: Apache-2.0", '  license: Apache-2.0\n  authors: ["A B\\nC <a@b.example>"]'
        ),
        builds=True,
        timeout=900,
    ),
    _r5(
        "metadata-newline-classifier",
        "build with a line break in a package.classifiers entry",
        build,
        refused("one line", 2),
        _edit(
            "  license: Apache-2.0",
            '  license: Apache-2.0\n  classifiers: ["Programming Language :: Python\\n :: 3"]',
        ),
        builds=True,
        timeout=900,
    ),
]


def run_case(case: Case, wf: str, root: Path) -> dict[str, object]:
    box = root / case.name
    if box.exists():
        shutil.rmtree(box)
    box.mkdir(parents=True)
    env = {**os.environ, "WF_UNDER_TEST": wf, "COLUMNS": "200", "PYTHONPATH": ""}
    env.update({k: v.replace("{box}", str(box)) for k, v in case.env.items()})
    os.environ["WF_UNDER_TEST"] = wf
    try:
        case.setup(box)
    except Exception as exc:
        return {"name": case.name, "group": case.group, "verdict": "setup", "why": repr(exc)}
    argv = case.argv(box)
    if argv[0] != sys.executable:
        argv = [wf, *argv]
    else:
        argv = [str(Path(wf).parent / "python"), *argv[1:]]
    cwd = box
    start = time.monotonic()
    shell = f'ulimit -v {MEMORY_KB}; exec timeout -k 5 {case.timeout} "$@"'
    done = subprocess.run(
        ["bash", "-c", shell, "bash", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    r = Run(done.returncode, done.stdout, done.stderr, box, time.monotonic() - start)
    verdict, why = case.judge(r)
    return {
        "name": case.name,
        "group": case.group,
        "what": case.what,
        "rc": r.rc,
        "line": r.line,
        "verdict": verdict,
        "why": why,
        "seconds": round(r.seconds, 1),
    }


def table(before: Path, after: Path) -> str:
    """The before/after table (markdown) of two runs' --json files, and the counts."""
    old = {r["name"]: r for r in json.loads(before.read_text())}
    new = {r["name"]: r for r in json.loads(after.read_text())}

    def cell(r: dict[str, object] | None) -> str:
        if r is None:
            return "-"
        line = re.sub(rf"\S*/{re.escape(str(r['name']))}/", "…/", str(r.get("line", "")))
        line = line.replace("|", "\\|").replace("\n", " ")[:140]
        return (
            f"{r['verdict']}, exit {r.get('rc')}: `{line}`"
            if line
            else f"{r['verdict']}, exit {r.get('rc')}"
        )

    out = []
    for group, title in (("issue", "issue 21's defects"), ("new", "the new round")):
        out += [
            f"### {title}",
            "",
            "| case | what | before (main f839485) | after |",
            "| --- | --- | --- | --- |",
        ]
        names = [n for n, r in new.items() if r["group"] == group]
        out += [
            f"| {n} | {new[n].get('what', '')} | {cell(old.get(n))} | {cell(new[n])} |"
            for n in names
        ]
        for label, runs in (("before", old), ("after", new)):
            counts = {
                v: sum(1 for n in names if runs.get(n, {}).get("verdict") == v)
                for v in ("clean", "unclear", "bad")
            }
            out.append(
                f"\n{label}: {len(names)} cases, {counts['clean']} clean, {counts['unclear']} unclear, {counts['bad']} bad"
            )
        out.append("")
    return "\n".join(out)


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--table":
        print(table(Path(sys.argv[2]), Path(sys.argv[3])))
        return 0
    global PROJECT  # noqa: PLW0603 - a module-level fixture the cases share
    parser = argparse.ArgumentParser()
    parser.add_argument("wheelforge")
    parser.add_argument("root", type=Path)
    parser.add_argument("--project", type=Path, default=REPO)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--skip-builds", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    PROJECT = args.project
    results = []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        if args.skip_builds and case.builds:
            continue
        result = run_case(case, args.wheelforge, args.root)
        results.append(result)
        print(
            f"{result['verdict']:8} {case.name:32} rc={result.get('rc')} {result.get('line', '')[:110]}",
            flush=True,
        )
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))
    for group in ("issue", "new"):
        counts = {
            v: sum(1 for r in results if r["group"] == group and r["verdict"] == v)
            for v in ("clean", "unclear", "bad")
        }
        print(f"{group}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
