"""The doctor: examine (pure decisions) and load (reading the cluster)."""
