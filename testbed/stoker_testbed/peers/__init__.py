"""The peers' loaders as benchmarks run them, each as a competent user of it would write it, in a
process of its own (``python -m stoker_testbed.peers.<module> ...``)."""
