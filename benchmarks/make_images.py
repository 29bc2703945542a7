"""Write natural-looking JPEGs (the generator `stoker bench` uses) to a folder for your own runs.

Run:  python benchmarks/make_images.py DIR [--count 3000] [--size 500x375] [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stoker.bench import encode_jpeg, make_jpegs, natural_image

__all__ = ["encode_jpeg", "make_jpegs", "natural_image"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--size", default="500x375", help="WIDTHxHEIGHT")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    args.directory.mkdir(parents=True, exist_ok=True)
    for index, data in enumerate(make_jpegs(args.count, width, height, args.seed)):
        (args.directory / f"{index:07d}.jpg").write_bytes(data)
    print(f"wrote {args.count} JPEGs of {width}x{height} to {args.directory}")


if __name__ == "__main__":
    main()
