"""Benchmark data used by the demo, the training environment and the evaluation harness."""
