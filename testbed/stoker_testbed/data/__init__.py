"""Data makers: image folders and trees, audio and video files, text corpora, tar shards at 10^8
members, storages of N synthetic samples made without I/O, the peers' own formats, training logs."""
