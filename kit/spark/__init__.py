"""PySpark jobs of kit: pure DataFrame transforms (`kit.spark.metrics_jobs`) and a sample generator.

The command-line edge that reads inputs and writes outputs is `kit metrics` (kit/metrics/edge.py).
Nothing under kit/plan imports this package.
"""
