"""Generated sources (issue 19): the matrix's ``generate`` steps, read and checked across keys,
planned as ninja edges in the variant's build folder, named by the sources and include folders
that use their outputs; a failed step's own line is what the build error says."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.build import diagnose
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError
from wheelforge.planning import ninjafile

from .conftest import GOOD_MATRIX
from .fakes import plan_for

Project = Callable[..., Path]

STEP = """\
generate:
  - name: kernels
    run: ["{python}", "{project}/tools/gen.py", "--out", "{out}"]
    inputs: [tools/gen.py]
    outputs: [k_fp16.cu, k_bf16.cu, k.h]
"""
MATRIX = GOOD_MATRIX.replace(
    "  sources: [csrc/*.cpp, csrc/*.cu]\n  include-dirs: [csrc]\n",
    '  sources: [csrc/*.cpp, "{kernels}/k_*.cu"]\n  include-dirs: [csrc, "{kernels}"]\n',
)


@pytest.fixture
def generating(project: Project, tmp_path: Path) -> Path:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "gen.py").write_text("# writes the kernels\n")
    return project(MATRIX + STEP)


def test_a_step_and_the_sources_that_name_it_are_read(generating: Path) -> None:
    matrix = load_matrix(generating)
    [step] = matrix.generate
    assert step.name == "kernels" and step.timeout == 600
    assert step.outputs == ("k_fp16.cu", "k_bf16.cu", "k.h")
    assert [s.pattern for s in matrix.extensions[0].sources] == ["csrc/*.cpp", "{kernels}/k_*.cu"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("{kernels}/k_*.cu", "{other}/k_*.cu"), "'{other}' names no generate step"),
        (
            ("{kernels}/k_*.cu", "{kernels}/x_*.cu"),
            "matches none of generate step 'kernels''s outputs",
        ),
        (("{kernels}/k_*.cu", "{kernels}/k*"), "matches k.h, which is not a source"),
        (("outputs: [k_fp16.cu", "outputs: [k_*.cu"), "without '..' or glob characters"),
        (("outputs: [k_fp16.cu", "outputs: [../k_fp16.cu"), "without '..' or glob characters"),
        (("inputs: [tools/gen.py]", "inputs: [tools/none.py]"), "'tools/none.py' matches no file"),
        (('"--out", "{out}"', '"--out", "{output}"'), "'{output}' names no generate step"),
        (("name: kernels", "name: python"), "none of python, project, out"),
        (('["{python}", "{project}/tools/gen.py", "--out", "{out}"]', "[]"), "is empty"),
    ],
)
def test_a_bad_step_is_one_clear_error(
    project: Project, tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "gen.py").write_text("")
    text = (MATRIX + STEP).replace(*change)
    with pytest.raises(ConfigError) as raised:
        load_matrix(project(text))
    assert message in f"{raised.value.message}\n{raised.value.details}"


def test_a_step_is_a_ninja_edge_every_compile_waits_for(generating: Path, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(generating), tmp_path)
    [edge] = plan.compile.generate
    folder = plan.build_dir / "generated" / "kernels"
    assert edge.folder == folder
    assert edge.outputs == tuple(folder / n for n in ("k_fp16.cu", "k_bf16.cu", "k.h"))
    assert edge.inputs == ((tmp_path / "tools" / "gen.py").resolve(),)
    assert edge.command[1:] == (f"{tmp_path.resolve()}/tools/gen.py", "--out", str(folder))
    # The generated sources are compiled (named as outputs of the step: not yet on disk), with
    # their output folder an include folder.
    sources = [s.source for s in plan.compile.steps]
    assert folder / "k_bf16.cu" in sources and folder / "k_fp16.cu" in sources
    assert "-Igenerated/kernels" in shlex.split(plan.compile.flag_sets[0].nvcc)
    text = ninjafile.render(plan)
    assert "rule generate" in text and "restat = 1" in text
    # The step runs through genstep (its deadline, its outputs checked); no edge binds ninja's
    # own `command`, which would replace the rule's.
    assert "-m wheelforge.build.genstep $genstep -- $generator" in text
    current = ""  # the rule or build each binding belongs to
    for line in text.splitlines():
        if not line.startswith("  "):
            current = line
        elif line.startswith("  command ="):
            assert current.startswith("rule "), current
    outputs = "generated/kernels/k_fp16.cu generated/kernels/k_bf16.cu generated/kernels/k.h"
    assert f"build {outputs}: generate | ../../tools/gen.py" in text
    compiles = [ln for ln in text.splitlines() if ln.startswith("build obj/")]
    assert compiles and all(ln.endswith(f"|| {outputs}") for ln in compiles)
    # Their objects are named after the step's folder, and seeded by that path-free name.
    generated_step = next(s for s in plan.compile.steps if s.source == folder / "k_fp16.cu")
    assert generated_step.object == plan.build_dir / "obj" / "generated/kernels/k_fp16.cu.o"
    assert "--frandom-seed=generated/kernels/k_fp16.cu" in generated_step.flags


def test_the_failed_step_s_own_line_is_the_error() -> None:
    output = (
        "[wheelforge 1/3] GENERATE kernels\n"
        "FAILED: generated/kernels/k.cu\n"
        "python -m wheelforge.build.genstep --name kernels ...\n"
        "Traceback (most recent call last):\n"
        "ZeroDivisionError: division by zero\n"
        "wheelforge: generate step 'kernels' failed with exit code 1: python gen.py\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    [failure] = diagnose.failures(output)
    assert diagnose.generate_failure(failure) == (
        "wheelforge: generate step 'kernels' failed with exit code 1: python gen.py"
    )
