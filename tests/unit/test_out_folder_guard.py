"""The output folder's guard (issue 32): a wheel another variant published is never replaced,
whichever build folder that variant was built in; two builds publishing into one ``--out``
check and publish one after the other; output, build and cache folders never nest."""

from __future__ import annotations

import json
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.build import preflight, variant
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import locks
from wheelforge.foundation.errors import ConfigError
from wheelforge.packaging import buildinfo, provenance
from wheelforge.planning import selection

from . import fakes
from .conftest import GOOD_MATRIX
from .fakes import plan_for

Project = Callable[..., Path]


def built_wheel(path: Path, variant_id: str, arch_set: str, payload: bytes) -> Path:
    """A wheel as wheelforge publishes it: with its build info naming the variant."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo_ops/_C.abi3.so", payload)
        info = fakes.build_info(variant_id, arch_set)
        zf.writestr(f"demo_ops-1.2.0.dist-info/{selection.BUILD_INFO_NAME}", buildinfo.text(info))
    return path


def test_the_build_info_names_the_variant_of_a_published_wheel(tmp_path: Path) -> None:
    made = built_wheel(tmp_path / "a.whl", "default-cu130", "8.0 9.0+PTX", b"x")
    assert provenance.published_variant(made) == ("default-cu130", "8.0 9.0+PTX")
    with zipfile.ZipFile(tmp_path / "b.whl", "w") as zf:
        zf.writestr("demo_ops/__init__.py", "")  # another tool's wheel: no build info
    assert provenance.published_variant(tmp_path / "b.whl") is None
    (tmp_path / "c.whl").write_bytes(b"not a zip")
    assert provenance.published_variant(tmp_path / "c.whl") is None
    # A build info not of the model (read through buildinfo.BuildInfo) vouches for nothing.
    with zipfile.ZipFile(tmp_path / "d.whl", "w") as zf:
        info = {"variant": "default-cu130", "arch_set": "8.0"}
        zf.writestr(f"demo_ops-1.2.0.dist-info/{selection.BUILD_INFO_NAME}", json.dumps(info))
    assert provenance.published_variant(tmp_path / "d.whl") is None


def test_a_wheel_another_build_folders_variant_published_is_never_replaced(
    project: Project, tmp_path: Path
) -> None:
    """Its stamp lies in the other build folder, where the stamp check never looked: the
    wheel was replaced with a warning. Its build info says whose it is."""
    plan = plan_for(load_matrix(project(GOOD_MATRIX)), tmp_path)  # arch set 8.0 9.0+PTX
    name = "demo_ops-1.2.0-cp310-abi3-linux_x86_64.whl"
    theirs = built_wheel(plan.out_dir / name, plan.variant.id, "7.5", b"theirs")
    ours = built_wheel(
        tmp_path / "stage" / name, plan.variant.id, str(plan.variant.arch_set), b"ours"
    )
    with pytest.raises(ConfigError) as refused:
        variant._refuse_to_replace(theirs, ours, plan)
    message = refused.value.message
    assert (
        f"--out {plan.out_dir}: {name} is the wheel of variant {plan.variant.id} (arch set 7.5)"
        in message
    )
    assert "built from another build folder" in message and "another --out" in message
    # The same variant's wheel (a rebuild from another build folder) is replaced, as before.
    built_wheel(theirs, plan.variant.id, str(plan.variant.arch_set), b"older")
    variant._refuse_to_replace(theirs, ours, plan)


def test_two_publishers_into_one_out_folder_take_turns(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    first_inside = threading.Event()
    seen_by_second: list[bool] = []

    def second() -> None:
        first_inside.wait()
        with locks.hold_folder(out, what="--out"):
            seen_by_second.append(first_inside.is_set())  # True: both held it at once

    thread = threading.Thread(target=second)
    thread.start()
    with locks.hold_folder(out, what="--out"):
        first_inside.set()
        time.sleep(0.3)  # time for the second to reach the lock (it must then wait)
        first_inside.clear()
    thread.join(timeout=30)
    assert seen_by_second == [False]
    assert list(out.iterdir()) == []  # no lock file in the output folder


@pytest.mark.parametrize(
    ("folders", "expected"),
    [
        ({"--out": "w", "--build-dir": "w"}, "--out {w} is --build-dir {w}"),
        ({"--out": "b/dist", "--build-dir": "b"}, "--out {b/dist} lies inside --build-dir {b}"),
        ({"--out": "d", "--build-dir": "d/build"}, "--build-dir {d/build} lies inside --out {d}"),
        ({"--out": "c/dist", "--cache-dir": "c"}, "--out {c/dist} lies inside --cache-dir {c}"),
        ({"--out": "d", "--cache-dir": "d/cache"}, "--cache-dir {d/cache} lies inside --out {d}"),
        (
            {"--build-dir": "c/b", "--cache-dir": "c"},
            "--build-dir {c/b} lies inside --cache-dir {c}",
        ),
    ],
)
def test_output_build_and_cache_folders_never_nest(
    tmp_path: Path, folders: dict[str, str], expected: str
) -> None:
    paths = {flag: tmp_path / rel for flag, rel in folders.items()}
    with pytest.raises(ConfigError) as refused:
        preflight.refuse_nested(paths)
    for rel in {*folders.values()}:
        expected = expected.replace("{" + rel + "}", str(tmp_path / rel))
    assert refused.value.message.startswith(expected)


def test_an_out_or_build_folder_inside_another_builds_folder_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other-build"
    other.mkdir()
    (other / locks.LOCK_NAME).touch()  # what a build folder holds while and after a build
    for flag in ("--out", "--build-dir"):
        folders = {"--out": tmp_path / "dist", "--build-dir": tmp_path / "build"}
        folders[flag] = other / "default-cu130" / "x"
        with pytest.raises(
            ConfigError, match=f"{flag} .* lies inside {other}, another build's folder"
        ):
            preflight.refuse_nested(folders)
    preflight.refuse_nested({"--out": tmp_path / "dist", "--build-dir": tmp_path / "build",
                             "--cache-dir": tmp_path / "build" / "cache"})  # fmt: skip
