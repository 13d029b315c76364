"""The ABIs a matrix can build for (``abi: stable`` or ``abi: unstable``) and what each decides
before torch is probed: whether torch versions multiply the variants, whether the wheel is abi3,
whether it has a torch target version, what it requires of torch; its name is what each binary
rule declares it applies to (binaries/registry.py).

What each decides once torch is probed (flags, tags, the module's suffix, the torch pin) is
planning/abi.py's. Nothing else asks which ABI a matrix names: it asks the flavour (``of``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from wheelforge.configuration.matrix.torchspec import TorchSpec

AbiName = Literal["stable", "unstable"]


@dataclass(frozen=True, kw_only=True)
class Abi:
    """One ABI flavour's behaviour, as data: a new flavour is one more value of this."""

    # As matrix.yaml writes it; each ABI rule declares the flavours it applies to by this name
    # (binaries/registry.applicable): which checks apply is the rules' own data.
    name: AbiName
    # One build per torch version, each wheel pinned to the torch it was built against (else
    # one binary for every torch from the target up).
    per_torch: bool
    # Python's limited API: tagged abi3 for every CPython from python-abi up.
    abi3: bool
    # Compiled for a torch target version (-DTORCH_TARGET_VERSION): the build torch must be at
    # least the target, and torch's stable headers hide what is newer (TORCH_FEATURE_VERSION).
    torch_target: bool

    def torches(self, spec: TorchSpec) -> tuple[str | None, ...]:
        """The torch versions that multiply the variants (None: one variant for every torch)."""
        return tuple(str(v) for v in spec.versions) if self.per_torch else (None,)

    def requirement(self, spec: TorchSpec) -> str | None:
        """The wheel's Requires-Dist on torch as known before a build; None when the build's
        torch decides it (an sdist marks it Dynamic)."""
        return None if self.per_torch else spec.requirement

    def build_requirement(self, spec: TorchSpec) -> str:
        """The torch a build environment without one installs (the PEP 517 backend)."""
        if spec.installed:  # `torch: installed`: whichever torch the environment holds
            return "torch"
        return f"torch=={spec.versions[0]}" if self.per_torch else spec.requirement


STABLE = Abi(
    name="stable",
    per_torch=False,
    abi3=True,
    torch_target=True,
)
UNSTABLE = Abi(
    name="unstable",
    per_torch=True,
    abi3=False,
    torch_target=False,
)
ABIS: dict[str, Abi] = {a.name: a for a in (STABLE, UNSTABLE)}


def of(name: str) -> Abi:
    """The flavour matrix.yaml's ``abi`` names (the reader has checked the name)."""
    return ABIS[name]
