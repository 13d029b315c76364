"""Small modules and short functions (docs/architecture.md): a module in src/ over 400 lines or
a function over 60 is reported as a warning (in pytest's warnings summary), not a failure.
Ownership decides where a module is cut; the caps only point at places worth a second look.

Run ``python tests/unit/test_sizes.py`` to print every module's and long function's size."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "wheelforge"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


class SizeWarning(UserWarning):
    """A module or function longer than its cap."""


def module_sizes() -> dict[str, int]:
    return {
        str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(SRC.rglob("*.py"))
    }


def function_sizes() -> dict[str, int]:
    """Lines of every function and method, decorators and docstring included."""
    sizes = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                assert node.end_lineno is not None
                key = f"{path.relative_to(SRC)}:{node.name}"
                sizes[key] = max(sizes.get(key, 0), node.end_lineno - start + 1)
    return sizes


def over(sizes: dict[str, int], cap: int) -> dict[str, int]:
    return {name: n for name, n in sizes.items() if n > cap}


def test_long_modules_are_reported() -> None:
    modules = module_sizes()
    assert "build_meta.py" in modules, "the measure found no modules"
    for module, lines in sorted(over(modules, MAX_MODULE_LINES).items()):
        warnings.warn(
            SizeWarning(f"{module}: {lines} lines (cap {MAX_MODULE_LINES})"), stacklevel=1
        )


def test_long_functions_are_reported() -> None:
    functions = function_sizes()
    assert "build_meta.py:build_wheel" in functions, "the measure found no functions"
    for function, lines in sorted(over(functions, MAX_FUNCTION_LINES).items()):
        warnings.warn(
            SizeWarning(f"{function}: {lines} lines (cap {MAX_FUNCTION_LINES})"), stacklevel=1
        )


def test_the_measure_counts_lines_and_warns_past_the_cap() -> None:
    """The measure itself: decorators and docstring count, and only lines past the cap warn."""
    assert over({"a.py": MAX_MODULE_LINES, "b.py": MAX_MODULE_LINES + 1}, MAX_MODULE_LINES) == {
        "b.py": MAX_MODULE_LINES + 1
    }
    functions = function_sizes()
    source = (SRC / "build_meta.py").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(source) if line.startswith("def build_wheel("))
    end = next(i for i, line in enumerate(source) if line.startswith("def build_sdist("))
    assert functions["build_meta.py:build_wheel"] == len(source[start:end]) - 2  # 2 blank lines


if __name__ == "__main__":
    for module, lines in sorted(module_sizes().items(), key=lambda kv: -kv[1]):
        print(f"{lines:5d}  {module}")
    print(f"functions over {MAX_FUNCTION_LINES * 2 // 3} lines:")
    for function, lines in sorted(function_sizes().items(), key=lambda kv: -kv[1]):
        if lines > MAX_FUNCTION_LINES * 2 // 3:
            print(f"{lines:5d}  {function}")
