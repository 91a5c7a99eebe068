"""Metrics: the Spark edge (`kit metrics`); the pure DataFrame jobs live in the top-level `spark` package."""
