"""tests/data/gallery.toml, the released wheels and their evidence verdicts, is whole: every entry
pins a file and its hash, says where it was loaded and what happened, and its verdict follows
from the rules it names; the CI part stays small (tests/integration/test_gallery.py)."""

from __future__ import annotations

import re
import sys

from packaging.utils import canonicalize_name, parse_wheel_filename

from tests import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

GALLERY = tomllib.loads((REPO / "tests" / "data" / "gallery.toml").read_text(encoding="utf-8"))
WHEELS = GALLERY["wheel"]


def test_the_gallery_has_25_wheels_of_every_kind_each_once() -> None:
    assert len(WHEELS) >= 25
    assert {w["kind"] for w in WHEELS} == {"stable", "classic", "no-torch", "torch"}
    assert len({w["file"] for w in WHEELS}) == len(WHEELS)


def test_each_entry_pins_its_file_and_says_where_it_loaded() -> None:
    for wheel in WHEELS:
        name, version, _, _ = parse_wheel_filename(wheel["file"])
        assert name == canonicalize_name(wheel["name"]), wheel["file"]
        assert str(version) == wheel["version"], wheel["file"]
        assert re.fullmatch(r"[0-9a-f]{64}", wheel["sha256"]), wheel["file"]
        assert wheel["envs"] and set(wheel["envs"]) <= set(GALLERY["env"]), wheel["file"]
        assert [x["env"] for x in wheel["loaded"]] == wheel["envs"], wheel["file"]
        assert all(x["result"] and "not loaded yet" not in x["result"] for x in wheel["loaded"])
        assert wheel["reason"] and wheel["reason"] != "TBD", wheel["file"]


def test_each_verdict_follows_from_the_rules_it_names() -> None:
    for wheel in WHEELS:
        errors, warnings = wheel.get("errors", []), wheel.get("warnings", [])
        expected = "error" if errors else "warning" if warnings else "ok"
        assert wheel["verdict"] == expected, wheel["file"]
        assert not set(wheel.get("may_warn", [])) & set(errors), wheel["file"]


def test_the_ci_part_is_small_and_has_every_kind_but_torch() -> None:
    ci = [w for w in WHEELS if w["ci"]]
    assert sum(w["size"] for w in ci) < 150e6  # downloads of CI's network step, bounded
    assert {w["kind"] for w in ci} >= {"stable", "classic", "no-torch"}
    assert {w["verdict"] for w in ci} >= {"ok", "error"}
