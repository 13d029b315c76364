"""``wheelforge build``'s command line becomes one typed BuildOptions
(cli/build.py): every option click parses lands in it, under the name the
settings chain reads."""

from __future__ import annotations

from pathlib import Path

from wheelforge.cli.build import BuildOptions, build_command
from wheelforge.configuration.settings import Flags


def _options(*argv: str) -> BuildOptions:
    with build_command.make_context("build", list(argv)) as ctx:
        return BuildOptions.from_command_line(ctx.params)


def test_no_option_gives_the_defaults() -> None:
    assert _options() == BuildOptions(flags=Flags(matrix=Path("matrix.yaml")))


def test_every_option_lands_in_the_options() -> None:
    given = {
        "--matrix": "m.yaml",
        "--archs": "9.0",
        "--out": "o",
        "--build-dir": "b",
        "-j": "3",
        "--python": "python3",
        "--compile-cache": "none",
        "--cache-dir": "c",
        "--size-budget": "1MiB",
        "--report": "-",
        "--ci": "none",
    }
    switches = ["--offline", "--no-import-check", "--no-wait", "--verify-reproducible"]
    switches += ["--dry-run", "-q", "--wheel-variants"]
    options = _options(
        *(w for kv in given.items() for w in kv), "--only", "a", "--only", "b", *switches
    )
    assert options == BuildOptions(
        flags=Flags(
            matrix=Path("m.yaml"),
            archs="9.0",
            out=Path("o"),
            build_dir=Path("b"),
            jobs=3,
            python="python3",
            only=("a", "b"),
            offline=True,
            cache_dir=Path("c"),
            import_check=False,
            size_budget="1MiB",
            wait=False,
            wheel_variants=True,
            verify_reproducible=True,
            compile_cache="none",
        ),
        report_path=Path("-"),
        ci_mode="none",
        quiet=True,
        dry_run=True,
    )
