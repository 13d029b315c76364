"""The matrix's generate steps as ninja edges (planning/ninjafile.py writes them): each one's
command with its placeholders filled in, its output folder inside the variant's build folder,
the files whose change runs it again and the files it writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from wheelforge.configuration.matrix.keys import GENERATED_RE
from wheelforge.configuration.matrix.model import GenerateStep
from wheelforge.planning.plan import GenerateEdge, PlanInputs


def edges(
    inputs: PlanInputs, build_dir: Path
) -> tuple[tuple[GenerateEdge, ...], Callable[[str], Path]]:
    """The generate steps as ninja edges, and each step's output folder by name."""
    matrix = inputs.settings.matrix

    def folder(name: str) -> Path:
        return build_dir / "generated" / name

    def fill(word: str, step: GenerateStep) -> str:
        values = {
            "python": str(inputs.settings.python),
            "project": str(matrix.root.resolve()),
            "out": str(folder(step.name)),
            **{s.name: str(folder(s.name)) for s in matrix.generate},
        }
        for name, value in values.items():
            word = word.replace(f"{{{name}}}", value)
        return word

    edges = []
    for step in matrix.generate:
        read: list[Path] = []
        for pattern in step.inputs:
            if (ref := GENERATED_RE.match(pattern)) is not None:
                read.append(folder(ref[1]) / (ref[2] or ""))
            else:
                read += sorted(p.resolve() for p in matrix.root.glob(pattern) if p.is_file())
        edges.append(
            GenerateEdge(
                name=step.name,
                command=tuple(fill(w, step) for w in step.run),
                written=step.run,
                folder=folder(step.name),
                inputs=tuple(read),
                outputs=tuple(folder(step.name) / o for o in step.outputs),
                timeout=step.timeout,
            )
        )
    return tuple(edges), folder
