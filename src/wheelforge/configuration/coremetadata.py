"""Core metadata (a wheel's METADATA, an sdist's PKG-INFO) as the specification writes it and as
PyPI reads it: one ``Name: value`` line per header, never folded, with the long description in
the body; and what PyPI would refuse in it (packaging's own validation, which twine and PyPI
run, and the rules PyPI adds: known trove classifiers, Project-URL labels and URLs, the length
of a summary).

The one field that keeps several lines is License (free text, as setuptools' rfc822_escape
writes it: each line after the first indented); every other field must be one line, so a value
with a line break is refused where it is read (matrix/packagereader.py, matrix/pyproject.py),
before anything compiles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from email.utils import getaddresses
from urllib.parse import urlsplit

from wheelforge.configuration.matrix.keys import LINE_BREAK_RE

# Headers whose value may span lines: each further line is indented to continue the header.
MULTI_LINE = frozenset({"license"})
_CONTINUATION = "\n        "  # setuptools' rfc822_escape: eight spaces
# PyPI's limits (warehouse/forklift/metadata.py): a Summary's length, a Project-URL's label.
SUMMARY_LIMIT = 512
URL_LABEL_LIMIT = 32
LIST_LIMIT = 10_000  # distinct values of one field judged (Requires-Dist, Classifier, ...)


def render(headers: Iterable[tuple[str, str]], body: str | None = None) -> str:
    """METADATA's text: each header on one line (a License of several lines indented, as
    setuptools writes it), then, after an empty line, *body* (the long description). A line
    break in any other header is a bug of the caller, which checks values where it reads them."""
    lines = []
    for name, value in headers:
        text = value.strip().replace("\r\n", "\n")
        if name.lower() in MULTI_LINE:
            text = _CONTINUATION.join(LINE_BREAK_RE.split(text))
        elif LINE_BREAK_RE.search(text):
            raise ValueError(f"METADATA's {name} must be one line, got {value!r}")
        lines.append(f"{name}: {text}\n")
    out = "".join(lines)
    if body:
        out += "\n" + body + ("" if body.endswith("\n") else "\n")
    return out


def one_line(value: str) -> str | None:
    """Why *value* cannot be a one-line header's value, or None."""
    if LINE_BREAK_RE.search(value):
        return "must be one line (a line break would end the METADATA header)"
    return None


def classifier_problem(value: str) -> str | None:
    """Why PyPI refuses the classifier *value* (it takes only the trove classifiers it lists,
    and none that is deprecated), or None."""
    import trove_classifiers  # the list PyPI itself checks uploads against

    if why := one_line(value):
        return why
    if value in trove_classifiers.deprecated_classifiers:
        instead = trove_classifiers.deprecated_classifiers[value]
        use = f"use {' or '.join(repr(c) for c in instead)}" if instead else "remove it"
        return f"is a deprecated trove classifier, which PyPI refuses; {use}"
    if value not in trove_classifiers.classifiers:
        near = _near(value, trove_classifiers.sorted_classifiers)
        hint = f" (did you mean {near!r}?)" if near else ""
        return (
            f"is not a trove classifier, which PyPI refuses{hint}; use one listed at "
            "pypi.org/classifiers"
        )
    return None


def email_problem(value: str) -> str | None:
    """Why *value*, an Author-email entry (``Name <address>`` or an address), holds no address
    PyPI takes, or None."""
    for _name, address in getaddresses([value]):
        local, at, domain = address.partition("@")
        if not (local and at and domain) or " " in address:
            return "is not an email address; write 'Name <name@example.org>'"
    return None


def url_problem(label: str, url: str) -> str | None:
    """Why PyPI refuses the Project-URL *label*, *url*, or None."""
    if why := one_line(label) or one_line(url):
        return why
    if not label.strip():
        return "needs a label"
    if len(label) > URL_LABEL_LIMIT:
        return f"label {label!r} is longer than {URL_LABEL_LIMIT} characters, PyPI's limit"
    if "," in label:
        return f"label {label!r} holds a comma, which ends a Project-URL's label; remove it"
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"{url!r} is not an http(s) URL; write e.g. https://example.org/project"
    return None


@dataclass(frozen=True)
class Problem:
    """What PyPI would say of one field: the header it is about and why."""

    field: str
    message: str


def problems(text: str) -> tuple[Problem, ...]:
    """What PyPI would refuse in the METADATA *text*, as ``twine check`` and ``twine upload``
    judge it: every field parsed (packaging's parse_email), then packaging's validation (a
    one-line Summary, a valid Name and Version, a known Metadata-Version, each field in the
    metadata version that has it), then PyPI's own rules. Like twine, a License-File under a
    Metadata-Version below 2.4 is not held against the wheel: setuptools wrote it so for years
    and twine drops it from what it uploads (twine/package.py)."""
    # packaging's metadata module loads its requirement parser: only when a METADATA is judged
    # (inspect, which packs nothing, never loads it)
    from packaging.metadata import ExceptionGroup, InvalidMetadata, Metadata, parse_email
    from packaging.version import InvalidVersion, Version

    try:
        raw, unparsed = parse_email(text)
    except (ValueError, LookupError, UnicodeError) as exc:
        return (Problem("METADATA", f"cannot be read: {exc}"),)
    found = [
        Problem(_header(key), f"{key!r} is a field packaging cannot parse (malformed or unknown)")
        for key in unparsed
    ]
    try:
        old = Version(str(raw.get("metadata_version", "0"))) < Version("2.4")
    except InvalidVersion:
        old = False  # packaging's validation names it
    if old:
        raw.pop("license_files", None)
    # A field's repeats say nothing new, and packaging parses each requirement at ~0.1 ms: 14 MiB
    # of one Requires-Dist line (a hostile METADATA within bounded.py's cap) took 78 s. Each
    # list field is judged by its first LIST_LIMIT distinct values; PyPI's largest have dozens.
    for key, value in list(raw.items()):
        if isinstance(value, list):
            raw[key] = list(dict.fromkeys(value))[:LIST_LIMIT]  # type: ignore[literal-required]
    try:
        Metadata.from_raw(raw, validate=True)
    except ExceptionGroup as group:
        found += [_problem(exc) for exc in _leaves(group)]
    except InvalidMetadata as exc:
        found.append(_problem(exc))
    found += _pypi_rules(raw)
    return tuple(found)


def _leaves(group: BaseException) -> Iterable[BaseException]:
    for exc in getattr(group, "exceptions", ()):
        yield from _leaves(exc) if hasattr(exc, "exceptions") else (exc,)


def _problem(exc: BaseException) -> Problem:
    field = getattr(exc, "field", "METADATA")
    return Problem(_header(field), str(exc))


# The headers the specification spells other than word by word capitalised.
_SPELLED = {
    "author-email": "Author-email",
    "maintainer-email": "Maintainer-email",
    "home-page": "Home-page",
    "download-url": "Download-URL",
    "project-url": "Project-URL",
}


def _header(field: str) -> str:
    """A field as METADATA spells it (packaging names some by their raw key)."""
    key = field.lower().replace("_", "-")
    key = {"project-urls": "project-url", "classifiers": "classifier"}.get(key, key)
    return _SPELLED.get(key) or "-".join(p.capitalize() for p in key.split("-"))


def _pypi_rules(raw: object) -> list[Problem]:
    """The rules PyPI adds to packaging's (warehouse/forklift/metadata.py)."""
    from packaging.requirements import InvalidRequirement, Requirement

    assert isinstance(raw, dict)
    out: list[Problem] = []
    summary = raw.get("summary")
    if isinstance(summary, str) and len(summary) > SUMMARY_LIMIT:
        out.append(Problem("Summary", f"is {len(summary)} characters; PyPI takes {SUMMARY_LIMIT}"))
    for classifier in raw.get("classifiers") or ():
        if why := classifier_problem(classifier):
            out.append(Problem("Classifier", f"{classifier!r} {why}"))
    urls = raw.get("project_urls") or {}
    for label, url in urls.items():
        if why := url_problem(label, url):
            out.append(Problem("Project-URL", f"{label}, {url}: {why}"))
    for field in ("author_email", "maintainer_email"):
        value = raw.get(field)
        if isinstance(value, str) and (why := email_problem(value)):
            out.append(Problem(_header(field), f"{value!r} {why}"))
    for requirement in raw.get("requires_dist") or ():
        try:
            url = Requirement(requirement).url
        except InvalidRequirement:
            continue  # packaging's validation said so
        if url:
            out.append(
                Problem(
                    "Requires-Dist",
                    f"{requirement!r} is a direct URL reference, which PyPI refuses; name a "
                    "released version",
                )
            )
    return out


def _near(value: str, known: Sequence[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(value, known, n=1, cutoff=0.8)
    return found[0] if found else None
