"""Runbooks: the runner (`kit run`) and the steps the notebooks call."""
