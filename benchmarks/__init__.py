"""Speed and scale measurements; each module writes JSON (`python -m benchmarks.NAME --json FILE`)."""
