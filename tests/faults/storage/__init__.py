"""Faults of stores and stored data: outages, truncated and corrupt shards, bad schemas, node caches, uploads, conversions."""
