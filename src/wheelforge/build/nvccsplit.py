"""nvcc's steps as ninja jobs (planning/devshare.py): run by build.ninja as
``python -m wheelforge.build.nvccsplit {host,device,fatbin} ...``.

- device: one arch's cubin (``nvcc -cubin``) or PTX (``nvcc -ptx``) of a source, and the host
  stub cicc writes beside a cubin;
- host: the host preprocessing, cudafe++ and the host compile that ``nvcc -c`` runs, replayed
  from ``nvcc -dryrun`` (nvcc has no host-only phase), with the stub of a device job and, in
  place of the ``.fatbin.c`` (the fatbin as data), a wrapper naming a hidden symbol after the
  source's module id; it writes that symbol beside the object;
- fatbin: the arch set's fatbin (``fatbinary --create``, with the flags ``nvcc -c`` gives it)
  under that symbol in ``.nv_fatbin``, as an object (``.incbin``).

The same bytes as ``nvcc -c`` where no step reads ``__CUDA_ARCH_LIST__`` (devshare decides;
bench/nvcc_steps.py shows the fatbins byte-identical to nvcc -c's). A failure is one line on
stderr and exit 1, with the tool's own output before it.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from wheelforge.configuration.archs import gencode_flag
from wheelforge.foundation import proc, readers, removal, writers
from wheelforge.foundation.errors import WheelforgeError

T = TypeVar("T")

# The wrapper nvcc's .fatbin.c defines (__fatDeviceText in .nvFatBinSegment, what
# __cudaRegisterFatBinary reads), pointing at the data by symbol instead of holding it.
WRAPPER = """#ifndef __SKIP_INTERNAL_FATBINARY_HEADERS
#include "fatbinary_section.h"
#endif
#define __CUDAFATBINSECTION  ".nvFatBinSegment"
#define __CUDAFATBINDATASECTION  ".nv_fatbin"
#ifdef __cplusplus
extern "C" {
#endif
extern const unsigned long long SYMBOL[] __attribute__((visibility("hidden")));
static const __fatBinC_Wrapper_t __fatDeviceText __attribute__ ((aligned (8))) __attribute__ ((section (__CUDAFATBINSECTION)))=
\t{ 0x466243b1, 1, SYMBOL, 0 };
#ifdef __cplusplus
}
#endif
"""
DATA = """\t.section .nv_fatbin, "a"
\t.align 8
\t.globl SYMBOL
\t.hidden SYMBOL
\t.type SYMBOL, @object
SYMBOL:
\t.incbin "FATBIN"
\t.size SYMBOL, .-SYMBOL
\t.section .note.GNU-stack,"",@progbits
"""
STUB = ".stub.c"  # beside a device job's cubin: the host stub its cicc wrote
SYMBOL = ".symbol"  # beside a host object: the symbol its fatbin object defines


class StepFailed(WheelforgeError):
    """A step cannot be run as nvcc's steps (what nvcc -dryrun gave, the stubs)."""


def _env(nvcc: Path) -> dict[str, str]:
    cuda = nvcc.resolve().parent.parent
    env = dict(os.environ, PATH=f"{cuda}/nvvm/bin:{cuda}/bin:{os.environ.get('PATH', '')}")
    # each step is one arch or none: no threads to give it, and nvcc -dryrun with --threads
    # lists fatbinary's inputs otherwise (build/ninja.py hands every nvcc them)
    appended = re.sub(r"--threads[ =]\S+", "", env.get("NVCC_APPEND_FLAGS", "")).strip()
    env["NVCC_APPEND_FLAGS"] = appended
    return env


def _run(cmd: list[str] | str, nvcc: Path) -> str:
    """Run one of nvcc's steps (a command of ``nvcc -dryrun`` is a shell line: its words);
    its stderr."""
    argv = shlex.split(cmd) if isinstance(cmd, str) else cmd
    hint = "it comes with the CUDA toolkit whose nvcc the build runs"
    done = proc.run(argv, hint=hint, timeout=proc.BUILD_S, env=_env(nvcc), replace_env=True)
    return done.stderr


def _dryrun(nvcc: Path, flags: list[str], source: str, keep: Path) -> list[str]:
    """``nvcc -c``'s commands for *flags* (the ``#$`` lines that set no variable)."""
    cmd = [str(nvcc), *flags, "-c", source, "-o", "whole.o", "-dryrun", "--keep-dir", str(keep)]
    lines = [ln[3:] for ln in _run([*cmd, "--keep"], nvcc).splitlines() if ln.startswith("#$ ")]
    return [ln for ln in lines if not re.match(r"^[A-Za-z_]+=", ln)]


def _one(found: Sequence[T], test: Callable[[T], bool], what: str) -> T:
    """The first of *found* that passes *test*: nvcc -dryrun's command (or the file) for
    *what*, which this toolkit's nvcc must have."""
    for item in found:
        if test(item):
            return item
    raise StepFailed(f"nvcc -dryrun gave no {what} (a toolkit this step does not know)")


def _fresh(folder: Path) -> Path:
    """The step's own folder for nvcc's intermediate files, empty."""
    removal.remove(folder, within=folder.parent)
    folder.mkdir(parents=True)
    return folder


def _read(path: Path) -> str:
    return readers.read_text(path, cap=readers.STATE_CAP, errors="replace")


def device(nvcc: Path, flags: list[str], source: str, code: str, out: Path) -> None:
    """One arch's image of *source*: nvcc -cubin (-ptx for a compute_ code), its depfile, and
    the stub cicc wrote (kept beside a cubin)."""
    parts = _fresh(out.with_name(out.name + ".parts"))
    ptx = code.startswith("compute_")
    arch = "compute_" + code.partition("_")[2]
    _run(
        [
            str(nvcc),
            *flags,
            "-ptx" if ptx else "-cubin",
            gencode_flag(arch, code),
            "--generate-dependencies-with-compile",
            "--dependency-output",
            f"{out}.d",
            source,
            "-o",
            str(out),
            "--keep",
            "--keep-dir",
            str(parts),
        ],
        nvcc,
    )
    stub = next(parts.glob("*.cudafe1.stub.c"), None)
    if stub is not None:
        # its line markers name it in this job's folder: named bare, every arch's is the same
        writers.write_atomic(out.with_name(out.name + STUB), _read(stub).replace(f"{parts}/", ""))
    removal.remove(parts, within=out.parent)


def host(nvcc: Path, flags: list[str], source: str, *, arch: str, images: Path, out: Path) -> None:
    """The host object of *source* (module notes), for *arch* (any: nothing reads the arch
    list), with a depfile. The stub is the newest a device job wrote beside an image named
    *images*.* (the command names no arch, so every arch set shares it): every arch's cicc
    writes the same stub, and nvcc -c itself keeps whichever wrote last; another arch set's
    older one may be of an earlier source."""
    stubs = sorted(images.parent.glob(f"{images.name}.*{STUB}"), key=lambda p: p.stat().st_mtime_ns)
    if not stubs:
        raise StepFailed(f"{source}: no device job wrote a host stub")
    text = _read(stubs[-1])
    parts = _fresh(out.with_name(out.name + ".parts"))
    gencode = gencode_flag(f"compute_{arch}", f"sm_{arch}")
    cmds = _dryrun(nvcc, [*flags, gencode], source, parts)
    pp = _one(cmds, lambda c: " -E " in c and ".cpp4.ii" in c, "host preprocessing")
    front = _one(cmds, lambda c: c.startswith("cudafe++"), "cudafe++")
    compile_ = _one(cmds, lambda c: " -c " in c and "cudafe1.cpp" in c, "host compile")
    quoted = shlex.quote(str(out))
    # the host preprocessing names every header the host side reads: the host job's depfile
    _run(pp.replace(" -E ", f" -E -MD -MF {shlex.quote(f'{out}.d')} -MT {quoted} ", 1), nvcc)
    _refuse_arch_list(pp, source, nvcc)
    _run(front, nvcc)
    module_id = _read(_one(list(parts.glob("*.module_id")), lambda _: True, "module id")).strip()
    symbol = "__wf_fatbin" + re.sub(r"[^A-Za-z0-9_]", "_", module_id)
    cudafe = _one(list(parts.glob("*.cudafe1.cpp")), lambda _: True, "cudafe++ output")
    included = re.search(r'#include "([^"]+\.stub\.c)"', _read(cudafe))
    if included is None:
        raise StepFailed(f"{cudafe}: no stub include")
    stub = parts / included[1]
    writers.write_atomic(stub, text)
    fatbin_c = re.search(r'#include "([^"]+\.fatbin\.c)"', text)
    if fatbin_c is None:
        raise StepFailed(f"{source}: the stub includes no .fatbin.c")
    writers.write_atomic(parts / fatbin_c[1], WRAPPER.replace("SYMBOL", symbol))
    _run(re.sub(r' -o "[^"]*"', f" -o {quoted}", compile_), nvcc)
    writers.write_atomic(out.with_name(out.name + SYMBOL), symbol + "\n")
    removal.remove(parts, within=out.parent)


# What a build whose host code reads the arch list can do: one nvcc -c per arch set
# (WHEELFORGE_SPLIT_COMPILE turns nvcc's steps off, planning/devshare.py; 1: no partitions).
_ARCH_LIST_HINT = (
    "its host object cannot serve every arch set; build with WHEELFORGE_SPLIT_COMPILE=1 "
    "(one nvcc -c per arch set) or drop the CCCL defines from nvcc-flags"
)


def _refuse_arch_list(pp: str, source: str, nvcc: Path) -> None:
    """The host preprocessing again with another arch list: the same text, or the host code
    reads ``__CUDA_ARCH_LIST__`` (CUB's dispatch does: its policies follow the list) and a
    StepFailed says so. A test of whether it is defined reads the same for every list."""
    found = re.search(r"-D__CUDA_ARCH_LIST__=([0-9,]+)", pp)
    written = re.search(r' -o "([^"]+)"', pp)
    if found is None or written is None:
        raise StepFailed(f"{source}: nvcc -dryrun's host preprocessing names no arch list")
    other = f"{written[1]}.other"
    probe = pp.replace(found[0], f"{found[0]},1000", 1).replace(written[0], f' -o "{other}"', 1)
    _run(probe, nvcc)
    same = filecmp.cmp(written[1], other, shallow=False)
    removal.remove(Path(other), within=Path(other).parent)
    if not same:
        raise StepFailed(f"{source}: its host code reads __CUDA_ARCH_LIST__: {_ARCH_LIST_HINT}")


def fatbin(
    nvcc: Path,
    flags: list[str],
    source: str,
    *,
    host_object: Path,
    images: list[Path],
    cc: str,
    out: Path,
) -> None:
    """The arch set's fatbin object (module notes); *flags* end with the arch set's -gencode."""
    parts = _fresh(out.with_name(out.name + ".parts"))
    cmds = _dryrun(nvcc, flags, source, parts)
    line = _one(cmds, lambda c: c.startswith("fatbinary"), "fatbinary")
    by_code = {p.name.rsplit(".", 2)[-2]: p for p in images}  # x.sm_90.cubin → sm_90
    args = []
    for given in shlex.split(line)[1:]:
        arg = given
        if arg.startswith(("--embedded-fatbin=", "--create=")):
            continue
        if arg.startswith("--image3="):
            fields = dict(f.split("=", 1) for f in arg[len("--image3=") :].split(","))
            code = ("compute_" if fields["kind"] == "ptx" else "sm_") + fields["sm"]
            if code not in by_code:
                raise StepFailed(f"{source}: no image for {code}")
            arg = f"--image3=kind={fields['kind']},sm={fields['sm']},file={by_code[code]}"
        args.append(arg)
    made = parts / "device.fatbin"
    _run(["fatbinary", *args, f"--create={made}"], nvcc)
    symbol = _read(host_object.with_name(host_object.name + SYMBOL)).strip()
    asm = parts / "fatbin.S"
    writers.write_atomic(asm, DATA.replace("SYMBOL", symbol).replace("FATBIN", str(made)))
    _run([*shlex.split(cc), "-c", str(asm), "-o", str(out)], nvcc)
    removal.remove(parts, within=out.parent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nvccsplit")
    parser.add_argument("step", choices=("host", "device", "fatbin"))
    parser.add_argument("--nvcc", type=Path, required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--code", default="")  # device: sm_90, compute_90
    parser.add_argument("--arch", default="")  # host: the arch it is preprocessed for (90)
    parser.add_argument("--images", type=Path)  # host: the device images' names, less .<code>
    parser.add_argument("--host", type=Path)  # fatbin: the host object (its symbol beside it)
    parser.add_argument("--image", type=Path, action="append", default=[])  # fatbin
    parser.add_argument("--cc", default="cc")  # fatbin: what assembles the .incbin
    given = sys.argv[1:] if argv is None else argv
    cut = given.index("--") if "--" in given else len(given)
    args = parser.parse_args(given[:cut])
    # nvcc's flags, after --; their temporaries go to each step's --keep-dir, under names of
    # the source's (no pid), not beside an object named whole.o (--objdir-as-tempdir)
    flags = [f for f in given[cut + 1 :] if f != "--objdir-as-tempdir"]
    try:
        if args.step == "device":
            device(args.nvcc, flags, args.source, args.code, args.out)
        elif args.step == "host":
            host(args.nvcc, flags, args.source, arch=args.arch, images=args.images, out=args.out)
        else:
            fatbin(
                args.nvcc,
                flags,
                args.source,
                host_object=args.host,
                images=args.image,
                cc=args.cc,
                out=args.out,
            )
    except WheelforgeError as e:
        if e.details:
            print(e.details, file=sys.stderr)
        print(f"wheelforge: nvcc {args.step} step of {args.source} failed: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"wheelforge: nvcc {args.step} step of {args.source} failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
