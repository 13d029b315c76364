"""init's writer: a CapturedBuild as a commented matrix.yaml (matrixfile.py) and the sections
and parts it reads beside the front doors."""
