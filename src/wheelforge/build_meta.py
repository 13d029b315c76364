"""wheelforge as a PEP 517 build backend, for ``pip install .``, ``pip wheel .`` and
``python -m build``: a thin layer over the builder the CLI uses (build/pep517.py).

``pyproject.toml``::

    [build-system]
    requires = ["wheelforge-cuda"]   # the distribution; the module is wheelforge
    build-backend = "wheelforge.build_meta"

    [tool.wheelforge]
    matrix = "matrix.yaml"   # the default

build_wheel builds one wheel for the machine it runs on, against the torch of the build
environment (see docs/packaging.md for the arch list and the ``-C`` settings). Errors come out
as one ``error:`` line and a non-zero exit, also through pip: no traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from wheelforge.build import pep517
from wheelforge.foundation import log
from wheelforge.foundation.errors import WheelforgeError

ConfigSettings = Mapping[str, "str | list[str]"] | None
T = TypeVar("T")


def _hook(run: Callable[[], T]) -> T:
    """Run a hook; a WheelforgeError becomes its one line and exit code (pyproject_hooks turns
    any exception into a traceback, SystemExit into just the exit)."""
    try:
        return run()
    except WheelforgeError as exc:
        log.error(exc.message, exc.details, exc.problems)
        raise SystemExit(exc.exit_code) from None


def _options(config_settings: ConfigSettings) -> pep517.BackendOptions:
    return pep517.parse_config_settings(config_settings, Path.cwd())


def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> list[str]:
    return _hook(lambda: pep517.torch_requires(_options(config_settings)))


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    return _hook(
        lambda: pep517.prepare_metadata(_options(config_settings), Path(metadata_directory))
    )


def build_wheel(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: str | None = None,
) -> str:
    meta = Path(metadata_directory) if metadata_directory else None
    return _hook(lambda: pep517.build_wheel(_options(config_settings), Path(wheel_directory), meta))


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    return _hook(
        lambda: pep517.build_sdist(Path.cwd(), _options(config_settings), Path(sdist_directory))
    )


# PEP 660's hooks, each refusing in one line: without them pip falls back to ``setup.py
# develop``, which setuptools fails in a 67-line traceback. An editable wheel of a compiled
# extension would import sources that no rebuild follows; pep517.editable_refused says what to
# run instead.


def get_requires_for_build_editable(config_settings: ConfigSettings = None) -> list[str]:
    return _hook(pep517.editable_refused)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    return _hook(pep517.editable_refused)


def build_editable(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: str | None = None,
) -> str:
    return _hook(pep517.editable_refused)
