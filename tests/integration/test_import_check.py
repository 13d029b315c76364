"""The import check imports what a user imports (build/importcheck.py): the wheel
installed (unpacked outside the project), then ``import <package>`` and the extension module by
its dotted name, with the project's source folders off sys.path. The vecops case: a package that
imports ``from . import _C`` while its extension was named ``vecops.csrc.vecops`` (init's guess
of a dotted path) loads fine by file path, which is all the check did before, and is unusable
once installed. C++ only: no nvcc job, a build takes seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.integration.helpers import TINY_ARCH_ENV, needs_nvcc, only_wheel, wheelforge

pytestmark = needs_nvcc

VECOPS_CPP = """\
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

static torch::stable::Tensor twice(torch::stable::Tensor x) {
  torch::stable::Tensor out = torch::stable::empty_like(x);
  const float* in = static_cast<const float*>(x.data_ptr());
  float* o = static_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = 2 * in[i];
  return out;
}

STABLE_TORCH_LIBRARY(vecops, m) { m.def("twice(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(vecops, CPU, m) { m.impl("twice", TORCH_BOX(&twice)); }
"""
VECOPS_MATRIX = """\
package:
  name: vecops
  version: 0.1.0
  summary: Vector operations as a stable-ABI torch extension, built into one abi3 wheel per CUDA release
  packages: [vecops]
extension:
  name: {name}
  sources: [vecops/csrc/vecops.cpp]
torch: ">=2.10"
"""


def vecops(root: Path, name: str, init: str = "import torch\n\nfrom . import _C\n") -> Path:
    (root / "vecops" / "csrc").mkdir(parents=True)
    (root / "vecops" / "__init__.py").write_text(init)
    (root / "vecops" / "csrc" / "vecops.cpp").write_text(VECOPS_CPP)
    (root / "matrix.yaml").write_text(VECOPS_MATRIX.format(name=name))
    return root


def _python(code: str, cwd: Path, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    """*code* in this Python (its torch), with *site* (an unpacked wheel) on its path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
        env={**env, **({"PYTHONPATH": str(site)} if site else {})},
    )  # fmt: skip


def test_a_package_its_user_cannot_import_is_not_published(tmp_path: Path) -> None:
    root = vecops(tmp_path / "vecops", "vecops.csrc.vecops")
    run = wheelforge("build", cwd=root, env=TINY_ARCH_ENV)
    said = " ".join(run.err.split())
    assert run.code == 4, run.out + run.err
    assert "'import vecops' fails under torch" in said
    assert "cannot import name '_C'" in said
    assert "its package imports vecops._C, which the wheel does not have" in said
    assert "the matrix names its extension vecops.csrc.vecops" in said
    assert not list((root / "dist").glob("*.whl")), "an unimportable wheel was published"
    # What the check did before: the module file loads by its path, so it said "ok"...
    skipped = wheelforge("build", "--no-import-check", cwd=root, env=TINY_ARCH_ENV)
    assert skipped.code == 0, skipped.err
    site = tmp_path / "site"
    with zipfile.ZipFile(only_wheel(root / "dist")) as zf:
        zf.extractall(site)
    [module] = site.glob("vecops/csrc/vecops*.so")
    by_path = (
        "import importlib.util, torch\n"
        f"spec = importlib.util.spec_from_file_location('vecops.csrc.vecops', {str(module)!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\nprint('ok')\n"
    )
    assert _python(by_path, tmp_path).stdout.strip() == "ok"
    # ... while the user's import fails, as the check now says.
    imported = _python("import vecops", tmp_path, site)
    assert imported.returncode != 0 and "cannot import name '_C'" in imported.stderr


def test_the_extension_named_as_its_package_imports_it_passes(tmp_path: Path) -> None:
    root = vecops(tmp_path / "vecops", "vecops._C")
    run = wheelforge("build", cwd=root, env=TINY_ARCH_ENV)
    assert run.code == 0, run.err
    said = " ".join(run.out.split())
    assert "import check: import vecops ok under torch" in said
    assert "; import vecops._C ok under torch" in said


def test_the_source_tree_cannot_stand_in_for_the_wheel(tmp_path: Path) -> None:
    """The package imports a module of the project that the wheel does not carry: with the
    project on PYTHONPATH (a CI job's `PYTHONPATH=.`) the build Python finds it in the source
    tree, a user's does not; the check takes the project's folders off sys.path."""
    root = vecops(
        tmp_path / "vecops", "vecops._C", "import torch\nimport helpers\nfrom . import _C\n"
    )
    (root / "helpers.py").write_text("NAME = 'helpers'\n")
    on_path = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    }
    run = wheelforge("build", cwd=root, env={**TINY_ARCH_ENV, **on_path})
    said = " ".join(run.err.split())
    assert run.code == 4, run.out + run.err
    assert "'import vecops' fails" in said and "No module named 'helpers'" in said
    assert (
        "the project has helpers, which the package imports, but the wheel does not carry it"
        in said
    )
    fixed = (
        (root / "matrix.yaml")
        .read_text()
        .replace("packages: [vecops]", "packages: [vecops]\n  modules: [helpers.py]")
    )
    (root / "matrix.yaml").write_text(fixed)
    run = wheelforge("build", cwd=root, env={**TINY_ARCH_ENV, **on_path})
    assert run.code == 0, run.err
    assert "import helpers ok under torch" in " ".join(run.out.split())


def test_a_dependency_the_build_python_lacks_is_named_and_the_extension_still_imported(
    tmp_path: Path,
) -> None:
    """A module of another distribution that the build Python lacks says nothing of the wheel:
    a warning names it (and whether the wheel requires it), and the extension module is still
    imported by its dotted name, its package's __init__ skipped."""
    init = "import torch\nimport wheelforge_no_such_dependency\nfrom . import _C\n"
    root = vecops(tmp_path / "vecops", "vecops._C", init)
    run = wheelforge("build", cwd=root, env=TINY_ARCH_ENV)
    assert run.code == 0, run.out + run.err
    said = " ".join((run.out + run.err).split())
    assert "'import vecops' not checked: ModuleNotFoundError: No module named" in said
    assert "the wheel requires no distribution named wheelforge_no_such_dependency" in said
    assert "import vecops not checked under torch" in said
    assert "import vecops._C ok under torch" in said
    assert "its package's __init__ skipped: no wheelforge_no_such_dependency" in said


def test_a_namespace_portion_of_another_distribution_is_not_the_wheels_fault(
    tmp_path: Path,
) -> None:
    """witwin-radar's case: its witwin.radar (under the namespace package witwin, no
    __init__.py) imports witwin.core, which witwin-core installs beside it. The build Python
    lacks it: a warning, and the extension imported by its dotted name all the same."""
    root = tmp_path / "nsx"
    (root / "nsx" / "radar" / "csrc").mkdir(parents=True)
    (root / "nsx" / "radar" / "__init__.py").write_text(
        "import torch\nimport nsx.core\nfrom . import _C\n"
    )
    (root / "nsx" / "radar" / "csrc" / "vecops.cpp").write_text(VECOPS_CPP)
    (root / "matrix.yaml").write_text(
        "package: {name: nsx-radar, version: '0.1', packages: [nsx], dependencies: [nsx-core]}\n"
        "extension: {name: nsx.radar._C, sources: [nsx/radar/csrc/vecops.cpp]}\n"
        'torch: ">=2.10"\n'
    )
    run = wheelforge("build", cwd=root, env=TINY_ARCH_ENV)
    said = " ".join((run.out + run.err).split())
    assert run.code == 0, run.out + run.err
    assert "'import nsx.radar._C' not checked" not in said
    assert "import nsx ok under torch" in said
    assert "import nsx.radar._C ok under torch" in said and "skipped: no nsx.core" in said
    assert "the wheel requires it (nsx-core): install it into the build Python" in said
