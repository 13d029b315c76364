"""init's front doors: each reads how a project builds (setup.py run or read, CMake, a
kernel-builder build.toml, the sources) into the one CapturedBuild (record/captured.py)."""
