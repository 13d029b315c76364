"""The bad-input corpus: every class of bad input a demanding user tried (issue 11), each run
through the CLI in-process. Every case must end with exactly one ``error:`` line that names the
bad thing, the exit code of its error class, and no traceback. Nothing here starts a process:
nvcc's answers come from a fake, and every build case is refused before anything would run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.badinput import (
    ELF,
    FIFO,
    METADATA,
    MX,
    UNSTABLE,
    USAGE,
    WHEEL,
    B,
    Case,
    Link,
    Sparse,
    bomb,
    m,
    quietly,
    record_row,
    recorded,
    run_case,
    shown_member,
    tampered,
    wheel,
)
from tests.unit.conftest import GOOD_MATRIX
from wheelforge.foundation.errors import (
    BinaryFormatError,
    ConfigError,
    EnvironmentProblem,
    VerificationError,
)

CASES: dict[str, Case] = {
    # --- arch lists: flag, environment, matrix -------------------------------------------
    "archs-sm-spelling": Case(
        (*B, "--archs", "7.5 sm_90"), ConfigError, "'sm_90' is not a CUDA arch; did you mean '9.0'?"
    ),
    "archs-unknown": Case((*B, "--archs", "4.2"), ConfigError, "'4.2' is not a known CUDA arch"),
    "archs-empty": Case((*B, "--archs", " ; "), ConfigError, "--archs: the arch list is empty"),
    "archs-native": Case((*B, "--archs", "native"), ConfigError, "'native' needs the GPUs"),
    "archs-a-too-old": Case((*B, "--archs", "8.0a"), ConfigError, "'8.0a': arch-specific"),
    "archs-f-too-old": Case((*B, "--archs", "9.0f"), ConfigError, "'9.0f': family-specific"),
    "archs-named-typo": Case((*B, "--archs", "Hoper"), ConfigError, "did you mean 'Hopper'?"),
    "archs-garbage": Case((*B, "--archs", "!!!"), ConfigError, "'!!!' is not a CUDA arch"),
    "archs-env": Case(
        B, ConfigError, "TORCH_CUDA_ARCH_LIST: 'sm_80'", env={"TORCH_CUDA_ARCH_LIST": "sm_80"}
    ),
    "archs-env-native": Case(
        B, ConfigError, "TORCH_CUDA_ARCH_LIST: 'native'", env={"TORCH_CUDA_ARCH_LIST": "native"}
    ),
    "archs-matrix": Case(
        B,
        ConfigError,
        "arch-sets.default: '9.9' is not a known CUDA arch",
        matrix=m("8.0 9.0+PTX", "9.9"),
    ),
    "archs-matrix-ptx-case": Case(
        B,
        ConfigError,
        "'9.0+ptx' is not a CUDA arch; did you mean '9.0+PTX'?",
        matrix=m("8.0 9.0+PTX", "9.0+ptx"),
    ),
    "archs-matrix-empty": Case(
        B, ConfigError, "arch-sets.default: the arch list is empty", matrix=m("8.0 9.0+PTX", "")
    ),
    "archs-bad-set-name": Case(
        B, ConfigError, "arch-sets: name 'Big' must be lower-case", matrix=m("default:", "Big:")
    ),
    "archs-not-mapping": Case(
        B,
        ConfigError,
        "arch-sets must be an arch list or a mapping",
        matrix=m('  default: "8.0 9.0+PTX"', "  - 8.0"),
    ),
    "archs-matrix-command": Case(
        (*MX, "--archs", "sm_75"), ConfigError, "'sm_75' is not a CUDA arch"
    ),
    # --- matrix.yaml -------------------------------------------------------------------------
    "matrix-missing": Case(
        ("build", "--matrix", "{root}/nope.yaml"), ConfigError, "nope.yaml was not found"
    ),
    "matrix-folder": Case(
        ("build", "--matrix", "{root}/csrc"), ConfigError, "csrc could not be read"
    ),
    "matrix-empty": Case(B, ConfigError, "matrix.yaml is empty", matrix=""),
    "matrix-yaml-syntax": Case(
        B, ConfigError, "matrix.yaml:2: invalid YAML", matrix="a: [\nb: ]]\n"
    ),
    "matrix-not-mapping": Case(B, ConfigError, "the top level must be a mapping", matrix="- 1\n"),
    "matrix-not-utf8": Case(B, ConfigError, "could not be read", matrix="\udcff"),
    "matrix-unknown-key": Case(
        B,
        ConfigError,
        "unknown key 'pakage'; did you mean 'package'?",
        matrix=GOOD_MATRIX + "pakage: 1\n",
    ),
    "matrix-many-unknown-keys": Case(
        B,
        ConfigError,
        "2000 problems, the first 50 above; fix these first",
        matrix=GOOD_MATRIX + "".join(f"k{i}: 1\n" for i in range(2000)),
    ),
    "matrix-duplicate-key": Case(
        B, ConfigError, "key 'torch' appears twice", matrix=GOOD_MATRIX + "torch: '>=2.11'\n"
    ),
    "matrix-no-package": Case(
        B,
        ConfigError,
        "the top level needs 'package'",
        matrix="extension:" + GOOD_MATRIX.split("extension:")[1],  # the package section cut
    ),
    "matrix-package-scalar": Case(
        B,
        ConfigError,
        "package must be a mapping, got '3'",
        matrix="package: 3\n" + "extension:" + GOOD_MATRIX.split("extension:")[1],
    ),
    "matrix-bad-name": Case(
        B,
        ConfigError,
        "package.name 'demo ops!' is not a valid distribution name",
        matrix=m("name: demo-ops", "name: demo ops!"),
    ),
    "matrix-bad-version": Case(
        B,
        ConfigError,
        "package.version 'one' is not a PEP 440 version",
        matrix=m("version: 1.2.0", "version: one"),
    ),
    "matrix-requires-python": Case(
        B,
        ConfigError,
        "package.requires-python '3.10+' is not a version range",
        matrix=m("  summary: demo", "  summary: demo\n  requires-python: '3.10+'"),
    ),
    "matrix-summary-lines": Case(
        B,
        ConfigError,
        "matrix.yaml:4: package.summary must be one line",
        matrix=m("  summary: demo", '  summary: "demo\\nRequires-Dist: evil"'),
    ),
    "matrix-summary-line-separator": Case(
        B,
        ConfigError,
        "package.summary must be one line",
        matrix=m("  summary: demo", '  summary: "a\\u2028b"'),
    ),
    "matrix-dependency": Case(
        B,
        ConfigError,
        "package.dependencies: 'numpy >>= 1' is not a requirement",
        matrix=m("  summary: demo", "  summary: demo\n  dependencies: ['numpy >>= 1']"),
    ),
    "matrix-torch-dependency": Case(
        B,
        ConfigError,
        "leave torch out",
        matrix=m("  summary: demo", "  summary: demo\n  dependencies: ['torch>=2']"),
    ),
    "matrix-package-folder": Case(
        B,
        ConfigError,
        "package.packages: 'nowhere' is not a folder",
        matrix=m("packages: [demo_ops]", "packages: [nowhere]"),
    ),
    "matrix-package-no-init": Case(
        B,
        ConfigError,
        "package.packages: 'csrc' has no __init__.py",
        matrix=m("packages: [demo_ops]", "packages: [demo_ops, csrc]"),
    ),
    "matrix-extension-name": Case(
        B,
        ConfigError,
        "extension.name 'demo-ops._C' must be a module name",
        matrix=m("name: demo_ops._C", "name: demo-ops._C"),
    ),
    "matrix-extension-outside": Case(
        B,
        ConfigError,
        "extension.name 'other._C' is not inside any of package.packages",
        matrix=m("name: demo_ops._C", "name: other._C"),
    ),
    "matrix-source-folder": Case(
        B,
        ConfigError,
        "matrix.yaml:8: extension.sources: 'csrc' names a folder",
        matrix=m("sources: [csrc/*.cpp, csrc/*.cu]", "sources: [csrc]"),
    ),
    "matrix-source-none": Case(
        B,
        ConfigError,
        "extension.sources: 'src/*.cu' matches no file",
        matrix=m("sources: [csrc/*.cpp, csrc/*.cu]", "sources: [src/*.cu]"),
    ),
    "matrix-source-header": Case(
        B,
        ConfigError,
        "matches ops.h, which is not a source",
        matrix=m("sources: [csrc/*.cpp, csrc/*.cu]", "sources: ['csrc/*']"),
    ),
    "matrix-source-absolute": Case(
        B,
        ConfigError,
        "extension.sources: '/etc/x.cu' must be relative",
        matrix=m("sources: [csrc/*.cpp, csrc/*.cu]", "sources: [/etc/x.cu]"),
    ),
    "matrix-source-archs": Case(
        B,
        ConfigError,
        "extension.sources[0].archs: 'sm90' is not a CUDA arch",
        matrix=m("sources: [csrc/*.cpp, csrc/*.cu]", "sources: [{files: csrc/*.cu, archs: sm90}]"),
    ),
    "matrix-include-dir": Case(
        B,
        ConfigError,
        "extension.include-dirs: 'inc' is not a folder",
        matrix=m("include-dirs: [csrc]", "include-dirs: [inc]"),
    ),
    "matrix-module-init": Case(
        B,
        ConfigError,
        "extension.module-init must be true or false",
        matrix=m("include-dirs: [csrc]", "include-dirs: [csrc]\n  module-init: maybe"),
    ),
    "matrix-flags-type": Case(
        B,
        ConfigError,
        "extension.cxx-flags must be a list of strings",
        matrix=m("include-dirs: [csrc]", "include-dirs: [csrc]\n  cxx-flags: {a: 1}"),
    ),
    "matrix-torch-old": Case(
        B,
        ConfigError,
        "the stable ABI needs torch >=",
        matrix=m('torch: ">=2.10"', 'torch: ">=2.5"'),
    ),
    "matrix-torch-garbage": Case(
        B, ConfigError, "torch: ", matrix=m('torch: ">=2.10"', "torch: banana")
    ),
    "matrix-abi": Case(
        B,
        ConfigError,
        "abi must be 'stable' or 'unstable', got 'shaky'",
        matrix=GOOD_MATRIX + "abi: shaky\n",
    ),
    "matrix-unstable-unpinned": Case(
        B,
        ConfigError,
        "an unstable-ABI matrix builds once per torch version",
        matrix=GOOD_MATRIX + "abi: unstable\n",
    ),
    "matrix-unstable-python-abi": Case(
        B,
        ConfigError,
        "python-abi sets the floor of stable-ABI (abi3) wheels",
        matrix=UNSTABLE + "python-abi: cp310\n",
    ),
    "matrix-python-abi": Case(
        B,
        ConfigError,
        "python-abi must name the oldest CPython of the abi3 wheel, like 'cp310', got 'py3'",
        matrix=GOOD_MATRIX + "python-abi: py3\n",
    ),
    "matrix-python-abi-old": Case(
        B,
        ConfigError,
        "python-abi 'cp31' is older than the limited API",
        matrix=GOOD_MATRIX + "python-abi: cp31\n",
    ),
    "matrix-limited-api-newer": Case(
        B,
        ConfigError,
        "extension.limited-api '3.11' is newer than python-abi 'cp310'",
        matrix=GOOD_MATRIX.replace(
            "  include-dirs: [csrc]\n", '  include-dirs: [csrc]\n  limited-api: "3.11"\n'
        ),
    ),
    "matrix-limited-api-spelling": Case(
        B,
        ConfigError,
        "limited-api",
        matrix=GOOD_MATRIX.replace(
            "  include-dirs: [csrc]\n", "  include-dirs: [csrc]\n  limited-api: cp38\n"
        ),
    ),
    "matrix-cuda": Case(
        B,
        ConfigError,
        "cuda: 'thirteen' is neither 'auto' nor a CUDA release",
        matrix=GOOD_MATRIX + "cuda: [thirteen]\n",
    ),
    "matrix-cuda-twice": Case(
        B,
        ConfigError,
        "cuda: a release appears twice",
        matrix=GOOD_MATRIX + "cuda: ['13.0', '13.0']\n",
    ),
    "matrix-tests-path": Case(
        B,
        ConfigError,
        "tests.path: 'tests' is not a folder",
        matrix=GOOD_MATRIX + "tests: {path: tests}\n",
    ),
    "matrix-tests-requires": Case(
        B,
        ConfigError,
        "tests.requires: 'pytest >>= 8' is not a requirement",
        matrix=GOOD_MATRIX + "tests: {path: csrc, requires: ['pytest >>= 8']}\n",
    ),
    "matrix-tests-torch": Case(
        B,
        ConfigError,
        "tests.torch: 'latest' is not a version",
        matrix=GOOD_MATRIX + "tests: {path: csrc, torch: [latest]}\n",
    ),
    "matrix-tests-command": Case(
        B,
        ConfigError,
        "tests.command must contain {path}",
        matrix=GOOD_MATRIX + "tests: {path: csrc, command: [pytest]}\n",
    ),
    # --- the environment ---------------------------------------------------------------------
    "env-max-jobs": Case(
        B, ConfigError, "MAX_JOBS='abc' must be a positive whole number", env={"MAX_JOBS": "abc"}
    ),
    "env-max-jobs-zero": Case(B, ConfigError, "MAX_JOBS='0'", env={"MAX_JOBS": "0"}),
    "env-nvcc-threads": Case(B, ConfigError, "NVCC_THREADS='-2'", env={"NVCC_THREADS": "-2"}),
    "env-sde-word": Case(
        B,
        ConfigError,
        "SOURCE_DATE_EPOCH='abc' must be whole seconds since 1970",
        env={"SOURCE_DATE_EPOCH": "abc"},
    ),
    "env-sde-float": Case(
        B, ConfigError, "SOURCE_DATE_EPOCH='1.5'", env={"SOURCE_DATE_EPOCH": "1.5"}
    ),
    "env-sde-negative": Case(
        B, ConfigError, "SOURCE_DATE_EPOCH='-1'", env={"SOURCE_DATE_EPOCH": "-1"}
    ),
    "env-cxx-missing": Case(
        B,
        ConfigError,
        "the C/C++ compiler 'no-such-cxx' ($CXX) was not found",
        env={"CXX": "no-such-cxx"},
    ),
    "env-cc-missing": Case(
        B,
        ConfigError,
        "the C/C++ compiler 'no-such-cc' ($CC) was not found",
        env={"CC": "no-such-cc"},
    ),
    "env-cxx-launcher-missing": Case(
        B,
        ConfigError,
        "the compiler launcher 'nocache' ($CXX='nocache c++') was not found",
        env={"CXX": "nocache c++"},
    ),
    "env-cxx-launcher-compiler-missing": Case(
        B, ConfigError, "the C/C++ compiler 'g+++' ($CXX='ccache g+++')", env={"CXX": "ccache g+++"}
    ),
    "env-cxx-flag-last": Case(B, ConfigError, "ends in the flag '-m64'", env={"CXX": "c++ -m64"}),
    "env-cxx-quote": Case(B, ConfigError, "$CXX: No closing quotation", env={"CXX": '"c++'}),
    "env-cxx-blank": Case(B, ConfigError, "$CXX is blank", env={"CXX": "  "}),
    "env-cmake-launcher": Case(
        B,
        ConfigError,
        "the compiler launcher 'nocache' ($CMAKE_CXX_COMPILER_LAUNCHER) was not found",
        env={"CMAKE_CXX_COMPILER_LAUNCHER": "nocache"},
    ),
    "env-cmake-cuda-launcher": Case(
        B,
        ConfigError,
        "($CMAKE_CUDA_COMPILER_LAUNCHER)",
        env={"CMAKE_CUDA_COMPILER_LAUNCHER": "nocache"},
    ),
    "env-cuda-home-nowhere": Case(
        B, ConfigError, "CUDA_HOME=/nonexistent is not a folder", env={"CUDA_HOME": "/nonexistent"}
    ),
    "env-cuda-home-no-nvcc": Case(
        B, ConfigError, "CUDA_HOME={root}/csrc has no bin/nvcc", env={"CUDA_HOME": "{root}/csrc"}
    ),
    "env-cuda-home-not-exec": Case(
        B,
        ConfigError,
        "has a bin/nvcc that is not executable",
        env={"CUDA_HOME": "{root}/cuda"},
        files={"cuda/bin/nvcc": "#!/bin/sh\n"},
    ),
    "env-cuda-path-nowhere": Case(
        MX, ConfigError, "CUDA_PATH=/nonexistent is not a folder", env={"CUDA_PATH": "/nonexistent"}
    ),
    "env-cuda-home-toolkit-list": Case(
        ("toolkit", "list"),
        ConfigError,
        "CUDA_HOME=/nonexistent",
        env={"CUDA_HOME": "/nonexistent"},
    ),
    "env-max-member-bytes": Case(
        ("inspect", "{root}/" + WHEEL),
        ConfigError,
        "WHEELFORGE_MAX_MEMBER_BYTES='lots'",
        env={"WHEELFORGE_MAX_MEMBER_BYTES": "lots"},
        files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF))},
    ),
    "env-max-ratio": Case(
        ("check", "{root}/" + WHEEL),
        ConfigError,
        "WHEELFORGE_MAX_RATIO='0'",
        env={"WHEELFORGE_MAX_RATIO": "0"},
        files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF))},
    ),
    # --- flags -------------------------------------------------------------------------------
    "python-not-on-path": Case(
        (*B, "--python", "python9.99"),
        ConfigError,
        "--python python9.99: no such command on the PATH",
    ),
    "python-no-such-file": Case(
        (*B, "--python", "/nonexistent/python"),
        ConfigError,
        "--python /nonexistent/python: no such file",
    ),
    "python-folder": Case(
        (*B, "--python", "{root}/csrc"), ConfigError, "--python {root}/csrc is a folder"
    ),
    "python-not-executable": Case(
        (*B, "--python", "{root}/csrc/ops.cpp"),
        ConfigError,
        "--python {root}/csrc/ops.cpp is not executable",
    ),
    "jobs-zero": Case((*B, "--jobs", "0"), USAGE, "--jobs"),
    "jobs-word": Case((*B, "-j", "many"), USAGE, "'many' is not a valid integer"),
    "only-unknown": Case((*B, "--only", "nope"), ConfigError, "--only nope: no such variant"),
    "out-under-proc": Case(
        (*B, "--out", "/proc/wheelforge-out"),
        EnvironmentProblem,
        "--out /proc/wheelforge-out: cannot write there",
    ),
    "build-dir-under-proc": Case(
        (*B, "--build-dir", "/proc/wheelforge-build"),
        EnvironmentProblem,
        "--build-dir /proc/wheelforge-build",
    ),
    "cache-dir-under-proc": Case(
        (*B, "--cache-dir", "/proc/wheelforge-cache"),
        EnvironmentProblem,
        "--cache-dir /proc/wheelforge-cache",
    ),
    "out-is-a-file": Case(
        (*B, "--out", "{root}/csrc/ops.cpp"),
        USAGE,
        "Invalid value for '--out': Directory '{root}/csrc/ops.cpp' is a file",
    ),
    "out-below-a-file": Case(
        (*B, "--out", "{root}/csrc/ops.cpp/dist"),
        EnvironmentProblem,
        "--out {root}/csrc/ops.cpp/dist: cannot write there",
    ),
    "out-in-package": Case(
        (*B, "--out", "{root}/demo_ops/dist"),
        ConfigError,
        "--out {root}/demo_ops/dist lies inside the package folder",
    ),
    "build-dir-in-package": Case(
        (*B, "--build-dir", "{root}/demo_ops"),
        ConfigError,
        "--build-dir {root}/demo_ops lies inside the package folder",
    ),
    "unknown-flag": Case(("build", "--no-such-flag"), USAGE, "No such option '--no-such-flag'"),
    "unknown-command": Case(("frobnicate",), USAGE, "No such command 'frobnicate'"),
    "check-target": Case(
        ("check", "--target", "2.x", "{root}/x.so"),
        USAGE,
        "'2.x' is not a torch version like 2.10",
        files={"x.so": ELF},
    ),
    "check-python-abi": Case(
        ("check", "--target", "2.10", "--python-abi", "py3", "{root}/x.so"),
        USAGE,
        "'py3' is not like cp310",
        files={"x.so": ELF},
    ),
    "toolkit-install-word": Case(
        ("toolkit", "install", "abc"), ConfigError, "'abc' is a malformed CUDA release"
    ),
    "toolkit-install-major": Case(
        ("toolkit", "install", "13"), ConfigError, "'13' is a malformed CUDA release"
    ),
    "toolkit-install-patch": Case(
        ("toolkit", "install", "13.0.1"), ConfigError, "'13.0.1' is a malformed CUDA release"
    ),
    "toolkit-install-unknown": Case(
        ("toolkit", "install", "9.9"), ConfigError, "no recipe for CUDA 9.9"
    ),
    "test-no-tests": Case(
        ("test", "--matrix", "{root}/matrix.yaml"), USAGE, "has no 'tests' section"
    ),
    "test-wheel-missing": Case(
        ("test", "--matrix", "{root}/matrix.yaml", "--wheel", "{root}/no.whl"),
        ConfigError,
        "--wheel {root}/no.whl: no such file",
        matrix=GOOD_MATRIX + "tests: {path: csrc}\n",
    ),
    # --- files given to inspect and check ---------------------------------------------------
    "inspect-dev-zero": Case(
        ("inspect", "/dev/zero"), ConfigError, "/dev/zero is a character device, not a regular file"
    ),
    "check-dev-zero": Case(
        ("check", "--target", "2.10", "/dev/zero"), ConfigError, "/dev/zero is a character device"
    ),
    "inspect-fifo": Case(
        ("inspect", "{root}/pipe.so"),
        ConfigError,
        "{root}/pipe.so is a FIFO (named pipe)",
        files={"pipe.so": FIFO},
    ),
    "check-fifo": Case(
        ("check", "--target", "2.10", "{root}/pipe.so"),
        ConfigError,
        "pipe.so is a FIFO",
        files={"pipe.so": FIFO},
    ),
    "check-fifo-wheel": Case(
        ("check", "{root}/" + WHEEL), ConfigError, "is a FIFO", files={WHEEL: FIFO}
    ),
    "inspect-missing": Case(
        ("inspect", "{root}/nothing.so"), ConfigError, "{root}/nothing.so: no such file or folder"
    ),
    "check-missing": Case(
        ("check", "{root}/nothing.whl"), ConfigError, "nothing.whl: no such file or folder"
    ),
    "check-folder": Case(
        ("check", "--target", "2.10", "{root}/csrc"),
        ConfigError,
        "{root}/csrc is a folder; pass the wheels or shared objects in it",
    ),
    "check-folder-no-target": Case(("check", "{root}/csrc"), ConfigError, "csrc is a folder"),
    "inspect-text": Case(
        ("inspect", "{root}/csrc/ops.cpp"),
        BinaryFormatError,
        "ops.cpp at offset 0x0: neither an ELF file nor a wheel",
    ),
    "check-text": Case(
        ("check", "--target", "2.10", "{root}/csrc/ops.cpp"),
        ConfigError,
        "ops.cpp is neither a wheel (.whl) nor an ELF shared object",
    ),
    "check-bare-no-target": Case(
        ("check", "{root}/x.so"),
        ConfigError,
        "a bare shared object says nothing of its torch floor",
        files={"x.so": ELF},
    ),
    "check-truncated-elf": Case(
        ("check", "--target", "2.10", "{root}/x.so"),
        BinaryFormatError,
        "x.so: not a readable ELF file",
        files={"x.so": ELF[:200]},
    ),
    "inspect-truncated-elf": Case(
        ("inspect", "{root}/x.so"), BinaryFormatError, "x.so", files={"x.so": ELF[:40]}
    ),
    "inspect-not-zip": Case(
        ("inspect", "{root}/" + WHEEL),
        BinaryFormatError,
        "not a readable wheel (zip)",
        files={WHEEL: "not a zip"},
    ),
    "check-not-zip": Case(
        ("check", "{root}/" + WHEEL),
        BinaryFormatError,
        "not a readable wheel (zip)",
        files={WHEEL: "not a zip"},
    ),
    "check-bad-wheel-name": Case(
        ("check", "{root}/demo.whl"),
        BinaryFormatError,
        "not a wheel file name",
        files={"demo.whl": lambda: wheel(METADATA)},
    ),
    "inspect-bomb": Case(
        ("inspect", "{root}/" + WHEEL),
        BinaryFormatError,
        "demo/_C.abi3.so: inflates 1",
        files={WHEEL: bomb},
    ),
    "check-bomb": Case(
        ("check", "{root}/" + WHEEL),
        BinaryFormatError,
        "above the ratio limit of 200",
        files={WHEEL: bomb},
    ),
    "inspect-member-cap": Case(
        ("inspect", "{root}/" + WHEEL),
        BinaryFormatError,
        "above the cap of 1000",
        env={"WHEELFORGE_MAX_MEMBER_BYTES": "1000"},
        files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF))},
    ),
    "check-member-cap": Case(
        ("check", "{root}/" + WHEEL),
        BinaryFormatError,
        "_C.abi3.so: inflates to",
        env={"WHEELFORGE_MAX_MEMBER_BYTES": "1000"},
        files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF))},
    ),
    "check-dotdot-member": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "has the member '../evil.so'",
        files={WHEEL: lambda: wheel(METADATA, ("../evil.so", ELF))},
    ),
    "check-absolute-member": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "has the member '/etc/evil.py'",
        files={WHEEL: lambda: wheel(METADATA, ("/etc/evil.py", "x"))},
    ),
    "check-no-dist-info": Case(
        ("check", "--target", "2.10", "{root}/" + WHEEL),
        VerificationError,
        "has no NAME-VERSION.dist-info/METADATA",
        files={WHEEL: lambda: wheel(("demo/_C.abi3.so", ELF))},
    ),
    # Without --target, a wheel that states no torch requirement is checked against what its
    # binaries need (issue 23); one without METADATA is then the layout rule's.
    "check-no-dist-info-no-target": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "has no NAME-VERSION.dist-info/METADATA, so no installer accepts it",
        files={WHEEL: lambda: wheel(("demo/x.py", ""))},
    ),
    "check-corrupt-member": Case(
        ("check", "{root}/" + WHEEL),
        BinaryFormatError,
        "demo/_C.abi3.so: not a readable ELF file",
        files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF[:100]))},
    ),
    "inspect-corrupt-member": Case(
        ("inspect", "{root}/" + WHEEL),
        BinaryFormatError,
        "demo/_C.abi3.so",
        files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF[:40]))},
    ),
    # --- issue 21: check reads RECORD ------------------------------------------------------------
    "check-record-missing": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "has no NAME-VERSION.dist-info/RECORD",
        files={WHEEL: lambda: wheel(METADATA, ("demo/x.py", "x = 1\n"))},
    ),
    "check-record-hash-replaced": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "the member 'demo/x.py' does not have the sha256 RECORD gives it",
        files={WHEEL: tampered},
    ),
    "check-record-member-missing": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "the member 'demo/extra.py' is not in RECORD",
        files={
            WHEEL: lambda: wheel(
                METADATA,
                ("demo/extra.py", ""),
                ("demo-1.0.dist-info/RECORD", record_row(METADATA)),
            )
        },
    ),
    "check-record-lists-absent": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "RECORD lists 'demo/gone.py', which the wheel does not hold",
        files={
            WHEEL: lambda: wheel(
                METADATA,
                (
                    "demo-1.0.dist-info/RECORD",
                    record_row(METADATA) + "demo/gone.py,sha256=abc,3\n",
                ),
            )
        },
    ),
    "check-record-duplicate-member": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "the member 'demo/x.py' appears more than once",
        files={WHEEL: lambda: quietly(recorded, METADATA, ("demo/x.py", "a"), ("demo/x.py", "b"))},
    ),
    "check-record-no-hash": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "RECORD gives 'demo-1.0.dist-info/METADATA' no hash",
        files={
            WHEEL: lambda: wheel(
                METADATA, ("demo-1.0.dist-info/RECORD", "demo-1.0.dist-info/METADATA,,\n")
            )
        },
    ),
    "check-record-weak-hash": Case(
        ("check", "{root}/" + WHEEL),
        VerificationError,
        "a md5 hash; PEP 427 asks for sha256",
        files={
            WHEEL: lambda: wheel(
                METADATA,
                ("demo-1.0.dist-info/RECORD", record_row(METADATA).replace("sha256=", "md5=")),
            )
        },
    ),
    # --- issue 21: every file read bounded, every target written checked first --------------
    "matrix-dev-zero": Case(
        ("build", "--matrix", "/dev/zero"),
        ConfigError,
        "/dev/zero could not be read: it is a character device",
    ),
    "matrix-dev-urandom": Case(
        ("matrix", "--matrix", "/dev/urandom"),
        ConfigError,
        "it is a character device, not a regular file",
    ),
    "matrix-fifo": Case(
        ("build", "--matrix", "{root}/m.yaml"),
        ConfigError,
        "m.yaml could not be read: it is a FIFO",
        files={"m.yaml": FIFO},
    ),
    "matrix-huge": Case(
        ("build", "--matrix", "{root}/m.yaml"),
        ConfigError,
        "above the cap of 16 MiB",
        files={"m.yaml": Sparse(62 << 20)},
    ),
    "matrix-link-loop": Case(
        ("build", "--matrix", "{root}/m.yaml"),
        ConfigError,
        "m.yaml could not be read: Too many levels of symbolic links",
        files={"m.yaml": Link("{root}/m.yaml")},
    ),
    "pyproject-fifo": Case(
        B,
        ConfigError,
        "pyproject.toml could not be read: it is a FIFO",
        files={"pyproject.toml": FIFO},
    ),
    "report-dev-full": Case(
        (*B, "--report", "/dev/full"),
        ConfigError,
        "--report /dev/full is a character device, not a regular file",
    ),
    "report-fifo-no-reader": Case(
        (*B, "--report", "{root}/r.json"),
        ConfigError,
        "is a FIFO (named pipe) that nobody reads",
        files={"r.json": FIFO},
    ),
    "report-kernel-file": Case(
        (*B, "--report", "/proc/version"),
        ConfigError,
        "--report /proc/version is a file of the kernel",
    ),
    "report-link-to-kernel-file": Case(
        (*B, "--report", "{root}/r.json"),
        ConfigError,
        "is a file of the kernel (/proc/version)",
        files={"r.json": Link("/proc/version")},
    ),
    "report-folder-missing": Case(
        (*B, "--report", "{root}/nowhere/r.json"),
        EnvironmentProblem,
        "--report {root}/nowhere/r.json: cannot write there",
    ),
    "init-setup-fifo": Case(
        ("init", "--no-run", "{root}/proj"),
        ConfigError,
        "setup.py could not be read: it is a FIFO",
        files={"proj/setup.py": FIFO},
    ),
    "init-setup-dev-zero": Case(
        ("init", "--no-run", "{root}/proj"),
        ConfigError,
        "setup.py could not be read: it is a character device",
        files={"proj/setup.py": Link("/dev/zero")},
    ),
    "init-setup-not-utf8": Case(
        ("init", "--no-run", "{root}/proj"),
        ConfigError,
        "setup.py could not be read: it is not UTF-8 text (byte 0xff on line 2)",
        files={"proj/setup.py": b"import os\n\xff\n"},
    ),
    "init-setup-nul": Case(
        ("init", "--no-run", "{root}/proj"),
        ConfigError,
        "setup.py: not valid Python (source code string cannot contain null bytes)",
        files={"proj/setup.py": b"x = 1\0\n"},
    ),
    "init-setup-deep": Case(
        ("init", "--no-run", "{root}/proj"),
        ConfigError,
        "setup.py:1: not valid Python (too many nested parentheses)",
        files={"proj/setup.py": "x = " + "[" * 5000 + "]" * 5000 + "\n"},
    ),
    "init-setup-long-chain": Case(
        ("init", "--no-run", "{root}/proj"),
        ConfigError,
        "setup.py: cannot be parsed as Python",
        files={"proj/setup.py": "x = " + "+".join(["a"] * 200_000) + "\n"},
    ),
    # --- issue 21: integers are ASCII digits, bounded before int() ------------------------------
    "int-max-jobs-arabic": Case(
        B,
        ConfigError,
        "MAX_JOBS='٤' must be a positive whole number (ASCII digits",
        env={"MAX_JOBS": "٤"},
    ),
    "int-max-jobs-superscript": Case(B, ConfigError, "MAX_JOBS='²'", env={"MAX_JOBS": "²"}),
    "int-max-jobs-huge": Case(B, ConfigError, "MAX_JOBS='99999999", env={"MAX_JOBS": "9" * 5000}),
    "int-nvcc-threads-huge": Case(
        B, ConfigError, "NVCC_THREADS=", env={"NVCC_THREADS": "1" * 5000}
    ),
    "int-sde-huge": Case(
        B, ConfigError, "SOURCE_DATE_EPOCH=", env={"SOURCE_DATE_EPOCH": "1" * 5000}
    ),
    "int-sde-fullwidth": Case(
        B, ConfigError, "SOURCE_DATE_EPOCH='１７００'", env={"SOURCE_DATE_EPOCH": "１７００"}
    ),
    "int-member-cap-huge": Case(
        ("inspect", "{root}/" + WHEEL),
        ConfigError,
        "WHEELFORGE_MAX_MEMBER_BYTES=",
        env={"WHEELFORGE_MAX_MEMBER_BYTES": "7" * 5000},
        files={WHEEL: lambda: wheel(METADATA, ("demo/_C.abi3.so", ELF))},
    ),
    "int-archs-fullwidth": Case(
        (*B, "--archs", "８.０"), ConfigError, "'８.０' is not a CUDA arch"
    ),
    "int-archs-huge": Case((*B, "--archs", "9" * 5000 + ".0"), ConfigError, "is not a CUDA arch"),
    "int-archs-matrix-huge": Case(
        B, ConfigError, "is not a CUDA arch", matrix=m("8.0 9.0+PTX", "1" * 5000 + ".0")
    ),
    "int-target-huge": Case(
        ("check", "--target", "2." + "1" * 5000, "{root}/x.so"),
        USAGE,
        "is not a torch version like 2.10",
        files={"x.so": ELF},
    ),
    "int-target-arabic": Case(
        ("check", "--target", "٢.١٠", "{root}/x.so"),
        USAGE,
        "'٢.١٠' is not a torch version",
        files={"x.so": ELF},
    ),
    "int-size-budget-huge": Case(
        (*B, "--size-budget", "9" * 400 + "MiB"), ConfigError, "is larger than any wheel"
    ),
    "int-size-budget-fraction": Case(
        (*B, "--size-budget", "1." + "5" * 5000 + "MiB"), ConfigError, "is larger than any wheel"
    ),
    "int-size-budget-fullwidth": Case(
        (*B, "--size-budget", "１００MiB"), ConfigError, "is not a size"
    ),
    "int-version-huge": Case(
        B,
        ConfigError,
        "is not a PEP 440 version",
        matrix=m("version: 1.2.0", "version: 1." + "2" * 5000),
    ),
    "int-torch-huge": Case(
        B, ConfigError, "torch: ", matrix=m('torch: ">=2.10"', "torch: '>=2." + "1" * 5000 + "'")
    ),
    "int-torch-list-huge": Case(
        B,
        ConfigError,
        "is not a version",
        matrix=m('torch: ">=2.10"', "torch: ['2." + "1" * 5000 + "']"),
    ),
    "int-requires-python-huge": Case(
        B,
        ConfigError,
        "is not a version range",
        matrix=m("  summary: demo", "  summary: demo\n  requires-python: '>=3." + "1" * 5000 + "'"),
    ),
    "int-dependency-huge": Case(
        B,
        ConfigError,
        "is not a requirement",
        matrix=m(
            "  summary: demo", "  summary: demo\n  dependencies: ['numpy>=1." + "1" * 5000 + "']"
        ),
    ),
    "int-tests-torch-huge": Case(
        B,
        ConfigError,
        "tests.torch: ",
        matrix=GOOD_MATRIX + "tests: {path: csrc, torch: ['2." + "1" * 5000 + "']}\n",
    ),
    "int-cuda-huge": Case(
        B,
        ConfigError,
        "is neither 'auto' nor a CUDA release",
        matrix=GOOD_MATRIX + "cuda: ['1" + "3" * 5000 + ".0']\n",
    ),
    "int-jobs-arabic": Case((*B, "-j", "٤"), USAGE, "'٤' is not a valid"),
    "int-jobs-huge": Case((*B, "-j", "9" * 5000), USAGE, "is not a valid"),
    # A 5,000-digit Requires-Dist is read without a traceback; the one error is the member's.
    "int-check-requires-dist-huge": Case(
        ("check", "{root}/" + WHEEL),
        BinaryFormatError,
        "demo/_C.abi3.so: not a readable ELF file",
        files={
            WHEEL: lambda: recorded(
                (
                    "demo-1.0.dist-info/METADATA",
                    "Name: demo\nRequires-Dist: torch>=2." + "1" * 5000 + "\n",
                ),
                ("demo/_C.abi3.so", ELF[:100]),
            )
        },
    ),
    "init-setup-fifo-would-run": Case(
        ("init", "{root}/proj"),
        ConfigError,
        "setup.py could not be read: it is a FIFO",
        files={"proj/setup.py": FIFO},
    ),
    "init-setup-syntax": Case(
        ("init", "--no-run", "{root}/proj"),
        ConfigError,
        "setup.py:1: not valid Python",
        files={"proj/setup.py": "setup(\n"},
    ),
}


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 90


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_the_right_exit_code(
    name: str,
    project: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_case(CASES[name], project, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize("command", ["inspect", "check"])
@pytest.mark.parametrize("name", ["demo/\x1b[2J\x1b[31mred.abi3.so", "demo/[/]x[bold].abi3.so"])
def test_member_names_reach_the_terminal_as_text(
    command: str,
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 21: escape sequences in wheel member names reached the terminal raw in inspect and
    check; a name that reads as rich markup ([/]) must not be a markup error either."""
    shown = shown_member(command, name, tmp_path, monkeypatch, capsys)
    assert "\x1b" not in shown
    if "\x1b" in name:
        assert "\\x1b[2J" in shown
