"""What ``wheelforge inspect`` loads, in a fresh interpreter as the console script runs it: the
reader and its screen, not click, the CLI's other commands, pyelftools or the symbol rules
(issue 33: its start-up was most of its time on a library with little device code). Modules,
not seconds: the time is bench/bench_inspect.py's, beside cuobjdump and main."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parent.parent / "data" / "fatbin" / "sm80_sm90a_ptx90.so"
# Loaded by the CLI, or by readers inspect does not need.
NOT_LOADED = (
    "click",
    "wheelforge.cli.app",
    "wheelforge.cli.quicknoop",
    "elftools",
    "wheelforge.binaries.symbols",
    "wheelforge.binaries.reader",
    "variantlib",
    "yaml",
    "packaging.requirements",
    "rich._emoji_codes",
)

_RUN = """
import json, sys
from wheelforge.cli.entry import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _loaded(*args: str) -> tuple[int, set[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *args], capture_output=True, text=True, check=False
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"]), done.stdout


@pytest.mark.parametrize("args", [["inspect"], ["inspect", "--json"]])
def test_inspect_loads_only_the_reader_and_its_screen(args: list[str]) -> None:
    code, modules, out = _loaded(*args, str(LIBRARY))
    assert code == 0 and "sm_90a" in out
    assert "wheelforge.binaries.fatbin" in modules
    loaded = sorted(m for m in modules if m.split(".")[0] in {n.split(".")[0] for n in NOT_LOADED}
                    and any(m == n or m.startswith(n + ".") for n in NOT_LOADED))  # fmt: skip
    assert loaded == []
    # The document's model names the variant checks' type (its schema needs it); the table
    # checks variant properties only when a wheel was given.
    assert ("wheelforge.packaging.wheel_variants" in modules) == ("--json" in args)
    assert ("rich.console" in modules) == ("--json" not in args)  # the tables' only


def test_inspect_with_an_option_it_leaves_to_the_cli_loads_the_cli() -> None:
    code, modules, out = _loaded("inspect", "-v", str(LIBRARY))
    assert code == 0 and "sm_90a" in out
    assert "click" in modules and "wheelforge.cli.app" in modules
