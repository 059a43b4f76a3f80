"""Benchmarks, prediction files and the embedded world: everything that is read from disk before judging."""
