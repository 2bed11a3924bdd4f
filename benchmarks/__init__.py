"""Speed and scale measurements, JSON out: `python -m benchmarks.NAME --json FILE`."""
