"""Smoke test of the witwin-radar wheel wheelforge built: the extension imports after torch, and
every operator the project's own manifest (ci/native-binding-manifest.json) lists is registered."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from pathlib import Path

import torch

MANIFEST = Path(__file__).resolve().parent.parent / "ci" / "native-binding-manifest.json"


def load_extension() -> object:
    # By file, found from the distribution's RECORD: importing the package would run its
    # __init__ and need every run-time dependency; the module itself needs only torch.
    files = importlib.metadata.files("witwin-radar") or []
    [so] = [f for f in files if str(f).endswith("_radar_native.abi3.so")]
    spec = importlib.util.spec_from_file_location(
        "witwin.radar.cuda.prebuilt._radar_native", so.locate()
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_extension_imports_after_torch() -> None:
    assert load_extension() is not None


def test_every_manifest_operator_is_registered() -> None:
    load_extension()
    operators = {entry["symbol"] for entry in json.loads(MANIFEST.read_text())["operators"]}
    assert len(operators) > 20
    missing = sorted(name for name in operators if not hasattr(torch.ops._radar_native, name))
    assert missing == []


def test_an_operator_has_its_schema() -> None:
    load_extension()
    schema = str(torch.ops._radar_native.scatter_direction_forward.default._schema)
    assert "scatter_direction_forward(Tensor origin, Tensor target, Tensor(a!) out)" in schema
