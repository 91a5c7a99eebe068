"""kit: a Jupyter-first operations kit for Apache Kafka."""

__version__ = "0.1.0"
