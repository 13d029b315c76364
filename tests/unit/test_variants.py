from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version

from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.matrix.model import Matrix, WheelVariantsConfig
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem
from wheelforge.planning import variants

from .fakes import CUDA118, toolkit

Project = Callable[..., Path]
T13 = toolkit("13.0.88")
T131 = toolkit("13.1.115")
T118 = toolkit("11.8.89", CUDA118, gcc_max=11)


def arch_set(text: str, name: str = "default") -> ArchSet:
    return ArchSet(name, parse_arch_list(text, source="test"))


def test_auto_takes_the_newest_found_that_builds_every_arch() -> None:
    assert variants.choose("auto", arch_set("8.0 9.0+PTX"), [T131, T13, T118]).toolkit is T131
    assert variants.choose("auto", arch_set("7.0 8.0 9.0+PTX"), [T131, T13, T118]).toolkit is T118


def test_auto_falls_back_to_a_recipe() -> None:
    choice = variants.choose("auto", arch_set("7.0 8.0 9.0+PTX"), [T13])
    # sm_70: the newest release that builds it (12.4), not the oldest (11.8)
    assert choice.toolkit is None and choice.recipe is not None and choice.release == "12.4"
    assert choice.short == "cu124" and "to be provisioned" in choice.describe()
    assert "Debian trixie non-free" in choice.describe()
    kepler = variants.choose("auto", arch_set("3.5 7.0"), [T13])  # sm_35: only 11.8 builds it
    assert kepler.release == "11.8" and "Debian bookworm non-free" in kepler.describe()


def test_explicit_release_that_cannot_build_an_arch_names_one_that_can() -> None:
    with pytest.raises(ConfigError) as err:
        variants.choose("13.0", arch_set("7.0 8.0 9.0+PTX", "custom"), [T13])
    message = err.value.message
    assert "arch set 'custom': CUDA 13.0.88 at /opt/cuda-13.0.88 can't build 7.0 (sm_70)" in message
    assert "it builds sm_75 to sm_121" in message
    assert "CUDA 12.4 builds it: run 'wheelforge toolkit install 12.4'" in message


def test_arch_newer_than_the_toolkit_names_the_found_one() -> None:
    with pytest.raises(ConfigError) as err:
        variants.choose("11.8", arch_set("9.0 10.0"), [T13, T118])
    assert "CUDA 11.8.89 at /opt/cuda-11.8.89 can't build 10.0 (sm_100)" in err.value.message
    assert "CUDA 13.0.88 at /opt/cuda-13.0.88 builds it" in err.value.message


def test_mixed_arch_set_is_refused_with_a_split() -> None:
    with pytest.raises(
        ConfigError, match="mixes archs no single toolkit builds .*split it into two arch sets"
    ):
        variants.choose("auto", arch_set("3.5 10.0"), [T13, T118])


def test_unknown_releases() -> None:
    with pytest.raises(EnvironmentProblem, match="CUDA 12.2 was not found .* no recipe"):
        variants.choose("12.2", arch_set("8.0"), [T13])
    recipe = variants.choose("13.1", arch_set("8.0"), [T13])
    assert recipe.toolkit is None and recipe.release == "13.1"
    with pytest.raises(ConfigError, match="CUDA 13.1 can't build 7.0"):
        variants.choose("13.1", arch_set("7.0"), [T13])


def two_by_two(matrix: Matrix) -> Matrix:
    return dataclasses.replace(
        matrix,
        cuda=("13.0", "13.1"),
        arch_sets=(arch_set("8.0 9.0+PTX", "default"), arch_set("9.0a", "hopper")),
    )


def test_expand_ids_labels_and_only(project: Project) -> None:
    matrix = two_by_two(load_matrix(project()))
    expanded = variants.expand(matrix, [T131, T13])
    assert {v.index for v in expanded} == {None}  # one CUDA major: one folder (cuda-index: auto)
    assert [(v.id, v.local_label, v.choice.release) for v in expanded] == [
        ("default-cu130", "default.cu130", "13.0"),
        ("default-cu131", "default.cu131", "13.1"),
        ("hopper-cu130", "hopper.cu130", "13.0"),
        ("hopper-cu131", "hopper.cu131", "13.1"),
    ]
    assert [v.id for v in variants.select(expanded, ["hopper-cu131"])] == ["hopper-cu131"]
    with pytest.raises(
        ConfigError, match="--only hopper-cu999: no such variant; the matrix has default-cu130, "
    ):
        variants.select(expanded, ["hopper-cu999"])


def test_single_variant_has_no_label(project: Project) -> None:
    [only] = variants.expand(load_matrix(project()), [T13])
    assert only.id == "default-cu130" and only.local_label is None
    assert only.toolkit is T13


def test_auto_and_explicit_naming_the_same_toolkit_collapse(project: Project) -> None:
    matrix = dataclasses.replace(load_matrix(project()), cuda=("auto", "13.0"))
    assert [v.id for v in variants.expand(matrix, [T13])] == ["default-cu130"]


def test_unstable_abi_adds_the_torch_dimension(project: Project) -> None:
    text_matrix = load_matrix(project())
    matrix = dataclasses.replace(
        text_matrix,
        abi="unstable",
        torch=dataclasses.replace(
            text_matrix.torch, versions=(Version("2.13.0"), Version("2.14.1"))
        ),
    )
    expanded = variants.expand(matrix, [T13])
    assert [(v.id, v.torch, v.local_label) for v in expanded] == [
        ("default-cu130-torch213", "2.13.0", "default.cu130.torch213"),
        ("default-cu130-torch214", "2.14.1", "default.cu130.torch214"),
    ]


def test_wheel_variants_label_instead_of_local_version(project: Project) -> None:
    matrix = two_by_two(load_matrix(project()))
    matrix = matrix.with_wheel_variants(WheelVariantsConfig(enabled=True, null="default-cu130"))
    expanded = variants.expand(matrix, [T131, T13])
    assert [(v.local_label, v.variant_label) for v in expanded] == [
        (None, "default_cu130"),
        (None, "default_cu131"),
        (None, "hopper_cu130"),
        (None, "hopper_cu131"),
    ]
    assert variants.null_variant(expanded, matrix) == expanded[0]
    by_set = matrix.with_wheel_variants(WheelVariantsConfig(enabled=True, null="hopper"))
    with pytest.raises(ConfigError, match="'hopper' matches several variants"):
        variants.null_variant(expanded, by_set)
    # --only may leave the null variant out: then there is none to write.
    assert variants.null_variant(expanded[2:], matrix) is None


def test_two_majors_build_each_arch_set_once_per_release_that_builds_it(project: Project) -> None:
    """cuda: ["12.4", "13.0"]: an arch set both build gets a variant per release; one only 12.4
    builds (sm_70, which CUDA 13 dropped) gets 12.4 once, not a refusal. (Issue 20.)"""
    matrix = dataclasses.replace(
        load_matrix(project()),
        cuda=("12.4", "13.0"),
        arch_sets=(arch_set("8.0 9.0+PTX", "default"), arch_set("7.0 8.0", "volta")),
    )
    expanded = variants.expand(matrix, [T13])
    assert [(v.id, v.choice.release) for v in expanded] == [
        ("default-cu124", "12.4"),
        ("default-cu130", "13.0"),
        ("volta-cu124", "12.4"),
    ]
    assert expanded[0].choice.toolkit is None  # 12.4 is provisioned when built
    # Two CUDA majors: a folder per release (an index each, as torch publishes cu126/, cu130/);
    # a local label only where a folder holds several wheels of the version.
    assert [(v.index, v.local_label) for v in expanded] == [
        ("cu124", "default"), ("cu130", None), ("cu124", "volta"),
    ]  # fmt: skip
    asked = dataclasses.replace(matrix, cuda_index="local-version")  # one folder, +cu124 labels
    assert [(v.index, v.local_label) for v in variants.expand(asked, [T13])] == [
        (None, "default.cu124"), (None, "default.cu130"), (None, "volta.cu124"),
    ]  # fmt: skip
    # No listed release builds sm_35: the refusal names one that does.
    kepler = dataclasses.replace(matrix, arch_sets=(arch_set("3.5", "kepler"),))
    with pytest.raises(ConfigError, match="CUDA 12.4 can't build 3.5 .*CUDA 11.8 builds it"):
        variants.expand(kepler, [T13])


def test_the_matrix_table_says_which_index_each_wheel_goes_to(project: Project) -> None:
    import io

    from rich.console import Console

    from wheelforge.cli.matrix_screen import variants_table
    from wheelforge.planning.plan import wheel_version

    matrix = dataclasses.replace(load_matrix(project()), cuda=("12.4", "13.0"))
    out = io.StringIO()
    listed = variants.expand(matrix, [T13])
    versions = [wheel_version(matrix, v) for v in listed]
    table = variants_table(listed, matrix, Path("/srv/dist"), versions=versions)
    Console(file=out, width=100).print(table)
    text = out.getvalue()
    assert "cu124/" in text and "cu130/" in text
    assert "pip install --index-url file:///srv/dist/cu124 demo-ops" in " ".join(text.split())
