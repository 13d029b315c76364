"""The setup.py child's JSON document (child/setup_child.py writes it) read into the one typed
record, record/setuprun.py's SetupRun, field by field: a field that breaks the child's own
shape is a MalformedRecord (a ToolError) naming it, with the way around it (init --no-run);
what setup.py gave setup() and its Extension classes is checked by the record's own
constructors (:meth:`ExtensionArgs.given`, :meth:`SetupArgs.given`: a ConfigError naming the
argument and its extension)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from wheelforge.adoption.record.setuprun import (
    Attempt,
    BuildExtOptions,
    Command,
    Entry,
    ExtensionArgs,
    GeneratorRun,
    MalformedRecord,
    SetupArgs,
    SetupFailure,
    SetupRun,
    StandInMiss,
    TorchSeen,
    Written,
    json_value,
)
from wheelforge.foundation import readers

# What the child records that init does not read (aids for a person reading the document):
# where setup() was called, why a replaced ninja writer failed (its rules are then absent), and
# a generator trial's exit code and exception (what it wrote is what counts).
UNREAD = frozenset(
    {
        "setup_where",
        "ninja_error",
        "generator_exit",
        "generator_errors",
        "build_ext_error",
    }
)


class _Document:
    """The child's JSON document, read field by field with its path for the error."""

    def __init__(self, source: str) -> None:
        self.source = source

    def malformed(self, where: str, value: object, expected: str) -> MalformedRecord:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return MalformedRecord(
            f"{self.source}: {where} is {shown}, where {expected} belongs: the record init's "
            "setup.py child wrote is malformed (did setup.py change it?); read setup.py without "
            "running it with 'wheelforge init --no-run'"
        )

    def table(self, value: object, where: str) -> Mapping[str, object]:
        if not isinstance(value, dict):
            raise self.malformed(where, value, "an object")
        return value

    def values(self, data: Mapping[str, object], key: str) -> list[object]:
        value = data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.malformed(key, value, "a list")
        return value

    def miss(self, value: object, where: str) -> StandInMiss:
        """A name the stand-in lacks: its name, or (with the line that asked) a name and where."""
        if isinstance(value, str):
            return StandInMiss(name=value)
        item = self.table(value, where)
        return StandInMiss(
            name=self.required(item, "name", f"{where}."),
            where=self.text(item, "where", f"{where}."),
        )

    def items(self, data: Mapping[str, object], key: str, where: str) -> list[Mapping[str, object]]:
        value = data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.malformed(f"{where}{key}", value, "a list")
        return [self.table(v, f"{where}{key}[{i}]") for i, v in enumerate(value)]

    def text(self, data: Mapping[str, object], key: str, where: str, default: str = "") -> str:
        value = data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.malformed(f"{where}{key}", value, "a string")
        return value

    def optional(self, data: Mapping[str, object], key: str, where: str) -> str | None:
        return self.text(data, key, where) if data.get(key) is not None else None

    def required(self, data: Mapping[str, object], key: str, where: str) -> str:
        if data.get(key) is None:
            raise self.malformed(f"{where}{key}", None, "a string")
        return self.text(data, key, where)

    def texts(self, data: Mapping[str, object], key: str, where: str) -> tuple[str, ...]:
        value = data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.malformed(f"{where}{key}", value, "a list of strings")
        return tuple(value)

    def run(self, data: Mapping[str, object]) -> SetupRun:
        calls = data.get("setup_calls") or []
        if not isinstance(calls, list):
            raise self.malformed("setup_calls", calls, "a list")
        last = self.table(calls[-1], f"setup_calls[{len(calls) - 1}]") if calls else None
        torch = data.get("torch")
        error = data.get("error")
        ninja = self.table(data.get("ninja") or {}, "ninja")
        shipped = data.get("package_files")
        return SetupRun(
            setup=SetupArgs.given(last) if last is not None else None,
            extensions=tuple(ExtensionArgs.given(e) for e in self.items(data, "extensions", "")),
            cmdclass=tuple(
                Command(
                    name=self.required(c, "name", f"cmdclass[{i}]."),
                    class_name=self.required(c, "class", f"cmdclass[{i}]."),
                    base=self.text(c, "base", f"cmdclass[{i}]."),
                    overrides=self.texts(c, "overrides", f"cmdclass[{i}]."),
                    where=self.text(c, "where", f"cmdclass[{i}]."),
                    source=self.text(c, "source", f"cmdclass[{i}]."),
                )
                for i, c in enumerate(self.items(data, "cmdclass", ""))
            ),
            network=self.attempts(data, "network"),
            refused=self.attempts(data, "refused"),
            writes=self.texts(data, "writes", ""),
            written=tuple(
                self.written(w, f"written[{i}].")
                for i, w in enumerate(self.items(data, "written", ""))
            ),
            generators=tuple(
                self.generator(g, f"generators[{i}].")
                for i, g in enumerate(self.items(data, "generators", ""))
            ),
            stub_missing=tuple(
                self.miss(m, f"stub_missing[{i}]")
                for i, m in enumerate(self.values(data, "stub_missing"))
            ),
            torch=self.torch(self.table(torch, "torch")) if torch is not None else None,
            torch_error=self.optional(data, "torch_error", ""),
            torch_nvcc_flags=self.texts(data, "torch_nvcc_flags", ""),
            ninja=tuple(
                (str(k), self.text(ninja, k, "ninja.")) for k, v in ninja.items() if v is not None
            ),
            ninja_replaced_at=self.optional(data, "ninja_replaced_at", ""),
            build_ext_options=tuple(
                BuildExtOptions(
                    class_name=self.required(o, "class", f"build_ext_options[{i}]."),
                    where=self.text(o, "where", f"build_ext_options[{i}]."),
                    options=tuple(
                        (k, json_value(v))
                        for k, v in self.table(
                            o.get("options") or {}, f"build_ext_options[{i}].options"
                        ).items()
                    ),
                )
                for i, o in enumerate(self.items(data, "build_ext_options", ""))
            ),
            package_files=tuple(str(f) for f in shipped) if isinstance(shipped, list) else None,
            package_files_error=self.optional(data, "package_files_error", ""),
            error=self.failure(self.table(error, "error")) if error is not None else None,
            root=self.optional(data, "root", ""),
            setup_file=self.text(data, "setup", "", "setup.py") or "setup.py",
            python=self.optional(data, "python", ""),
            output=self.text(data, "output", ""),
            stderr=self.text(data, "stderr", ""),
        )

    def attempts(self, data: Mapping[str, object], key: str) -> tuple[Attempt, ...]:
        return tuple(
            Attempt(
                detail=self.required(a, "detail", f"{key}[{i}]."),
                where=self.text(a, "where", f"{key}[{i}]."),
            )
            for i, a in enumerate(self.items(data, key, ""))
        )

    def written(self, item: Mapping[str, object], where: str) -> Written:
        entry = self.table(item.get("entry") or {}, f"{where}entry")
        args = entry.get("args") or []
        if not isinstance(args, list):
            raise self.malformed(f"{where}entry.args", args, "a list")
        return Written(
            path=self.required(item, "path", where),
            by=self.optional(item, "by", where),
            entry=Entry(
                module=self.optional(entry, "module", f"{where}entry."),
                function=self.optional(entry, "function", f"{where}entry."),
                args=tuple(args),
            ),
        )

    def generator(self, item: Mapping[str, object], where: str) -> GeneratorRun:
        argv = item.get("argv") or []
        if not isinstance(argv, list):
            raise self.malformed(f"{where}argv", argv, "a list")
        code = item.get("exit")
        return GeneratorRun(
            script=self.required(item, "script", where),
            argv=tuple(str(a) for a in argv),
            cwd=self.optional(item, "cwd", where),
            where=self.text(item, "where", where),
            exit=code if isinstance(code, int) else None,
        )

    def torch(self, data: Mapping[str, object]) -> TorchSeen:
        version = data.get("version")
        if not isinstance(version, str | int | float):
            raise self.malformed("torch.version", version, "a version")
        return TorchSeen(
            version=str(version),
            real=bool(data.get("real")),
            cuda=self.optional(data, "cuda", "torch."),
            shown_as=self.optional(data, "shown_as", "torch."),
            forced=bool(data.get("forced")),
        )

    def failure(self, data: Mapping[str, object], where: str = "error.") -> SetupFailure:
        kind, cause = data.get("type"), data.get("cause")
        return SetupFailure(
            type=kind if isinstance(kind, str) else None,
            message=str(data.get("message") or ""),
            where=self.text(data, "where", where),
            traceback=self.text(data, "traceback", where),
            cause=self.failure(self.table(cause, f"{where}cause"), f"{where}cause.")
            if cause is not None
            else None,
        )


def parse(document: object, *, source: str = "the setup.py child's record") -> SetupRun:
    """The child's document (json.loads'd) as a SetupRun: MalformedRecord (a ToolError) naming
    the field that breaks its shape, ConfigError naming a setup() or Extension argument
    setuptools could not use."""
    reader = _Document(source)
    return reader.run(reader.table(document, "the document"))


def load(path: Path, *, source: str | None = None) -> SetupRun:
    """The child's record file, read through the bounded reader and parsed; *source* names it
    in an error (the file itself is temporary)."""
    text = readers.read_text(path, cap=readers.STATE_CAP)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedRecord(
            f"{source or path}: the record init's setup.py child wrote is not JSON ({exc}); read setup.py "
            "without running it with 'wheelforge init --no-run'"
        ) from None
    except RecursionError:  # the project's code may write the record itself: any depth
        raise MalformedRecord(
            f"{source or path}: the record init's setup.py child wrote is nested too deeply to "
            "be a record of setup(); read setup.py without running it with "
            "'wheelforge init --no-run'"
        ) from None
    try:
        return parse(document, source=source or str(path))
    except RecursionError:
        raise MalformedRecord(
            f"{source or path}: a value of the record is nested too deeply; read setup.py "
            "without running it with 'wheelforge init --no-run'"
        ) from None
