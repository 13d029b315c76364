"""The layer under all: errors with their exit codes, the log, the one subprocess wrapper,
file and document helpers. No wheelforge imports from above; no library entry of its own."""
