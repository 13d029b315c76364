"""``wheelforge init``'s front doors: each reads how a project really builds and gives the same
frozen :class:`~wheelforge.configuration.importers.captured.CapturedBuild`, which one writer
(writer.py) turns into matrix.yaml.

- setupcapture.py: setup.py run as pip would, in a child process whose ``setup()``, Extension
  classes and ``BuildExtension`` record instead of building (setup_child.py is that child);
- staticsetup.py: setup.py read without running it (``--no-run``; setuppy.py);
- cmake.py: a CMake project configured only, its ``compile_commands.json`` read;
- buildtoml.py: a Hugging Face kernel-builder ``build.toml``;
- sourcescan.py: no build script at all: the sources that register ops.
"""
