"""The release table (data/cuda-releases.toml through configuration/releases.py): the shipped
file is complete and consistent, a bad entry is refused with one line naming it, a release the
table lacks still builds, and a new kind of recipe (a Debian-trixie 12.4) is one entry."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest
from packaging.version import Version

from wheelforge.binaries.sizecheck import levers
from wheelforge.configuration import releases
from wheelforge.configuration.archs import Arch, ArchSet, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError
from wheelforge.planning import reproducible, variants
from wheelforge.toolchain import provision

from .fakes import plan_for, toolkit

Project = Callable[..., Path]
SHIPPED = resources.files("wheelforge").joinpath("data/cuda-releases.toml").read_text()
TABLE = releases.table()


def test_the_shipped_table_is_complete_and_in_order() -> None:
    keys = [r.key for r in TABLE.releases]
    assert keys == sorted(set(keys)) and len(keys) >= 2
    for r in TABLE.releases:
        assert r.sass and r.sass <= r.ptx, r.version  # every SASS arch has its PTX too
        assert r.ptx_isa and r.compat_driver, r.version
        assert r.features.fixed_pid or r.features.random_seed, r.version
    assert any(r.provision for r in TABLE.releases)
    assert releases.release("13.0.88") is releases.release("13.0") is not None


def test_the_arch_lists_fit_the_arch_grammar() -> None:
    for r in TABLE.releases:
        for sm in r.sass | r.ptx:
            arch = Arch.from_sm(sm)
            (spec,) = parse_arch_list(str(arch), source="table")
            assert spec.arch == arch and arch.sm == sm
        majors = {sm // 10 for sm in r.sass}
        # The grammar has a variants from 9.0 and f variants from 10.0 on (archs.py).
        if r.features.arch_specific:
            assert max(majors) >= 9, r.version
        if r.features.family_specific:
            assert max(majors) >= 10, r.version
            for family, members in TABLE.families:
                (spec,) = parse_arch_list(family, source="table")
                assert spec.arch.base.sm in members, family
                assert set(members) <= r.sass, (r.version, family)


def test_an_arch_stays_from_the_release_that_brings_it_to_the_one_that_drops_it() -> None:
    """A typo in one entry's list shows as a hole: an arch listed before and after, not in it."""
    for sm in {sm for r in TABLE.releases for sm in r.sass}:
        having = [sm in r.sass for r in TABLE.releases]
        runs = [k for k, _ in itertools.groupby(having)]
        assert runs.count(True) == 1, f"sm_{sm}: {having}"


def test_the_fakes_read_the_table() -> None:
    assert toolkit("13.1.115").sass == releases.release("13.1").sass  # type: ignore[union-attr]
    assert toolkit("11.8.89").sass == releases.release("11.8").sass  # type: ignore[union-attr]
    with pytest.raises(LookupError, match="give the fake its sass"):
        toolkit("14.0.0")


def test_recipes_are_the_provision_entries_newest_first() -> None:
    pins = provision.pypi_pins()  # a PyPI source counts where PyPI has its packages
    expected = [
        (r.version, s.kind)
        for r in reversed(TABLE.releases)
        for s in r.provision
        if s.kind != "pypi" or pins.pins(r.version, s.packages) is not None
    ]
    assert [(r.release, r.source) for r in provision.RECIPES] == expected
    for recipe in provision.RECIPES:
        assert recipe.sass == releases.release(recipe.release).sass  # type: ignore[union-attr]


# --- a release the table lacks ----------------------------------------------------------------


def test_a_newer_release_than_the_table_behaves_like_the_newest_entry(
    project: Project, tmp_path: Path
) -> None:
    newest = TABLE.releases[-1]
    major = newest.key[0]
    future = f"{major + 1}.0"
    assert releases.release(future) is None and provision.recipe_for(future) is None
    assert releases.features(future) == newest.features
    # Its archs are what its own nvcc lists, an arch no release of the table has included.
    sass = (80, 90, 100, 250)
    tk = toolkit(f"{future}.7", sass=sass)
    assert tk.supports(Arch(25, 0)) and not tk.supports(Arch(7, 5))
    assert tk.supports(Arch(9, 0, "a")) is newest.features.arch_specific
    assert tk.supports(Arch(10, 0, "f")) is newest.features.family_specific
    chosen = variants.choose(future, ArchSet("s", parse_arch_list("8.0 9.0", source="t")), [tk])
    assert chosen.toolkit is tk
    seeded = reproducible.nvcc_source_flags("a.cu", tk.version)
    assert any(f.startswith("--frandom-seed") for f in seeded) is newest.features.random_seed
    assert reproducible.needs_fixed_pid(tk.version) is newest.features.fixed_pid
    plan = plan_for(load_matrix(project()), tmp_path, tk=tk)
    assert (plan.compile.nvcc_preload is not None) is newest.features.fixed_pid
    found = {lv.change for lv in levers((), (major + 1, 0), ())}
    assert ("nvcc-flags: [--compress-mode=size]" in found) is newest.features.compress_mode


def test_a_release_between_entries_or_older_than_all_takes_its_nearest_older_entry() -> None:
    oldest = TABLE.releases[0]
    older = (oldest.key[0] - 1, 0)
    assert releases.features(older) == oldest.features
    assert releases.features(Version(f"{oldest.version}.99")) == oldest.features
    later = _ENTRY.replace("arch-specific = false", "arch-specific = true")
    planted = releases.parse(_one() + '[[release]]\nversion = "12.4"\n' + later, source="t")
    assert planted.features((12, 3)) == planted.releases[0].features
    assert planted.features((12, 7)).arch_specific and planted.get((12, 7)) is None


# --- a bad table ------------------------------------------------------------------------------

_ENTRY = """\
sass = [80, 90]
ptx = [80, 90]
ptx-isa = "8.0"
compat-driver = "525"
arch-specific = false
family-specific = false
compress-mode = false
fixed-pid = true
random-seed = false
jobserver = false
"""


def _one(extra: str = "", entry: str = _ENTRY, version: str = "12.0") -> str:
    return f'[families]\n[[release]]\nversion = "{version}"\n{entry}{extra}'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_one(entry=_ENTRY.replace('ptx-isa = "8.0"\n', "")), "release 12.0: 'ptx-isa' is missing"),
        (_one("sas = [1]\n"), "release 12.0: unknown key 'sas'; did you mean 'sass'"),
        (
            _one(entry=_ENTRY.replace("[80, 90]", "[90, 80]", 1)),
            "sass: list each sm number once, in ascending",
        ),
        (
            _one(entry=_ENTRY.replace("fixed-pid = true", 'fixed-pid = "yes"')),
            "'fixed-pid' must be a bool",
        ),
        (
            _one(entry=_ENTRY.replace("fixed-pid = true", "fixed-pid = false")),
            "neither 'fixed-pid' nor 'random-seed'",
        ),
        (_one(version="12"), "'version' = '12' is not a dotted number like 13.0"),
        (
            _one() + '[[release]]\nversion = "11.8"\n' + _ENTRY,
            "release 11.8 follows 12.0; keep the entries in ascending",
        ),
        (
            _one('[[release.provision]]\nsource = "conda"\n'),
            "provision 1: 'source' must be one of pypi, debian",
        ),
        (
            _one('[[release.provision]]\nsource = "pypi"\npackages = ["a"]\ndownload = "1 MB"\n'),
            "provision 1: 'nvcc' is missing",
        ),
        ("[families]\n", "'release' is missing"),
        (
            '[families]\n"10.0" = [100]\n[[release]]\nversion = "12.0"\n' + _ENTRY,
            "families: 10.0: name a family arch like 10.0f",
        ),
        ("release = [", "not valid TOML"),
    ],
)
def test_a_bad_entry_is_refused_with_one_line_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="^t: .*" + re.escape(message)):
        releases.parse(text, source="t")


# --- a Debian recipe is one entry --------------------------------------------------------


def test_the_debian_trixie_recipe_is_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20's 12.4 recipe is one provision entry in the table (it was a placeholder here
    before the entry was shipped)."""
    (recipe,) = [r for r in provision.recipes_of(releases.releases()) if r.release == "12.4"]
    assert recipe.folder == "cuda-12.4-debian" and recipe.supports(Arch(7, 0))
    assert recipe.describe() == "CUDA 12.4 from Debian trixie non-free (sm_50 to sm_90, about 1 GB)"
    assert not recipe.supports(Arch(9, 0, "f"))
    ran = _fake_apt(tmp_path, monkeypatch)
    info = provision._fetch(recipe, tmp_path / "prefix", tmp_path / "dl")
    assert info["host_cxx"] is None  # the system's g++ (12.4 accepts GCC up to 13)
    assert info["nvcc"] == "usr/lib/nvidia-cuda-toolkit/bin/nvcc"
    download = next(c for c in ran if "download" in c)
    assert download[-7:] == [
        "nvidia-cuda-toolkit=12.4.131~12.4.1-2",
        "libnvvm4=12.4.131~12.4.1-2",
        "nvidia-cuda-dev=12.4.127~12.4.1-2",
        "libcudart12=12.4.127~12.4.1-2",
        "libthrust-dev=2.3.2-2",
        "libcub-dev=2.3.2-2",
        "libcu++-dev=2.3.2-2",
    ]
    sources = (tmp_path / "dl" / "apt" / "sources.list").read_text()
    assert sources.endswith(" http://deb.debian.org/debian trixie main non-free\n")
    libs = sorted(p.name for p in (tmp_path / "prefix/usr/lib/x86_64-linux-gnu").iterdir())
    assert libs == ["libcudart_static.a"]  # libcublas.so.12 pruned


def test_the_shipped_11_8_recipe_fetches_what_it_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = provision.recipe_for("11.8")
    assert recipe is not None and recipe.source == "debian"
    assert recipe.describe().startswith("CUDA 11.8 from Debian bookworm non-free (sm_35 to sm_90, ")
    assert isinstance(recipe.how, releases.DebianSource)
    assert provision.apt_sources(recipe.how) == (
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://deb.debian.org/debian bookworm main contrib non-free\n"
    )
    ran = _fake_apt(tmp_path, monkeypatch)
    info = provision._fetch(recipe, tmp_path / "prefix", tmp_path / "dl")
    assert info["host_cxx"] == "usr/bin/g++-11"
    download = next(c for c in ran if "download" in c)
    assert "nvidia-cuda-toolkit=11.8.89~11.8.0-5~deb12u1" in download and "g++-11" in download


def _fake_apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """apt-get and dpkg-deb replaced: a download leaves a .deb, unpacking one makes Debian's
    layout with two libraries. Returns the commands run."""
    keyring = tmp_path / "keyring.gpg"
    keyring.write_text("")
    monkeypatch.setattr(provision, "_DEBIAN_KEYRING", keyring)
    monkeypatch.setattr(provision.proc, "which", lambda *a, **k: "/bin/true")
    ran: list[list[str]] = []

    def run(cmd: list[object], **kw: object) -> None:
        ran.append([str(c) for c in cmd])
        if "download" in ran[-1]:
            (Path(str(kw["cwd"])) / "cuda.deb").write_text("")
        if ran[-1][0] == "dpkg-deb":
            prefix = Path(ran[-1][-1])
            (prefix / "usr/lib/nvidia-cuda-toolkit/bin").mkdir(parents=True, exist_ok=True)
            libs = prefix / "usr/lib/x86_64-linux-gnu"
            libs.mkdir(parents=True, exist_ok=True)
            for name in ("libcublas.so.12", "libcudart_static.a"):
                (libs / name).write_text("")

    def stream(cmd: list[object], **kw: object) -> provision.proc.Result:
        # apt-get runs with its lines shown (toolchain/downloads.py)
        run(cmd, **kw)
        return provision.proc.Result(args=tuple(map(str, cmd)), returncode=0, stdout="", stderr="")

    monkeypatch.setattr(provision.proc, "run", run)
    monkeypatch.setattr(provision.proc, "stream", stream)
    (tmp_path / "dl").mkdir()
    return ran
