"""The files ``wheelforge init`` writes, all or none: the generated files a project's build
system would write (never outside the project, never replacing a different one without
--force), and matrix.yaml, read back first by the matrix validator (load_matrix) under a
staged name beside it, so that init never reports success for a matrix ``build`` would
refuse."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from wheelforge.adoption.writer.matrixfile import InitResult
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import fsutil, readers, removal, writers
from wheelforge.foundation.errors import ConfigError


def write(result: InitResult, root: Path, *, force: bool) -> None:
    """*result*'s generated files and matrix.yaml, once every check has passed."""
    for generated in result.generated:
        path = root / generated.path
        outside = fsutil.escapes(path, root)
        if outside is not None:  # never written outside the project
            raise ConfigError(fsutil.escape_message("init", path, outside, root))
        differs = (
            path.exists()
            and readers.read_text(path, cap=readers.CONFIG_CAP, errors="replace") != generated.text
        )
        if differs and not force:
            raise ConfigError(
                f"{path} exists and differs from what init writes; pass --force to replace it"
            )
    validate(result)
    for generated in result.generated:
        path = root / generated.path
        path.parent.mkdir(parents=True, exist_ok=True)
        writers.write_if_changed(path, generated.text)
    writers.write_if_changed(result.path, result.text)


def validate(result: InitResult) -> None:
    """What init writes, read back first by the matrix validator (load_matrix) under a staged
    name beside matrix.yaml (relative paths start there): a refused one leaves nothing behind."""
    staged = result.path.with_name(f".{result.path.name}.{os.getpid()}.init")
    try:
        writers.write_atomic(staged, result.text)
        load_matrix(staged, display=str(result.path))
    except ConfigError as exc:
        hand = "\n".join(f"  - {note}" for note in result.hand)
        rejected = "\n".join(
            part for part in (exc.details, hand and "what needs a hand:\n" + hand) if part
        )
        raise ConfigError(
            f"init read {result.front_door}, but the matrix.yaml it would write is not valid, so "
            f"nothing was written: {exc.message}",
            details=rejected or None,
            diagnostics=tuple(
                dataclasses.replace(d, file=str(result.path))
                if Path(d.file).name == staged.name
                else d
                for d in exc.diagnostics
            ),
        ) from None
    finally:
        removal.remove(staged, within=result.path.parent)
