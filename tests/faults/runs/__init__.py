"""A run under stress: Ctrl-C, SIGKILL and resume, worker deaths, threads, messages that name the sample, provenance faults."""
