"""extensions[].torch-target (issue 32): shared objects of one stable-ABI wheel compiled for
different torch target versions, each with its own -DTORCH_TARGET_VERSION; the wheel requires the
highest; a target outside the matrix's torch versions, or on an unstable-ABI matrix, is refused."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.fakes import make_wheel
from wheelforge.binaries import abicheck, reader, registry
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError
from wheelforge.planning import hostshare, ninjafile

from .fakes import DEMO_OPS_HEAD as HEAD
from .fakes import plan_for

Project = Callable[..., Path]

TWO = (
    HEAD
    + """\
extensions:
  - name: demo_ops._C
    sources: [csrc/ops.cpp, csrc/kernel.cu]
    torch-target: "2.10"
  - name: demo_ops.lib._C
    sources: [csrc/ops.cpp, csrc/kernel.cu]
    torch-target: "2.11"
tests:
  path: demo_ops
"""
)
V210, V211 = (
    "-DTORCH_TARGET_VERSION=0x020a000000000000",
    "-DTORCH_TARGET_VERSION=0x020b000000000000",
)


@pytest.fixture
def two(project: Project, tmp_path: Path) -> Path:
    (tmp_path / "demo_ops" / "lib").mkdir()
    (tmp_path / "demo_ops" / "lib" / "__init__.py").write_text("")
    return project(TWO)


def test_each_extension_reads_its_own_target_and_the_wheel_requires_the_highest(
    two: Path,
) -> None:
    matrix = load_matrix(two)
    assert [e.torch_target for e in matrix.extensions] == [(2, 10), (2, 11)]
    assert [matrix.torch_target_of(e) for e in matrix.extensions] == [(2, 10), (2, 11)]
    assert matrix.torch.target == (2, 10)  # the default of an extension that names none
    assert matrix.torch.floor == (2, 11)
    assert matrix.torch.requirement == "torch>=2.11"
    assert matrix.tests is not None and matrix.tests.torch == ("2.11",)  # not 2.10: no install


def test_an_extension_without_a_target_compiles_for_the_lowest_torch(
    project: Project, tmp_path: Path
) -> None:
    (tmp_path / "demo_ops" / "lib").mkdir()
    (tmp_path / "demo_ops" / "lib" / "__init__.py").write_text("")
    matrix = load_matrix(project(TWO.replace('    torch-target: "2.10"\n', "")))
    assert [matrix.torch_target_of(e) for e in matrix.extensions] == [(2, 10), (2, 11)]
    assert matrix.torch.requirement == "torch>=2.11"


def test_each_extensions_compiles_carry_their_own_define(two: Path, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(two), tmp_path)
    first, second = (f for f in plan.compile.flag_sets)
    for rule in ("cxx", "cc", "nvcc"):
        words = shlex.split(getattr(first, rule)), shlex.split(getattr(second, rule))
        assert V210 in words[0] and V211 not in words[0], rule
        assert V211 in words[1] and V210 not in words[1], rule
    # ops.cpp with the same flags but for the target would be one compile (test_multi_extension):
    # with two targets it is two, one per extension, each linked into its own .so.
    sources = [s.source.name for s in hostshare.all_steps(plan)]
    assert sources.count("ops.cpp") == 2 and sources.count("kernel.cu") == 2
    c, lib = plan.links
    assert set(c.objects).isdisjoint(lib.objects)
    assert (c.torch_target, lib.torch_target) == ((2, 10), (2, 11))
    assert plan.abi.target == (2, 11)  # the wheel's floor
    assert plan.abi.torch_requirement == "torch>=2.11"
    # the commands ninja runs (what --dry-run lists): both defines, each in its own flag set
    text = ninjafile.render(plan)
    assert text.count(V210) == 3 and text.count(V211) == 3  # cxx, cc and nvcc flags of each


def test_one_target_keeps_the_command_it_had(project: Project, tmp_path: Path) -> None:
    """No torch-target: every compile has the lowest torch's define, as before."""
    plan = plan_for(
        load_matrix(project(HEAD + "extension:\n  name: demo_ops._C\n  sources: [csrc/*.cpp]\n")),
        tmp_path,
    )
    words = shlex.split(plan.compile.flag_sets[0].cxx)
    assert words.count(V210) == 1
    assert words.index(V210) + 1 == words.index("-DPy_LIMITED_API=0x030a0000")


@pytest.mark.parametrize(
    ("torch", "target", "message"),
    [
        ('">=2.10"', '"2.9"', r"extensions\[1\]\.torch-target '2\.9' is below the lowest torch"),
        (
            '">=2.10,<2.12"',
            '"2.12"',
            r"'2\.12' is outside the matrix's torch range '>=2\.10,<2\.12'",
        ),
        (
            "['2.10', '2.11.0']",
            '"2.12"',
            r"'2\.12' is above the newest torch of the matrix \(2\.11\.0\)",
        ),
        ('">=2.10"', '"2.11.1"', r"'2\.11\.1' is not a torch release as major\.minor"),
        ('">=2.10"', '"latest"', r"'latest' is not a torch release"),
    ],
)
def test_a_target_outside_the_matrix_is_one_line(
    two: Path, torch: str, target: str, message: str
) -> None:
    text = TWO.replace('torch: ">=2.10"', f"torch: {torch}").replace('"2.11"\n', f"{target}\n")
    two.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_matrix(two)
    assert "\n" not in caught.value.message.strip()


def test_an_unstable_abi_matrix_has_no_target(two: Path) -> None:
    two.write_text(TWO.replace('torch: ">=2.10"', "torch: ['2.13.0']\nabi: unstable"))
    with pytest.raises(
        ConfigError, match=r"extensions\[0\]\.torch-target: an unstable-ABI wheel"
    ) as caught:
        load_matrix(two)
    assert str(caught.value).count("torch-target: an unstable-ABI") == 2  # both, each a line


def test_a_target_within_a_list_is_kept(two: Path) -> None:
    two.write_text(TWO.replace('torch: ">=2.10"', "torch: ['2.10.0', '2.11.0', '2.12.0']"))
    matrix = load_matrix(two)
    assert matrix.torch.requirement == "torch>=2.11"
    assert matrix.tests is not None and matrix.tests.torch == ("2.11.0", "2.12.0")


def test_each_binary_is_judged_against_its_own_target(tmp_path: Path) -> None:
    """A build's shared object compiled for torch 2.9 that imports a 2.10 shim (ext.so's
    torch_library_impl) fails, though the wheel's floor (another extension's 2.10) admits it."""
    wheel = make_wheel(
        tmp_path, "pkg-1.0-cp310-abi3-manylinux_2_17_x86_64.whl", "ext.so", requires="torch>=2.10"
    )
    read = reader.read_wheel(wheel, registry.reading(registry.all_rules(), metadata=True))
    context = abicheck.wheel_context(read, torch=None, guards={})
    rules = registry.applicable("stable")
    [whole] = abicheck.judge_wheel(read, context, rules)
    assert whole.violations == ()  # against the wheel's floor
    [own] = abicheck.judge_wheel(read, context, rules, targets={"pkg/_C.abi3.so": (2, 9)})
    assert [v.rule for v in own.violations] == ["floor", "shim-version"]
    assert own.declared_torch == (2, 9)
    [same] = abicheck.judge_wheel(read, context, rules, targets={"pkg/_C.abi3.so": (2, 10)})
    assert same.violations == ()


def test_a_test_torch_below_the_floor_is_refused(two: Path) -> None:
    two.write_text(
        TWO.replace("  path: demo_ops\n", "  path: demo_ops\n  torch: ['2.10.0', '2.11.0']\n")
    )
    with pytest.raises(
        ConfigError, match=r"tests\.torch: the wheel requires torch>=2\.11 .* on 2\.10\.0;"
    ):
        load_matrix(two)
