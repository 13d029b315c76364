"""A rule whose own code raises is a bug in that rule (issue 42): the rule's name, "a bug in
rule X", the traceback with -v, exit 70; only the parser's own errors still say the binary is
unreadable (exit 4). The broken rules live here, registered for the test only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.fakes import make_wheel
from wheelforge.binaries import abicheck, registry
from wheelforge.binaries.elf import ElfImage
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.cli.app import main
from wheelforge.configuration import abi
from wheelforge.foundation.errors import BinaryFormatError, RuleBug

WHEEL = "pkg-1.0-cp310-abi3-manylinux_2_17_x86_64.whl"


def _check_raises(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    raise KeyError("oops")  # the bug: a rule that looks a key up and does not find it


def _nothing(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    return iter(())


def _read_raises(image: ElfImage) -> object:
    return image.no_such_attribute  # type: ignore[attr-defined]


def _read_corrupt(image: ElfImage) -> object:
    from elftools.common.exceptions import ELFError

    raise ELFError("bad section header")


def _rule(rule_id: str, **more: object) -> Rule:
    fields: dict[str, object] = {
        "id": rule_id,
        "doc": "a rule with a bug, for the test",
        "source": "tests/unit/test_rule_bugs.py",
        "flavours": frozenset(abi.NAMES),
        "roles": frozenset({"extension"}),
        "order": 99,
        "check": _nothing,
        **more,
    }
    return Rule(**fields)  # type: ignore[arg-type]


@pytest.fixture
def register(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def add(rule: Rule) -> None:
        known = registry.all_rules()
        monkeypatch.setattr(registry, "_discovered", lambda: (*known, rule))

    return add


def test_a_rule_whose_check_raises_is_a_bug_in_that_rule(tmp_path: Path, register) -> None:  # type: ignore[no-untyped-def]
    register(_rule("broken-check", check=_check_raises))
    wheel = make_wheel(tmp_path, WHEEL, "ext.so")
    with pytest.raises(RuleBug) as caught:
        abicheck.check_wheel(wheel, torch=None, guards={})
    assert caught.value.rule == "broken-check" and caught.value.exit_code == 70
    assert "a bug in rule broken-check: KeyError: 'oops'" in caught.value.message
    assert "_check_raises" in (caught.value.traceback or "")


def test_a_rule_whose_own_reading_raises_is_a_bug_not_an_unreadable_file(
    tmp_path: Path,
    register,  # type: ignore[no-untyped-def]
) -> None:
    register(_rule("broken-read", read=_read_raises))
    wheel = make_wheel(tmp_path, WHEEL, "ext.so")
    with pytest.raises(RuleBug, match="a bug in rule broken-read: AttributeError") as caught:
        abicheck.check_wheel(wheel, torch=None, guards={})
    assert "not a readable ELF file" not in str(caught.value)


def test_the_parsers_own_error_still_says_the_file_is_unreadable(
    tmp_path: Path,
    register,  # type: ignore[no-untyped-def]
) -> None:
    register(_rule("reads-a-corrupt-file", read=_read_corrupt))
    wheel = make_wheel(tmp_path, WHEEL, "ext.so")
    with pytest.raises(BinaryFormatError, match="not a readable ELF file: bad section header"):
        abicheck.check_wheel(wheel, torch=None, guards={})


def test_the_command_says_the_rule_exits_70_and_shows_the_traceback_with_v(
    tmp_path: Path,
    register,  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str],
) -> None:
    register(_rule("broken-check", check=_check_raises))
    wheel = make_wheel(tmp_path, WHEEL, "ext.so")
    assert main(["check", str(wheel)]) == 70
    said = capsys.readouterr()
    screen = " ".join((said.out + said.err).split())
    assert "error: a bug in rule broken-check: KeyError: 'oops'" in screen
    assert "Traceback" not in screen
    assert main(["check", "-v", str(wheel)]) == 70
    said = capsys.readouterr()
    assert "Traceback (most recent call last)" in said.out + said.err
    assert "_check_raises" in said.out + said.err
