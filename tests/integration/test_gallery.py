"""``wheelforge check`` on the released-wheel gallery (tests/data/gallery.toml): every wheel gets
the verdict that loading its binaries decided (tools/gallery.py evidence; tests/data/gallery.md shows
where each was loaded and what happened). No false error: the errors check reports are exactly
the evidence's; every real problem found: each rule the evidence blames reports; a warning only
where the evidence names it (``warnings``) or tolerates it (``may_warn``).

The wheels come from PyPI, pinned by version and sha256, cached between runs under
``$XDG_CACHE_HOME/wheelforge-tests/gallery`` (``WHEELFORGE_GALLERY_CACHE`` overrides). The
entries marked ``ci`` (15 small ones, 83 MB: ~30 s from a cold cache) run in CI's network step;
the rest (3.3 GB: torch, vLLM, FBGEMM, sgl-kernel, ...) are marked ``sweep`` too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import REPO, wheelforge

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = [pytest.mark.network]

GALLERY = REPO / "tests" / "data" / "gallery.toml"
ENTRIES: list[dict[str, Any]] = tomllib.loads(GALLERY.read_text(encoding="utf-8"))["wheel"]
# pip's words when no index can be reached: skip, don't fail.
_OFFLINE = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution",
            "Network is unreachable", "No route to host")  # fmt: skip


def _cache() -> Path:
    if folder := os.environ.get("WHEELFORGE_GALLERY_CACHE"):
        return Path(folder)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "wheelforge-tests" / "gallery"


def _fetch(entry: dict[str, Any]) -> Path:
    """The entry's wheel, downloaded and hash-checked by tools/gallery.py (cached)."""
    args = [sys.executable, str(REPO / "tools" / "gallery.py"), "download", str(_cache()),
            "--only", entry["file"]]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if any(marker in proc.stderr for marker in _OFFLINE):
            pytest.skip(f"{entry['file']} can't be downloaded here (offline?)")
        pytest.fail(f"download of {entry['file']} failed:\n{proc.stderr[-3000:]}")
    return _cache() / entry["file"]


def _said(document: dict[str, Any]) -> dict[str, set[str]]:
    rules: dict[str, set[str]] = {"error": set(), "warning": set()}
    for binary in document["binaries"]:
        for violation in binary["violations"]:
            rules.setdefault(violation["severity"], set()).add(violation["rule"])
    return rules


@pytest.mark.parametrize(
    "entry",
    [pytest.param(e, id=e["file"].split("-cp")[0].split("-py")[0],
                  marks=() if e.get("ci") else (pytest.mark.sweep,)) for e in ENTRIES],
)  # fmt: skip
def test_check_gives_each_released_wheel_its_evidence_verdict(
    entry: dict[str, Any], tmp_path: Path
) -> None:
    wheel = _fetch(entry)
    run = wheelforge("check", "--json", wheel, cwd=tmp_path)
    document = json.loads(run.out)
    said = _said(document)
    evidence = "; ".join(f"{x['env']}: {x['result']}" for x in entry["loaded"])
    context = f"{entry['file']}: evidence {entry['verdict']} ({entry['reason']}; {evidence})"
    errors = set(entry.get("errors", []))
    assert said["error"] == errors, (
        f"errors {sorted(said['error'])}, not {sorted(errors)}: {context}"
    )
    warnings = set(entry.get("warnings", []))
    assert warnings <= said["warning"], f"warnings {sorted(said['warning'])} miss {context}"
    tolerated = warnings | set(entry.get("may_warn", []))
    assert said["warning"] <= tolerated, f"warnings {sorted(said['warning'])}: {context}"
    assert run.code == (4 if errors else 0), run.err
    [whole] = document["wheels"] or [{"verdict": "ok"}]
    if entry["verdict"] != "ok" or not said["warning"]:
        assert whole["verdict"] == entry["verdict"], context
