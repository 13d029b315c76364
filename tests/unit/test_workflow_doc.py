"""The GitHub Actions workflow docs/toolkits.md gives for fan-out (issue 33): it parses, its build
job uploads the folder each variant's wheel goes to (dist/, or dist/cu124/ with cuda-index), an
upload that finds nothing fails, and every ``matrix.*`` it reads is a key `wheelforge matrix
--github` writes."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import yaml

from wheelforge.documents.variants_schema import GithubJob

TOOLKITS = Path(__file__).resolve().parents[2] / "docs" / "toolkits.md"


def workflow() -> tuple[str, dict[str, Any]]:
    section = TOOLKITS.read_text().split("## Fan-out on CI", 1)[1]
    [text] = re.findall(r"```yaml\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return text, loaded


def _uploads(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")
    ]


def test_each_variant_uploads_its_folder_and_an_empty_upload_fails() -> None:
    _, flow = workflow()
    build = flow["jobs"]["build"]
    assert build["needs"] == "plan"
    assert build["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    uploads = _uploads(build)
    wheels = [u for u in uploads if "dist" in u["with"]["path"]]
    assert [u["with"]["path"] for u in wheels] == ["dist/${{ matrix.index }}"]
    assert all(u["with"].get("if-no-files-found") == "error" for u in uploads), uploads
    # One artifact per variant: names that two jobs share would collide (upload-artifact v4).
    assert all("${{ matrix.variant }}" in u["with"]["name"] for u in uploads)
    runs = [str(s.get("run", "")) for s in build["steps"]]
    assert any(r.startswith("wheelforge build --only ${{ matrix.variant }}") for r in runs)


def test_the_matrix_keys_it_reads_are_the_ones_matrix_github_writes() -> None:
    text, _ = workflow()
    used = set(re.findall(r"\$\{\{\s*matrix\.([\w-]+)", text))
    written = {f.name for f in dataclasses.fields(GithubJob)}
    assert used and used <= written, used - written


def test_it_installs_wheelforge_without_pypi() -> None:
    """wheelforge-cuda is not on PyPI yet: the workflow installs what $WHEELFORGE names."""
    _, flow = workflow()
    assert "WHEELFORGE" in flow["env"]
    for job in flow["jobs"].values():
        installs = [str(s["run"]) for s in job["steps"] if "pip install" in str(s.get("run", ""))]
        assert installs and all('"$WHEELFORGE"' in r for r in installs), installs
