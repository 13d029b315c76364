"""init's typed records: what the setup.py child found (setuprun.py), and what every front door
gives the writer (captured.py)."""
