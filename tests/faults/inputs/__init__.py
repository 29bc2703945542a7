"""Hostile and broken input: corrupt images and media, decompression bombs, bad text, damaged states and ledgers, absurd arguments."""
