"""Generated sources and header libraries in real builds (issue 19), C++ only so they are quick:
a generate step runs once and not again on a no-op, again when its script changes; a header
library that is a git checkout is named by its commit in the SBOM, and another commit
recompiles even when its files keep old modification times; a failed, overdue or incomplete
step fails the build with one line naming it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
MATRIX = """\
package:
  name: gendemo
  version: 1.0.0
  packages: [gendemo]
  pyproject: false
header-libraries:
  - name: mylib
    path: third_party/mylib
generate:
  - name: gen
    run: ["{python}", "{project}/tools/gen.py", "{out}", "RUNS"]
    inputs: [tools/gen.py]
    outputs: [gen_ops.cpp, gen_ops.h]
    timeout: TIMEOUT
extension:
  name: gendemo._C
  sources: [csrc/ops.cpp, "{gen}/gen_ops.cpp"]
  include-dirs: ["{gen}"]
torch: ">=2.10"
arch-sets: "8.0"
"""
GENERATOR = """\
import pathlib, sys
out, runs = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
runs.write_text(runs.read_text() + "run\\n" if runs.exists() else "run\\n")
(out / "gen_ops.h").write_text("int generated_value();\\n")
(out / "gen_ops.cpp").write_text(
    '#include "gen_ops.h"\\n#include <mylib/value.h>\\nint generated_value() { return MYLIB_VALUE; }\\n'
)
"""


def _git(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [*GIT, *map(str, args)], cwd=cwd, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def _commit_value(lib: Path, value: int) -> str:
    (lib / "include" / "mylib" / "value.h").write_text(f"#define MYLIB_VALUE {value}\n")
    _git("add", ".", cwd=lib)
    _git("commit", "-qm", f"value {value}", cwd=lib)
    return _git("rev-parse", "HEAD", cwd=lib)


def _project(root: Path, *, timeout: int = 600, generator: str = GENERATOR) -> Path:
    (root / "gendemo").mkdir(parents=True)
    (root / "gendemo" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    # getenv: the module needs libc, as every real one does (auditwheel reads the libc from it)
    (root / "csrc" / "ops.cpp").write_text(
        '#include <cstdlib>\n#include "gen_ops.h"\n'
        'int twice() { return std::getenv("X") ? 2 * generated_value() : 0; }\n'
    )
    (root / "tools").mkdir()
    (root / "tools" / "gen.py").write_text(generator)
    lib = root / "third_party" / "mylib"
    (lib / "include" / "mylib").mkdir(parents=True)
    _git("init", "-q", cwd=lib)
    text = MATRIX.replace("RUNS", str(root / "runs.txt")).replace("TIMEOUT", str(timeout))
    (root / "matrix.yaml").write_text(text)
    return lib


def _build(root: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "wheelforge", "build", "--report", root / "report.json"],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "WHEELFORGE_COMPILE_CACHE": "none"},
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _sbom_component(root: Path, name: str) -> dict[str, object]:
    [wheel] = sorted((root / "dist").glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith("sboms/wheelforge.cdx.json"))
        document = json.loads(zf.read(member))
    return next(c for c in document["components"] if c["name"] == name)


def _compile(root: Path) -> dict[str, int]:
    [variant] = json.loads((root / "report.json").read_text())["variants"]
    return variant["compile"]


def test_generated_sources_and_a_header_library_follow_their_inputs(tmp_path: Path) -> None:
    lib = _project(tmp_path)
    first = _commit_value(lib, 1)
    built = _build(tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    runs = tmp_path / "runs.txt"
    assert runs.read_text() == "run\n"  # the step ran once, in the build folder
    assert (
        not (tmp_path / "gen_ops.cpp").exists()
        and not (tmp_path / "tools" / "gen_ops.cpp").exists()
    )
    assert _compile(tmp_path)["generated"] == 1 and _compile(tmp_path)["compiled"] == 3
    component = _sbom_component(tmp_path, "mylib")
    assert component["version"] == first and component["purl"] == f"pkg:generic/mylib@{first}"

    # A no-op: neither the step nor a compile runs.
    again = _build(tmp_path)
    assert again.returncode == 0, again.stderr
    assert "nothing to compile: up to date" in again.stderr
    assert runs.read_text() == "run\n"

    # Another commit of the library recompiles, though its header keeps an old mtime (the
    # objects are newer: ninja's mtimes alone would say up to date); the step does not run.
    second = _commit_value(lib, 2)
    header = lib / "include" / "mylib" / "value.h"
    os.utime(header, (946684800, 946684800))  # 2000-01-01
    other = _build(tmp_path)
    assert other.returncode == 0, other.stderr
    assert _compile(tmp_path)["compiled"] == 3 and _compile(tmp_path)["generated"] == 0
    assert runs.read_text() == "run\n"
    assert _sbom_component(tmp_path, "mylib")["version"] == second

    # The generator changed: it runs again (and what includes its outputs recompiles).
    (tmp_path / "tools" / "gen.py").write_text(GENERATOR + "# v2\n")
    rerun = _build(tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    assert runs.read_text() == "run\nrun\n"
    assert _compile(tmp_path)["generated"] == 1


@pytest.mark.parametrize(
    ("generator", "timeout", "line"),
    [
        (
            "import sys\nprint('no luck')\nsys.exit(3)\n",
            600,
            "generate step 'gen' failed with exit code 3",
        ),
        ("import time\ntime.sleep(30)\n", 1, "generate step 'gen' ran past its deadline of 1 s"),
        (
            "import pathlib, sys\n(pathlib.Path(sys.argv[1]) / 'gen_ops.h').write_text('')\n",
            600,
            "generate step 'gen' did not write gen_ops.cpp, which generate[].outputs declares",
        ),
    ],
)
def test_a_failed_step_is_one_line_naming_it(
    tmp_path: Path, generator: str, timeout: int, line: str
) -> None:
    lib = _project(tmp_path, timeout=timeout, generator=textwrap.dedent(generator))
    _commit_value(lib, 1)
    failed = _build(tmp_path)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    first = next(ln for ln in failed.stderr.splitlines() if "error" in ln.lower())
    assert line in first, failed.stderr
    assert "build.log" in first
    assert line in (tmp_path / "build" / "wheelforge" / "default-cu130" / "build.log").read_text()
