"""Write natural-looking JPEGs (the generator `stoker bench` uses) as an ImageFolder, one folder
per class, for your own runs: `open_storage(DIR)`, `stoker bench DIR` and torchvision's
ImageFolder all read it.

Run:  python benchmarks/images/make_images.py DIR [--count 3000] [--classes 10] [--size 500x375] [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tqdm import tqdm

from stoker.bench import iter_jpegs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--count", type=int, default=3000, help="images (default 3000)")
    parser.add_argument("--classes", type=int, default=10, help="class folders, images dealt round-robin (default 10)")
    parser.add_argument("--size", default="500x375", help="WIDTHxHEIGHT (default 500x375)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    for index, data in enumerate(tqdm(iter_jpegs(args.count, width, height, args.seed), total=args.count, unit="image")):
        folder = args.directory / f"class_{index % args.classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{index:07d}.jpg").write_bytes(data)
    print(f"wrote {args.count} JPEGs of {width}x{height} in {args.classes} class folders under {args.directory}")


if __name__ == "__main__":
    main()
