"""Which CUDA releases wheelforge provisions from PyPI, and at which exact versions:
data/cuda-pypi.json (written by tools/cuda_pypi.py from PyPI; the network test
tests/integration/test_provision_data.py keeps it true) read by toolchain/provision.py. A release
whose packages that file does not hold whole is no recipe: `toolkit list`, `cuda: auto` and
`matrix --github` never offer or choose it, and `toolkit install` says why."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from wheelforge.configuration import releases
from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.releases import PypiSource
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem, ToolError
from wheelforge.planning import variants
from wheelforge.toolchain import provision

SHIPPED = json.loads(resources.files("wheelforge").joinpath("data/cuda-pypi.json").read_text())


def _pypi_releases() -> list[releases.Release]:
    return [r for r in releases.releases() if any(isinstance(s, PypiSource) for s in r.provision)]


def test_every_pypi_release_of_the_table_is_pinned_whole_or_said_unavailable() -> None:
    pypi = {r.version for r in _pypi_releases()}
    assert set(SHIPPED["releases"]) | set(SHIPPED["unavailable"]) == pypi
    assert not set(SHIPPED["releases"]) & set(SHIPPED["unavailable"])
    for r in _pypi_releases():
        entry = SHIPPED["releases"].get(r.version)
        if entry is None:
            continue
        (how,) = [s for s in r.provision if isinstance(s, PypiSource)]
        assert set(entry["packages"]) == set(how.packages), r.version
        for name, p in entry["packages"].items():
            assert p["wheel"].startswith(f"{name.replace('-', '_')}-{p['version']}-"), p
            assert "x86_64" in p["wheel"] and len(p["sha256"]) == 64 and p["size"] > 0, p


def test_the_recipes_install_exact_versions() -> None:
    for recipe in provision.RECIPES:
        if recipe.source != "pypi":
            assert recipe.pins == ()
            continue
        entry = SHIPPED["releases"][recipe.release]
        assert recipe.pins == tuple(
            f"{name}=={entry['packages'][name]['version']}"
            for name in recipe.how.packages  # type: ignore[union-attr]
        )
        assert all("*" not in pin for pin in recipe.pins)
        size = sum(p["size"] for p in entry["packages"].values())
        assert recipe.download == f"about {round(size / 1e6)} MB"


def test_cccl_is_pinned_by_the_metapackage_not_by_the_release_number() -> None:
    """nvidia-cuda-cccl's versions follow CCCL, not CUDA: PyPI has no ==13.5.*; the 13.5
    cuda-toolkit pins a 13.3.x one."""
    for version, entry in SHIPPED["releases"].items():
        assert entry["metapackage"].startswith(f"cuda-toolkit {version}."), entry
    newest = SHIPPED["releases"].get("13.5")
    if newest is not None:
        assert not newest["packages"]["nvidia-cuda-cccl"]["version"].startswith("13.5.")


# --- a release PyPI lacks is no recipe ------------------------------------------------------


def _pins_without(release: str) -> provision.PypiPins:
    data = json.loads(json.dumps(SHIPPED))
    data["releases"].pop(release)
    data["unavailable"][release] = "PyPI has no nvidia-cuda-cccl==13.5.*"
    return provision.parse_pins(json.dumps(data))


def test_a_release_without_pins_is_never_offered_or_chosen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    newest = _pypi_releases()[-1].version
    if newest not in SHIPPED["releases"]:
        pytest.skip(f"the shipped data already lacks {newest}")
    pins = _pins_without(newest)
    recipes = provision.recipes_of(releases.releases(), pins)
    assert newest not in {r.release for r in recipes}
    assert len(recipes) == len(provision.RECIPES) - 1
    monkeypatch.setattr(provision, "RECIPES", recipes)
    monkeypatch.setattr(provision, "pypi_pins", lambda: pins)
    monkeypatch.setattr(variants, "RECIPES", recipes)
    # toolkit list offers what not_found returns; cuda: auto takes the newest recipe.
    assert newest not in {r.release for r in provision.not_found([])}
    arch_set = ArchSet("default", parse_arch_list("8.0 9.0+PTX", source="t"))
    chosen = variants.choose("auto", arch_set, [])
    assert chosen.recipe is not None and chosen.release != newest
    assert chosen.release == recipes[0].release
    # cuda: ["13.5"] named outright: refused before anything downloads, saying why.
    with pytest.raises(EnvironmentProblem) as named:
        variants.choose(newest, arch_set, [])
    assert "nvidia-cuda-cccl==13.5.*" in named.value.message
    with pytest.raises(ConfigError) as raised:
        provision.install_release(newest, Path("/nonexistent-cache"))
    message = raised.value.message
    assert f"CUDA {newest} cannot be provisioned from PyPI" in message
    assert "nvidia-cuda-cccl==13.5.*" in message and "cuda-pypi.json" in message
    assert "CUDA_HOME" in message


def test_a_pin_file_missing_one_package_drops_the_release() -> None:
    data = json.loads(json.dumps(SHIPPED))
    some = next(iter(data["releases"]))
    data["releases"][some]["packages"].pop("nvidia-nvvm")
    recipes = provision.recipes_of(releases.releases(), provision.parse_pins(json.dumps(data)))
    assert some not in {r.release for r in recipes if r.source == "pypi"}


def test_the_pip_download_names_the_pins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    recipe = next(r for r in provision.RECIPES if r.source == "pypi")
    seen: list[list[str]] = []

    def fake_pip(argv: list[object], **_: object) -> None:
        seen.append([str(a) for a in argv])
        raise ToolError("stop here")

    from wheelforge.toolchain import downloads

    monkeypatch.setattr(downloads, "pip", fake_pip)
    with pytest.raises(ToolError, match="stop here"):
        provision._fetch(recipe, tmp_path / "prefix", tmp_path / "dl")
    (argv,) = seen
    assert argv[-len(recipe.pins) :] == list(recipe.pins)


# --- tools/cuda_pypi.py's choice among PyPI's files -------------------------------------------


def _tool() -> object:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / "cuda_pypi.py"
    spec = importlib.util.spec_from_file_location("cuda_pypi", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tool_takes_the_newest_live_linux_wheel_the_pin_admits() -> None:
    from packaging.requirements import Requirement

    def wheel(name: str, platform: str, *, yanked: bool = False) -> dict[str, object]:
        return {
            "filename": f"{name}-py3-none-{platform}.whl",
            "yanked": yanked,
            "digests": {"sha256": "0" * 64},
            "size": 7,
        }

    x86 = "manylinux2010_x86_64.manylinux_2_12_x86_64"
    doc = {
        "releases": {
            "13.3.3.4.1": [wheel("nvidia_cuda_cccl-13.3.3.4.1", x86)],
            "13.3.5.0.6": [wheel("nvidia_cuda_cccl-13.3.5.0.6", "win_amd64")],  # no Linux one
            "13.3.4.1.2rc1": [wheel("nvidia_cuda_cccl-13.3.4.1.2rc1", x86)],  # a pre-release
            "13.3.4.3.1": [wheel("nvidia_cuda_cccl-13.3.4.3.1", x86, yanked=True)],
            "13.5.0": [wheel("nvidia_cuda_cccl-13.5.0", x86)],  # outside the pin
        }
    }
    tool = _tool()
    found = tool.resolve(doc, Requirement("nvidia-cuda-cccl==13.3.*"))  # type: ignore[attr-defined]
    assert found["version"] == "13.3.3.4.1" and found["size"] == 7
    with pytest.raises(LookupError, match="no nvidia-cuda-cccl==13.4"):
        tool.resolve(doc, Requirement("nvidia-cuda-cccl==13.4.*"))  # type: ignore[attr-defined]
