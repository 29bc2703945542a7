"""Real servers started on loopback for a test or a benchmark, and stopped after it: s3proxy (an
S3-compatible store), Cassandra 5.0 (one node or a cluster, from Maven Central jars), a local Ray,
and the latency proxy that puts a round trip between a client and any of them."""
