"""The ABI rules, one module each: every module here defines ``RULE`` (binaries/rule.py says
what it declares) and the registry (binaries/registry.py) finds it, so adding a rule is adding a
module and its test."""
