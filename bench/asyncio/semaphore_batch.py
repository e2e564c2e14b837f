"""The seed guide's batch pattern: asyncio.gather over every item, an asyncio.Semaphore capping the calls in flight,
one AsyncOpenAI client (its retries off, like the Temporal runs, so every contender makes exactly one call per item).

    python semaphore_batch.py --base-url http://127.0.0.1:PORT/v1 --count 1000 --concurrency 50

Prints one JSON line: wallMs (from the first call to the last result, client already built), ok, failed, peakRssMb.
Results are kept in memory only, as in the guide: nothing is durable.
"""

import argparse
import asyncio
import json
import resource
import time

from openai import AsyncOpenAI


async def process_batch(client: AsyncOpenAI, count: int, concurrency: int) -> list:
    semaphore = asyncio.Semaphore(concurrency)

    async def process_single(index: int) -> dict:
        async with semaphore:
            response = await client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": f"batch item {index}"}],
            )
            return {"id": f"item-{index}", "output": response.choices[0].message.content}

    return await asyncio.gather(*[process_single(index) for index in range(count)], return_exceptions=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    args = parser.parse_args()
    client = AsyncOpenAI(base_url=args.base_url, api_key="bench", max_retries=0)
    started = time.perf_counter()
    results = await process_batch(client, args.count, args.concurrency)
    wall_ms = (time.perf_counter() - started) * 1000
    await client.close()
    failed = sum(1 for result in results if isinstance(result, BaseException))
    # ru_maxrss is in KiB on Linux.
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"wallMs": wall_ms, "ok": len(results) - failed, "failed": failed, "peakRssMb": peak_mb}))


if __name__ == "__main__":
    asyncio.run(main())
