"""The Abi values (configuration/abi.py) own what differs between the stable and the unstable
ABI, before torch is probed and given a probed torch: no other module decides it again by
comparing the ABI's name, and no other module spells a name."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.version import Version

from wheelforge.configuration import abi
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.configuration.matrix.torchspec import TorchSpec, parse_torch_spec

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "wheelforge"
OWNERS = {PACKAGE / "configuration" / "abi.py"}


def _name_comparisons(path: Path, base: Path = PACKAGE) -> list[str]:
    """Comparisons (==, !=, in) of anything with the string 'stable' or 'unstable'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            constants = [node.left, *node.comparators]
            for o in (node.left, *node.comparators):
                if isinstance(o, ast.Tuple | ast.Set | ast.List):
                    constants += o.elts
            names = [c for c in constants if isinstance(c, ast.Constant) and c.value in abi.ABIS]
            if names:
                found.append(f"{path.relative_to(base)}:{node.lineno}")
    return found


def test_no_module_but_the_flavours_compares_an_abi_name() -> None:
    compared = [
        where
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in OWNERS
        for where in _name_comparisons(path)
    ]
    assert compared == [], "ask configuration/abi.of(name) instead of comparing the ABI's name"


def test_the_checker_sees_a_planted_comparison(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('if matrix.abi == "unstable":\n    pass\nif abi in ("stable",):\n    pass\n')
    assert _name_comparisons(planted, tmp_path) == ["planted.py:1", "planted.py:3"]


def _spelled(path: Path) -> list[int]:
    """Lines of *path* where an ABI's name is a string of its own (not a word in a message,
    not a folder of a path: torch/csrc/stable)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    folders = {
        id(side)
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
        for side in (node.left, node.right)
    }
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in abi.ABIS and id(node) not in folders
    ]


def test_no_module_but_the_abis_spells_a_name() -> None:
    """The rules, the CLI's choices, the matrix model and the documents name an ABI through
    configuration/abi.py (abi.NAMES, STABLE.name, AbiName), never by a string of their own."""
    spelled = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in OWNERS
        for line in _spelled(path)
    ]
    assert spelled == []


def test_the_speller_check_sees_a_planted_name(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        'FLAVOURS = frozenset({"stable"})\nWORDS = "a stable ABI"\nHEADERS = root / "stable"\n'
    )
    assert _spelled(planted) == [1]


@dataclass(frozen=True)
class _Torch:
    """The torch facts an ABI reads (abi.TorchFacts), as a probe would give them."""

    version: Version = field(default_factory=lambda: Version("2.14.1"))
    cuda: str | None = "13.0"
    include_dir: Path = Path("/t/include")
    include_dirs: tuple[Path, ...] = (Path("/t/include"), Path("/t/include/api"))
    python_include: Path = Path("/py/include")
    python_version: str = "3.12"
    ext_suffix: str = ".cpython-312-x86_64-linux-gnu.so"
    cxx11_abi: int = 1
    cxx_std: int = 20
    cuda_include_dirs: tuple[Path, ...] = (Path("/nv/include"),)


def _matrix(tmp_path: Path, name: str) -> Matrix:
    text = "package: {name: p, version: '1'}\nextension: {name: demo, sources: [a.cu]}\n"
    text += "abi: stable\ntorch: '>=2.10'\n" if name == abi.STABLE.name else ""
    text += "abi: unstable\ntorch: ['2.14.1']\n" if name == abi.UNSTABLE.name else ""
    (tmp_path / "a.cu").touch()
    path = tmp_path / "matrix.yaml"
    path.write_text(text + "arch-sets: '8.0'\n")
    return load_matrix(path)


@dataclass(frozen=True)
class _Facts:
    """What an ABI reads of a matrix (abi.MatrixFacts)."""

    torch: TorchSpec
    python_abi: str = "cp310"
    limited_api_macro: str = "0x030a0000"
    uses_torch: bool = True


def rel(path: Path) -> str:
    """How the compile commands would spell *path*: R/ and its last part."""
    return str(PurePosixPath("R") / path.name)


def test_what_each_abi_decides_given_a_probed_torch(tmp_path: Path) -> None:
    weak = tmp_path / "gen" / "weak.h"
    stable = abi.STABLE.for_torch(_matrix(tmp_path, "stable"), _Torch(), weak=weak, rel=rel)
    assert stable.kind is abi.STABLE and stable.name == abi.STABLE.name
    assert stable.defines == ("-DPy_LIMITED_API=0x030a0000",)
    # each shared object's own target version first (its torch-target, else the lowest torch)
    assert stable.defines_for((2, 11)) == (
        "-DTORCH_TARGET_VERSION=0x020b000000000000",
        "-DPy_LIMITED_API=0x030a0000",
    )
    assert stable.target == (2, 10)  # the wheel's floor: no extension names a higher target
    assert stable.includes == ("-IR/include", "-IR/include")
    assert stable.force_include == ("-include", "R/weak.h") and abi.STABLE.weak_shims
    assert (stable.abi_tag, stable.module_suffix, stable.cxx_std) == ("cp310-abi3", ".abi3.so", 17)
    assert stable.torch_requirement == "torch>=2.10" and stable.extra_ldflags == ()
    unstable = abi.UNSTABLE.for_torch(_matrix(tmp_path, "unstable"), _Torch(), weak=weak, rel=rel)
    assert unstable.kind is abi.UNSTABLE and not abi.UNSTABLE.weak_shims
    assert unstable.force_include == () and unstable.cxx_std == 20
    assert unstable.defines == ("-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1")
    assert unstable.defines_for((2, 14)) == unstable.defines  # no target version
    assert unstable.includes == ("-IR/include", "-IR/api", "-IR/include")
    assert unstable.extra_ldflags == ("-ltorch_python", "-lc10_cuda", "-ltorch_cuda")
    assert (unstable.abi_tag, unstable.module_suffix) == ("cp312-cp312", _Torch.ext_suffix)
    assert unstable.torch_requirement == "torch==2.14.*"
    assert unstable.system_includes == ("-isystem", "R/include")


def test_every_abi_decides_for_a_torch() -> None:
    """A new ABI is one more value: its decisions given a torch come with it."""
    assert all(callable(a._decide) for a in abi.ABIS.values())
    assert tuple(abi.ABIS) == abi.NAMES


def test_what_each_flavour_decides_before_torch_is_probed() -> None:
    spec = parse_torch_spec(["2.13.0", "2.14.1"])
    stable, unstable = abi.of("stable"), abi.of("unstable")
    assert stable.torches(spec) == (None,)
    assert unstable.torches(spec) == ("2.13.0", "2.14.1")
    uses = _Facts(torch=spec)
    assert stable.requirement(uses) == "torch>=2.13" and unstable.requirement(uses) is None
    assert unstable.build_requirement(spec) == "torch==2.13.0"
    assert stable.build_requirement(spec) == "torch>=2.13"


def test_a_wheel_whose_binaries_use_no_torch_requires_the_torch_as_written(
    tmp_path: Path,
) -> None:
    """bitsandbytes: every extension kind: plain (ctypes, no libtorch), so the wheel requires the
    project's own range (its pip wheel's torch<3,>=2.4), neither a stable-ABI floor nor a pin."""
    spec = parse_torch_spec(">=2.4,<3")
    free = _Facts(torch=spec, uses_torch=False)
    assert abi.torch_free_requirement(free) == "torch<3,>=2.4"
    assert abi.torch_free_requirement(_Facts(torch=spec)) is None
    assert abi.STABLE.requirement(free) == abi.UNSTABLE.requirement(free) == "torch<3,>=2.4"
    weak = tmp_path / "weak.h"
    decided = abi.STABLE.for_torch(free, _Torch(), weak=weak, rel=rel)
    assert decided.torch_requirement == "torch<3,>=2.4" and decided.torch_free
    used = abi.STABLE.for_torch(_Facts(torch=spec), _Torch(), weak=weak, rel=rel)
    assert used.torch_requirement == "torch>=2.4,<3" and not used.torch_free
