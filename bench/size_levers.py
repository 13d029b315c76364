"""Measure what each size lever saves on the bundled kernels: one build per lever (the matrix's
nvcc-flags, or its arch set), each in its own copy of the payload, sizes read from the build
reports (``--report``). The numbers the size-budget error leaves as "not measured" are these.

    python bench/size_levers.py --archs "7.5 8.0 8.6 8.9 9.0 10.0 12.0+PTX" --markdown size-levers.md

Builds run one after the other with ninja's default -j; on 16 cores each takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LEVERS: dict[str, list[str]] = {
    "baseline": [],
    "-Xfatbin=-compress-all": ["-Xfatbin=-compress-all"],
    "--compress-mode=size": ["--compress-mode=size"],
    "--compress-mode=size -Xfatbin=-compress-all": [
        "--compress-mode=size",
        "-Xfatbin=-compress-all",
    ],
}


def build(root: Path, archs: str, flags: list[str]) -> dict[str, object]:
    shutil.copytree(
        REPO / "kernels", root / "kernels", ignore=shutil.ignore_patterns("__pycache__")
    )
    text = (REPO / "matrix.yaml").read_text()
    if flags:
        text = text.replace(
            "  include-dirs: [kernels/csrc]",
            f"  include-dirs: [kernels/csrc]\n  nvcc-flags: {json.dumps(flags)}",
        )
    (root / "matrix.yaml").write_text(text)
    report = root / "r.json"
    subprocess.run([sys.executable, "-m", "wheelforge", "build", "--archs", archs, "--size-budget", "10GiB",
                    "--report", report, "--quiet"], cwd=root, check=True, env={**os.environ, "CI": "true"})  # fmt: skip
    [variant] = json.loads(report.read_text())["variants"]
    return dict(variant)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="7.5 8.0 8.6 8.9 9.0 10.0 12.0+PTX")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args()
    rows = [
        "| lever | wheel | fatbin stored | vs baseline | compile s |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    base = None
    with tempfile.TemporaryDirectory(prefix="size-levers-") as tmp:
        for name, flags in LEVERS.items():
            v = build(Path(tmp) / name.replace(" ", "_").strip("-"), args.archs, flags)
            wheel = int(v["wheel"]["size"])  # type: ignore[index]
            stored = sum(int(c["stored"]) for c in v["size"]["contributions"])  # type: ignore[index]
            compile_s = next(s["seconds"] for s in v["stages"] if s["name"] == "compile")  # type: ignore[attr-defined]
            base = base or wheel
            rows.append(f"| `{name}` | {wheel / 1024:.1f} KiB | {stored / 1024:.1f} KiB | "
                        f"{100 * (wheel - base) / base:+.1f}% | {compile_s:.0f} |")  # fmt: skip
    table = f"archs {args.archs}\n\n" + "\n".join(rows) + "\n"
    print(table)
    if args.markdown:
        args.markdown.write_text(table)


if __name__ == "__main__":
    main()
