"""Run the loopback latency proxy by hand: put a round trip between a client and a server.

Run:  python benchmarks/storage/latency_proxy.py TARGET_PORT --rtt-ms 50 [--jitter 0.25] [--slow 0.01]
"""

from __future__ import annotations

import argparse
import time

from stoker_testbed import LatencyProxy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target_port", type=int)
    parser.add_argument("--target-host", default="127.0.0.1")
    parser.add_argument("--rtt-ms", type=float, default=50.0)
    parser.add_argument("--jitter", type=float, default=0.0, help="lognormal sigma on each chunk's delay")
    parser.add_argument("--slow", type=float, default=0.0, help="share of connections 10x slower")
    args = parser.parse_args()
    with LatencyProxy(args.target_host, args.target_port, delay=args.rtt_ms / 2e3, jitter=args.jitter, slow_fraction=args.slow) as proxy:
        print(
            f"listening on {proxy.address[0]}:{proxy.address[1]} -> {args.target_host}:{args.target_port}, RTT +{args.rtt_ms} ms; Ctrl-C to stop"
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
