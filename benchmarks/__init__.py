"""Benchmarks: scripts that print Parley's figures, one command each (see README.md here)."""
