"""init's typed record: what every front door gives the writer (captured.py)."""
