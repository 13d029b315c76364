"""``wheelforge test``: install each built wheel into an environment per torch version and run
the payload's test suite there; one outcome per (torch, variant)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.requirements import InvalidRequirement
from packaging.specifiers import SpecifierSet

from wheelforge.configuration.matrix.model import Matrix, TestsConfig
from wheelforge.configuration.settings import TestSettings
from wheelforge.foundation import log, numbers, proc, readers, writers
from wheelforge.foundation.errors import ConfigError, ToolError, VerificationError
from wheelforge.packaging import stamp as reuse_stamp
from wheelforge.packaging import wheel_variants
from wheelforge.toolchain import envs

Status = Literal["passed", "failed", "error", "unavailable"]


@dataclass(frozen=True, kw_only=True)
class BuiltWheel:
    variant: str
    path: Path | None  # None: its last build failed (failed says why), there is no wheel to test
    failed: str | None = None


@dataclass(frozen=True, kw_only=True)
class Outcome:
    env: str  # what was asked for: "torch 2.13.0", "torch of /opt/python3"
    torch: str | None  # the torch the environment really has
    cuda: bool
    variant: str
    status: Status
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    detail: str | None = None
    seconds: float = 0.0


def built_wheels(
    matrix: Matrix, build_root: Path, out_dir: Path, explicit: Sequence[Path]
) -> list[BuiltWheel]:
    """The wheels to test: --wheel paths, else those the last builds of the matrix's arch sets
    published (their stamps; any variant's if none of those), else every wheel of the package
    in the output folder."""
    if explicit:
        for path in explicit:
            if not path.exists():
                raise ConfigError(f"--wheel {path}: no such file")
            if (kind := readers.kind_of(path.stat().st_mode)) is not None:
                raise ConfigError(f"--wheel {path} is {kind}, not a wheel file; name a .whl file")
        return [BuiltWheel(variant=p.name, path=p) for p in explicit]
    found: list[BuiltWheel] = []
    for stamp in reuse_stamp.stamps(build_root):
        if stamp.failed is not None:  # an older wheel of it may be there: never tested as its
            found.append(BuiltWheel(variant=stamp.build_dir.name, path=None, failed=stamp.failed))
        # A wheel replaced since is not its wheel.
        elif (wheel := stamp.published(out_dir / stamp.index)) is not None:
            found.append(BuiltWheel(variant=stamp.build_dir.name, path=wheel))
    names = tuple(f"{a.name}-" for a in matrix.arch_sets)
    found = [w for w in found if w.variant.startswith(names)] or found
    if not found:
        prefix = matrix.package.wheel_name + "-"
        found = [
            BuiltWheel(variant=p.name, path=p)
            for p in sorted(out_dir.glob(f"{prefix}*.whl"))
            + sorted(out_dir.glob(f"cu[0-9]*/{prefix}*.whl"))
        ]
    if not found:
        raise ConfigError(
            f"no built wheel of {matrix.package.name} in {out_dir}; run 'wheelforge build' "
            "first or pass --wheel"
        )
    return found


def _torch_pin(wheel: Path) -> SpecifierSet | None:
    """The wheel's requirement on torch (an unstable-ABI wheel pins its torch)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            name = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
            text = zf.read(name).decode() if name else ""
    except (OSError, zipfile.BadZipFile):
        return None
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            try:
                req = numbers.requirement(line.split(":", 1)[1].strip())
            except InvalidRequirement:
                continue
            if req.name == "torch":
                return req.specifier
    return None


def _counts(junit: Path) -> tuple[int, int, int, int] | None:
    """(passed, failed, skipped, errors) from a JUnit XML report, or None without one."""
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = errors = 0
    for suite in suites:
        total += _count(suite.get("tests"))
        failed += _count(suite.get("failures"))
        skipped += _count(suite.get("skipped"))
        errors += _count(suite.get("errors"))
    return total - failed - skipped - errors, failed, skipped, errors


def _count(value: str | None) -> int:
    """A count of a JUnit report's attribute; anything but ASCII digits (or absent) is 0."""
    return numbers.whole(value or "0", high=10**9) or 0


def run_suite(env: envs.TestEnv, tests: TestsConfig, *, variant: str) -> Outcome:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wheelforge-test-") as tmp:
        junit = Path(tmp) / "junit.xml"
        fill = {"python": str(env.python), "path": str(tests.path), "junitxml": str(junit)}
        argv = [word.format(**fill) for word in tests.command]
        # Run from an empty folder with a clean environment, so only the installed wheel is importable.
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        result = proc.run(
            argv,
            hint="set tests.command in matrix.yaml",
            cwd=Path(tmp),
            env={**clean, "PYTHONNOUSERSITE": "1"},
            check=False,
            replace_env=True,
            timeout=proc.BUILD_S,
        )
        counts = _counts(junit)
    output = proc.tail(result.stdout + result.stderr, 30)
    passed, failed, skipped, errors = counts or (0, 0, 0, 0)
    if counts is None:  # a command without a JUnit report: only its exit code counts
        status: Status = "passed" if result.returncode == 0 else "failed"
    elif result.returncode == 0 and failed == errors == 0 and passed > 0:
        status = "passed"
    elif failed or errors:
        status = "failed"
    else:
        status = "error"  # no test ran, or the runner broke
    return Outcome(
        env=env.spec.label,
        torch=env.torch,
        cuda=env.cuda,
        variant=variant,
        status=status,
        passed=passed,
        failed=failed,
        skipped=skipped,
        errors=errors,
        detail=None if status == "passed" else output,
        seconds=round(time.perf_counter() - start, 2),
    )


@contextlib.contextmanager
def _installable(wheel: Path) -> Iterator[Path]:
    """*wheel*, or for a PEP 825 variant wheel (whose name pip rejects) the same bytes under
    the plain name, in a temporary folder."""
    if wheel_variants.variant_label(wheel) is None:
        yield wheel
        return
    with tempfile.TemporaryDirectory(prefix="wheelforge-variant-") as tmp:
        plain = Path(tmp) / wheel_variants.plain_name(wheel)
        writers.copy(wheel, plain)
        yield plain


def _unbuilt(spec: envs.EnvSpec, env: envs.TestEnv, wheel: BuiltWheel) -> Outcome:
    """The outcome of a variant whose last build failed: an error, never an older wheel's pass."""
    return Outcome(
        env=spec.label,
        torch=env.torch,
        cuda=env.cuda,
        variant=wheel.variant,
        status="error",
        detail=f"its last build failed ({wheel.failed}); build it again, or pass --wheel",
    )


def run_tests(
    *,
    matrix: Matrix,
    wheels: Sequence[BuiltWheel],
    specs: Sequence[envs.EnvSpec],
    cache: Path,
) -> list[Outcome]:
    tests = matrix.tests
    if tests is None:
        raise ConfigError(
            f"{matrix.path} has no 'tests' section; add one naming the test folder (see "
            "docs/matrix.md)"
        )
    outcomes: list[Outcome] = []
    for spec in specs:
        try:
            env = envs.ensure_env(spec, cache)
        except envs.TorchUnavailable as exc:
            log.warning(exc.message)
            outcomes += [_not_run(spec, None, w, "unavailable", exc.message) for w in wheels]
            continue
        except ToolError as exc:
            log.error(exc.message, exc.details, exc.problems)
            outcomes += [_not_run(spec, None, w, "error", exc.message) for w in wheels]
            continue
        outcomes += [_test_wheel(spec, env, w, matrix, tests) for w in wheels]
    return outcomes


def _not_run(
    spec: envs.EnvSpec, env: envs.TestEnv | None, wheel: BuiltWheel, status: Status, detail: str
) -> Outcome:
    """The outcome of a wheel whose tests could not run: no environment, or no install."""
    return Outcome(
        env=spec.label,
        torch=env.torch if env else None,
        cuda=env.cuda if env else False,
        variant=wheel.variant,
        status=status,
        detail=detail,
    )


def _test_wheel(
    spec: envs.EnvSpec, env: envs.TestEnv, w: BuiltWheel, matrix: Matrix, tests: TestsConfig
) -> Outcome:
    """Install *w* into *env* and run the matrix's tests there; a variant whose last build
    failed is an error, never an older wheel's pass."""
    if w.path is None:
        return _unbuilt(spec, env, w)
    pin = _torch_pin(w.path)
    if pin is not None and not pin.contains(env.torch.split("+")[0], prereleases=True):
        return _not_run(spec, env, w, "unavailable", f"the wheel needs torch{pin}")
    title = f"test {w.variant} under torch {env.torch}{' with CUDA' if env.cuda else ''}"
    with envs.testing(env.path), log.step(title):
        try:
            with _installable(w.path) as installable:
                envs.install_wheel(env, installable, matrix.package.name)
        except ToolError as exc:
            return _not_run(spec, env, w, "error", f"{exc.message}\n{exc.details or ''}")
        outcome = run_suite(env, tests, variant=w.variant)
    log.info(
        f"  {outcome.status}: {outcome.passed} passed, {outcome.failed} failed, "
        f"{outcome.skipped} skipped"
    )
    return outcome


def run_test_command(settings: TestSettings) -> list[Outcome]:
    """``wheelforge test``: the built (or given) wheels under each torch of the settings."""
    built = built_wheels(settings.matrix, settings.build_root, settings.out_dir, settings.wheels)
    requires = settings.tests.requires
    specs = [envs.EnvSpec(torch=v, requires=requires) for v in settings.torch]
    specs += [envs.EnvSpec(torch_from=p, requires=requires) for p in settings.torch_from]
    return run_tests(matrix=settings.matrix, wheels=built, specs=specs, cache=settings.cache_dir)


def require_passed(outcomes: Sequence[Outcome]) -> None:
    """The verdict of a test run: a failed or errored run, or no run at all, fails it."""
    bad = [o for o in outcomes if o.status in ("failed", "error")]
    if bad:
        first = bad[0]
        # A one-line reason (its last build failed) belongs in the line; a test log below it.
        one_line = first.detail is not None and "\n" not in first.detail.strip()
        why = f" ({first.detail})" if one_line else ""
        raise VerificationError(
            f"{len(bad)} of {len(outcomes)} test runs did not pass; first: {first.variant} under "
            f"{first.env}: {first.status}{why}",
            details=None if one_line else first.detail,
        )
    if not any(o.status == "passed" for o in outcomes):
        raise VerificationError(
            "no test run took place: no torch of the matrix could be installed here"
        )
