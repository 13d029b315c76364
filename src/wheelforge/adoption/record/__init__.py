"""init's typed records: what the setup.py child found (setuprun.py, read from the child's
document by childdocument.py), and what every front door gives the writer (captured.py)."""
