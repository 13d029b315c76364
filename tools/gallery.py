"""The released-wheel gallery (tests/data/gallery.toml): download it, gather the evidence behind
its verdicts by loading every binary, and write its table (tests/data/gallery.md).

    python tools/gallery.py download DEST [--ci] [--only NAME ...]
    python tools/gallery.py driver-stub DIR [--cuda /usr/local/cuda]
    python tools/gallery.py evidence WHEELS ENVS --driver DIR [--out evidence.json] [--only NAME ...]
    python tools/gallery.py table WHEELS [--evidence evidence.json] [--docs tests/data/gallery.md] [--keep DIR]

``download`` fetches each wheel (``--ci``: the ones the CI network step checks) with
``pip download --no-deps`` into DEST, checks its file name and sha256 against the gallery and
keeps it there (a wheel already in DEST with the right hash is not fetched again).

``evidence`` loads each wheel in each environment its entry names (``--env``: only these): ENVS/<env> is a Python 3.12
venv with the gallery's requirements for that environment (made with pip when missing: a CUDA
torch from PyPI is ~5 GB), the wheel and its ``with`` requirements are installed into a scratch
folder (``pip install --no-deps --target``) and tools/gallery_load.py, run by the venv's Python,
loads every binary (``import torch`` first for a wheel of kind stable, classic or torch, or one
with ``torch_first``). The raw
results go to ``--out`` (JSON); a line per environment is printed, in the words the gallery's
``loaded`` entries use.

``driver-stub`` writes DIR/libcuda.so.1, a stand-in for the NVIDIA driver's library on a machine
without one (where binaries that link libcuda.so.1 could not be loaded at all): every driver API
entry point the toolkit's cuda.h declares (plain, ``_v2``..., per-thread-stream and legacy
names), each returning CUDA_ERROR_NO_DEVICE, the way the toolkit's own ``lib64/stubs`` are made.
``evidence --driver DIR`` puts it on LD_LIBRARY_PATH; a binary that needs a driver function the
toolkit's cuda.h does not declare still fails, naming it.

``table`` runs ``wheelforge check --json`` (this interpreter's wheelforge) on each wheel and
prints the docs' table: what loading showed, the verdict it supports, and what check says;
``--docs FILE`` writes it between the gallery markers of FILE (tests/data/gallery.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
GALLERY = REPO / "tests" / "data" / "gallery.toml"
LOADER = Path(__file__).resolve().parent / "gallery_load.py"
# Linux x86_64 tags pip does not expand from one --platform: list them all (manylinux1 to 2_28).
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 16, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
]  # fmt: skip
BEGIN, END = "<!-- gallery (tools/gallery.py table --docs) -->", "<!-- /gallery -->"


def load_gallery(path: Path = GALLERY) -> dict[str, Any]:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def _select(gallery: dict[str, Any], only: list[str], ci: bool = False) -> list[dict[str, Any]]:
    wheels = [w for w in gallery["wheel"] if not ci or w.get("ci", False)]
    return [w for w in wheels if not only or w["name"] in only or w["file"] in only]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _pip_download(requirement: str, dest: Path) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "--python-version", "3.12", "-d", str(dest)]  # fmt: skip
    for platform in PLATFORMS:
        args += ["--platform", platform]
    # The gallery pins exact versions: a machine's pip constraints (a cap on torchvision) don't apply.
    quiet = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    return subprocess.run([*args, requirement], capture_output=True, text=True, check=False,
                          env=quiet)  # fmt: skip


def download(entries: list[dict[str, Any]], dest: Path) -> int:
    """Each entry's wheel into *dest*, checked; 0, or 3 naming what could not be had."""
    dest.mkdir(parents=True, exist_ok=True)
    failed = 0
    for entry in entries:
        final = dest / entry["file"]
        if final.is_file() and sha256(final) == entry["sha256"]:
            continue
        with tempfile.TemporaryDirectory(prefix="gallery-", dir=dest) as tmp:
            proc = _pip_download(f"{entry['name']}=={entry['version']}", Path(tmp))
            got = sorted(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or [g.name for g in got] != [entry["file"]]:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"error: {entry['name']}=={entry['version']}: pip download gave "
                      f"{[g.name for g in got]}, not {entry['file']}: {last}", file=sys.stderr)  # fmt: skip
                failed += 1
                continue
            if (digest := sha256(got[0])) != entry["sha256"]:
                print(f"error: {entry['file']}: sha256 {digest}, the gallery says "
                      f"{entry['sha256']}", file=sys.stderr)  # fmt: skip
                failed += 1
                continue
            got[0].replace(final)
        print(f"{entry['file']} ({final.stat().st_size / 1e6:.1f} MB)")
    return 3 if failed else 0


def _venv(envs: Path, name: str, requirements: list[str]) -> Path:
    python = envs / name / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(envs / name)], check=True)
        quiet = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
        subprocess.run([str(python), "-m", "pip", "install", "-q", *requirements], env=quiet,
                       check=True)  # fmt: skip
    return python


def _site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def driver_stub(dest: Path, cuda: Path) -> int:
    """DIR/libcuda.so.1: cuda.h's driver entry points, each failing (see the module's doc)."""
    names: set[str] = set()
    for define in ([], ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"], ["-D__CUDA_API_VERSION_INTERNAL"]):
        proc = subprocess.run(["gcc", "-E", *define, "-I", str(cuda / "include"), "-"],
                              input="#include <cuda.h>\n", capture_output=True, text=True,
                              check=True)  # fmt: skip
        names |= set(re.findall(r"\b(cu[A-Z]\w*)\s*\(", proc.stdout))
    dest.mkdir(parents=True, exist_ok=True)
    source = dest / "libcuda_stub.c"
    source.write_text("".join(f"int {n}(void) {{ return 100; }}\n" for n in sorted(names)))
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                    str(dest / "libcuda.so.1"), str(source)], check=True)  # fmt: skip
    print(f"{dest / 'libcuda.so.1'}: {len(names)} driver entry points of {cuda}/include/cuda.h")
    return 0


def load_once(
    entry: dict[str, Any], wheel: Path, python: Path, driver: Path | None
) -> dict[str, Any]:
    """tools/gallery_load.py's findings for *wheel* in the venv of *python*."""
    torch_first = entry.get("torch_first", entry["kind"] != "no-torch")
    with tempfile.TemporaryDirectory(prefix="gallery-load-") as tmp:
        if entry["kind"] == "torch":  # torch's own wheel is the environment's torch
            target = _site_packages(python)
        else:
            target = Path(tmp)
            pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--target", tmp]
            # The gallery pins its versions itself: no machine-wide pip constraints.
            quiet = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
            proc = subprocess.run([*pip, str(wheel), *entry.get("with", [])], env=quiet,
                                  capture_output=True, text=True, check=False)  # fmt: skip
            if proc.returncode != 0:
                return {"failed": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
        args = [str(python), str(LOADER), str(target), str(wheel)]
        args += ["--torch"] if torch_first else []
        for name in entry.get("imports", []):
            args += ["--import", name]
        for member in entry.get("preload", []):
            args += ["--preload", member]
        env = dict(os.environ)
        if driver is not None:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                filter(None, [str(driver), env.get("LD_LIBRARY_PATH")])
            )
        proc = subprocess.run(args, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        return {"failed": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    try:
        result: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"failed": f"the loader wrote no JSON: {proc.stdout[:200]!r}"}
    result["environment"]["driver"] = "libcuda.so.1 stand-in (driver-stub)" if driver else "none"
    return result


def _short(error: str) -> str:
    """An error line in a few words: the loader's own phrasing, the symbol cut short."""
    error = re.sub(r"^(OSError|ImportError|ModuleNotFoundError): ", "", error)
    error = error.replace(
        ": cannot open shared object file: No such file or directory", " not found"
    )
    error = re.sub(r"^\S+\.so[.\d]*: (undefined symbol)", r"\1", error)
    return error if len(error) <= 90 else error[:87] + "..."


def summary(found: dict[str, Any]) -> str:
    """One line: what loaded and what did not, in a few words."""
    if "failed" in found:
        return f"the loader failed: {found['failed']}"
    env = found["environment"]
    where = f"torch {env['torch']} (CUDA {env['torch_cuda']})" if "torch" in env else "no torch"
    binaries = found["binaries"]
    loaded = [m for m, r in binaries.items() if r["result"] in ("ok", "by-path")]
    programs = [m for m, r in binaries.items() if r["result"] == "program"]
    failed = {m: r for m, r in binaries.items() if r["result"] == "error"}
    parts = [f"{len(loaded)}/{len(binaries) - len(programs)} binaries load"]
    if programs:
        parts.append(f"{len(programs)} executable(s) not loaded")
    by_path = [m for m, r in binaries.items() if r["result"] == "by-path"]
    if by_path:
        parts.append(f"{len(by_path)} only by path ({binaries[by_path[0]]['import_error']})")
    after = [m for m, r in binaries.items() if "alone" in r]
    if after:
        parts.append(f"{len(after)} only after what the package opens first")
    own = [m for m, r in binaries.items() if "own_first" in r]
    if own:
        parts.append(f"{len(own)} after opening the wheel's own {binaries[own[0]]['own_first'][0]}")
    for member, result in list(failed.items())[:2]:
        parts.append(f"{member}: {_short(result['error'])}")
    if len(failed) > 2:
        parts.append(f"{len(failed) - 2} more fail")
    imports = found["imports"]
    for name, result in imports.items():
        said = "ok" if result["result"] == "ok" else _short(result["error"])
        parts.append(f"import {name}: {said}")
    return f"{where}, Python {env['python']}: " + "; ".join(parts)


def evidence(entries: list[dict[str, Any]], gallery: dict[str, Any], *, wheels: Path,
             envs: Path, out: Path | None, only_envs: list[str], driver: Path | None) -> int:  # fmt: skip
    found: dict[str, Any] = json.loads(out.read_text()) if out and out.is_file() else {}
    for entry in entries:
        wheel = wheels / entry["file"]
        for name in entry["envs"]:
            if (only_envs and name not in only_envs) or name in found.get(entry["file"], {}):
                continue  # another environment, or loaded already (remove --out to redo)
            python = _venv(envs, name, gallery["env"][name])
            result = load_once(entry, wheel, python, driver)
            found.setdefault(entry["file"], {})[name] = result
            print(f"{entry['file']} [{name}]: {summary(result)}", flush=True)
            if out:
                out.write_text(json.dumps(found, indent=1) + "\n")
    return 0


def check(wheel: Path, keep: Path | None = None) -> dict[str, Any]:
    """``check --json`` on *wheel*, reduced to its verdict and the rules that found something;
    with *keep*, the document is kept there (KEEP/<wheel>.json) and reused on the next run."""
    kept = keep / f"{wheel.name}.json" if keep else None
    if kept and kept.is_file():
        document: dict[str, Any] = json.loads(kept.read_text())
        code = document.pop("exit")
    else:
        proc = subprocess.run([sys.executable, "-m", "wheelforge", "check", "--json", str(wheel)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        try:
            document = json.loads(proc.stdout)
        except json.JSONDecodeError:
            return {"exit": proc.returncode, "verdict": "crash", "errors": [], "warnings": []}
        code = proc.returncode
        if kept:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps({**document, "exit": code}))
    [whole] = document["wheels"] or [{"verdict": "ok"}]
    rules = {"error": set(), "warning": set()}
    for binary in document["binaries"]:
        for violation in binary["violations"]:
            rules.setdefault(violation["severity"], set()).add(violation["rule"])
    return {"exit": code, "verdict": whole["verdict"],
            "errors": sorted(rules["error"]), "warnings": sorted(rules["warning"])}  # fmt: skip


def agrees(entry: dict[str, Any], said: dict[str, Any]) -> bool:
    """Check's word against the evidence: the same errors, the evidence's warnings among its."""
    if sorted(entry.get("errors", [])) != said["errors"]:
        return False
    if not set(entry.get("warnings", [])) <= set(said["warnings"]):
        return False
    allowed = set(entry.get("warnings", [])) | set(entry.get("may_warn", []))
    return set(said["warnings"]) <= allowed


def _verdict_cell(verdict: str, errors: list[str], warnings: list[str]) -> str:
    rules = ", ".join([*errors, *(w for w in warnings if w not in errors)])
    return f"**{verdict}**" + (f" ({rules})" if rules else "")


def table(entries: list[dict[str, Any]], wheels: Path, found: dict[str, Any],
          keep: Path | None = None) -> str:  # fmt: skip
    lines = [
        "| wheel | kind | loaded (where: what happened) | evidence verdict | `check` says |",
        "| --- | --- | --- | --- | --- |",
    ]
    agreed = 0
    for entry in entries:
        said = check(wheels / entry["file"], keep)
        loads = found.get(entry["file"])
        if loads:
            where = "<br>".join(f"{env}: {summary(r)}" for env, r in loads.items())
        else:
            where = "<br>".join(f"{x['env']}: {x['result']}" for x in entry["loaded"])
        ok = agrees(entry, said)
        agreed += ok
        theirs = _verdict_cell(said["verdict"], said["errors"], said["warnings"])
        mark = "" if ok else " ✗"
        lines.append(
            f"| {entry['name']} {entry['version']} | {entry['kind']} | {where} | "
            f"{_verdict_cell(entry['verdict'], entry.get('errors', []), entry.get('warnings', []))}: "
            f"{entry['reason']} | {theirs}, exit {said['exit']}{mark} |"
        )
    lines += ["", f"`check` agrees with the evidence on {agreed} of {len(entries)} wheels."]
    return "\n".join(lines) + "\n"


def write_docs(text: str, docs: Path) -> None:
    page = docs.read_text(encoding="utf-8")
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    if not rest:
        raise SystemExit(f"error: {docs} has no '{BEGIN}' marker: add it where the table goes")
    docs.write_text(f"{head}{BEGIN}\n{text}{END}{tail}", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("download")
    one.add_argument("dest", type=Path)
    one.add_argument("--ci", action="store_true")
    two = sub.add_parser("evidence")
    two.add_argument("wheels", type=Path)
    two.add_argument("envs", type=Path)
    two.add_argument("--out", type=Path)
    two.add_argument("--env", nargs="+", default=[], help="only these environments")
    two.add_argument("--driver", type=Path, help="a folder with libcuda.so.1 (driver-stub's)")
    four = sub.add_parser("driver-stub")
    four.add_argument("dest", type=Path)
    four.add_argument("--cuda", type=Path, default=Path("/usr/local/cuda"))
    three = sub.add_parser("table")
    three.add_argument("wheels", type=Path)
    three.add_argument("--evidence", type=Path)
    three.add_argument("--docs", type=Path)
    three.add_argument("--keep", type=Path, help="keep each check --json here, reuse it next time")
    for each in (one, two, three, four):
        each.add_argument("--only", nargs="+", default=[])
        each.add_argument("--gallery", type=Path, default=GALLERY)
    args = parser.parse_args()
    if args.command == "driver-stub":
        return driver_stub(args.dest, args.cuda)
    gallery = load_gallery(args.gallery)
    if args.command == "download":
        return download(_select(gallery, args.only, args.ci), args.dest)
    entries = _select(gallery, args.only)
    if args.command == "evidence":
        return evidence(entries, gallery, wheels=args.wheels, envs=args.envs, out=args.out,
                        only_envs=args.env, driver=args.driver)  # fmt: skip
    found = json.loads(args.evidence.read_text()) if args.evidence else {}
    text = table(entries, args.wheels, found, args.keep)
    print(text)
    if args.docs:
        write_docs(text, args.docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
