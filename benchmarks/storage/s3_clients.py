"""Which S3 client: CPU per GET and requests/s of boto3 (threads), aiobotocore and obstore, 100 KB
objects from s3proxy on loopback, 64 requests in flight each. On a 2-core machine the client's CPU
per request caps the request rate, so that is the number that chose `S3Storage`'s client.

Run:  python benchmarks/storage/s3_clients.py [--objects 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from stoker.bench import require_optimized_core
from stoker_testbed.servers.s3_server import S3Server

IN_FLIGHT = 64


def boto3_threads(server: S3Server, keys: list[str]) -> None:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        region_name=server.region,
        config=Config(max_pool_connections=IN_FLIGHT),
    )
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        list(pool.map(lambda key: client.get_object(Bucket="clients", Key=key)["Body"].read(), keys))


def aiobotocore_async(server: S3Server, keys: list[str]) -> None:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    async def run() -> None:
        async with get_session().create_client(
            "s3",
            endpoint_url=server.endpoint,
            aws_access_key_id=server.access_key,
            aws_secret_access_key=server.secret_key,
            region_name=server.region,
            config=AioConfig(max_pool_connections=IN_FLIGHT),
        ) as client:
            slots = asyncio.Semaphore(IN_FLIGHT)

            async def one(key: str) -> bytes:
                async with slots:
                    response = await client.get_object(Bucket="clients", Key=key)
                    async with response["Body"] as body:
                        return await body.read()

            await asyncio.gather(*(one(key) for key in keys))

    asyncio.run(run())


def obstore_async(server: S3Server, keys: list[str]) -> None:
    import obstore

    from stoker.storage.remote import open_s3_store

    store = open_s3_store("clients", endpoint=server.endpoint, access_key_id=server.access_key, secret_access_key=server.secret_key)

    async def run() -> None:
        slots = asyncio.Semaphore(IN_FLIGHT)

        async def one(key: str) -> bytes:
            async with slots:
                return bytes(await (await obstore.get_async(store, key)).bytes_async())

        await asyncio.gather(*(one(key) for key in keys))

    asyncio.run(run())


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    clients: dict[str, Callable[[S3Server, list[str]], None]] = {
        "boto3, 64 threads": boto3_threads,
        "aiobotocore": aiobotocore_async,
        "obstore": obstore_async,
    }
    with S3Server() as server:
        server.create_bucket("clients")
        client = server.client()
        payload = os.urandom(100_000)
        keys = [f"objects/{index:06d}" for index in range(args.objects)]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda key: client.put_object(Bucket="clients", Key=key, Body=payload), keys))
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
        for _ in range(args.repeats):  # interleaved, so drift on a shared machine hits all alike
            for name, run in clients.items():
                wall, cpu = time.perf_counter(), time.process_time()
                run(server, keys)
                results[name].append((len(keys) / (time.perf_counter() - wall), (time.process_time() - cpu) / len(keys) * 1e3))
    print(f"{'client':<20} {'requests/s':>11} {'client CPU per GET':>19}")
    for name, runs in results.items():
        rate = statistics.median(rate for rate, _ in runs)
        cpu = statistics.median(cpu for _, cpu in runs)
        print(f"{name:<20} {rate:>11.0f} {cpu:>16.2f} ms")


if __name__ == "__main__":
    main()
