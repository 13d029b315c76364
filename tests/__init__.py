from pathlib import Path

# The repository's root: the checkout the suite runs from.
REPO = Path(__file__).resolve().parent.parent
