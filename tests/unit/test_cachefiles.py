"""Cache entries are validated on read and a malformed one is discarded with a note (issue 21:
valid JSON of the wrong shape in the probe cache or an environment marker crashed every later
run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wheelforge.foundation import cachefiles
from wheelforge.toolchain import envs, probecache
from wheelforge.toolchain import toolkits as toolkit

from . import fakes


@pytest.mark.parametrize(
    ("value", "shape", "fits"),
    [
        ({"a": 1}, {"a": int}, True),
        ({"a": True}, {"a": int}, False),  # a bool is no count
        ({}, {"a?": int}, True),
        ({"a": None}, {"a": (int, None)}, True),
        ([1, 2], [int], True),
        ([1, "2"], [int], False),
        ({"p": [1, 2], "q": None}, {str: ([int], None)}, True),
        ({"p": "x"}, {str: ([int], None)}, False),
        ("2.10", lambda v: v == "2.10", True),
    ],
)
def test_shapes(value: object, shape: object, fits: bool) -> None:
    assert cachefiles.fits(value, shape) is fits


@pytest.mark.parametrize(
    "stored",
    [
        {"watch": [], "value": {}},  # a list where the watch mapping goes
        {"watch": {"/x": "big"}, "value": {"version": "1"}},
        {"watch": {}, "value": []},
        [],
        "text",
    ],
)
def test_a_probe_entry_of_another_shape_is_discarded_and_probed_again(
    tmp_path: Path, stored: object, capsys: pytest.CaptureFixture[str]
) -> None:
    probecache.store(tmp_path, "tool", {"k": 1}, {"version": "1"}, [])
    entry = next((tmp_path / "probes" / "tool").iterdir())
    entry.write_text(json.dumps(stored))
    calls = []

    def probe() -> tuple[dict[str, object], list[str | Path]]:
        calls.append(1)
        return {"version": "2"}, []

    assert probecache.cached(tmp_path, "tool", {"k": 1}, probe, shape={"version": str}) == {
        "version": "2"
    }
    assert calls == [1]
    assert "the probe result" in capsys.readouterr().err
    # Stored again, whole: the next lookup hits.
    assert probecache.lookup(tmp_path, "tool", {"k": 1}, {"version": str}) == {"version": "2"}


def test_an_nvcc_answer_of_another_shape_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("")
    good = fakes.toolkit()
    answer = {
        "nvcc": str(nvcc),
        "root": str(tmp_path),
        "version": str(good.version),
        "sass": sorted(good.sass),
        "cudart_static": None,
        "gcc_max": None,
        "split_compile": True,
        "jobserver": True,
    }
    monkeypatch.setattr(toolkit, "_ask", lambda _nvcc: (answer, [nvcc]))
    toolkit.probe_toolkit(nvcc, cache=tmp_path)
    entry = next((tmp_path / "probes" / "nvcc").iterdir())
    stored = json.loads(entry.read_text())
    stored["value"]["sass"] = "sm_90"  # a string where the list of sm numbers goes
    entry.write_text(json.dumps(stored))
    assert toolkit.probe_toolkit(nvcc, cache=tmp_path).sass == good.sass
    stored["value"]["version"] = "thirteen"
    entry.write_text(json.dumps(stored))
    assert toolkit.probe_toolkit(nvcc, cache=tmp_path).version == good.version


@pytest.mark.parametrize("marker", ["[]", '{"torch": 2}', "{", '{"torch": "2", "cuda": "no"}'])
def test_an_environment_with_a_malformed_marker_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: str
) -> None:
    spec = envs.EnvSpec(torch="2.13.0")
    made = []

    def build(spec: envs.EnvSpec, cache: Path) -> Path:
        path = cache / envs.ENVS / envs._name(spec, "2.13.0+cpu")
        made.append(path)
        path.mkdir(parents=True, exist_ok=True)
        info = {"spec": "2.13.0", "torch": "2.13.0+cpu", "cuda": False, "python": "3.12"}
        info["made_from"] = envs._made_from(spec)
        (path / envs.MARKER).write_text(json.dumps(info))
        return path

    monkeypatch.setattr(envs, "_build", build)
    first = envs.ensure_env(spec, tmp_path)
    (first.path / envs.MARKER).write_text(marker)
    again = envs.ensure_env(spec, tmp_path)
    assert len(made) == 2 and again.torch == "2.13.0+cpu" and again.created


def test_a_malformed_toolkit_json_is_no_toolkit(tmp_path: Path) -> None:
    folder = tmp_path / toolkit.TOOLKITS / "cuda-13.0-pypi"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "nvcc").write_text("")
    (folder / toolkit.TOOLKIT_JSON).write_text("[1, 2]")
    assert toolkit.provisioned(tmp_path) == []
    assert toolkit.describe_provisioned(folder) is None
