"""The non-durable floor of the agents benchmark: every agent at once as an asyncio task, each a loop of model calls
(the whole transcript sent, one AsyncOpenAI client, its retries off) whose tool calls run side by side with
asyncio.gather. The one tool, `wait`, sleeps the milliseconds it is asked for.

    python agent_loop.py --base-url http://127.0.0.1:PORT/v1 --prompt-file prompts.json --max-steps 10

Prints one JSON line: wallMs (from the first call to the last answer, client already built), ok, failed, steps,
toolCalls, peakRssMb. Nothing is durable.
"""

import argparse
import asyncio
import json
import resource
import time

from openai import AsyncOpenAI

WAIT_TOOL = {
    "type": "function",
    "function": {
        "name": "wait",
        "description": "Waits a number of milliseconds",
        "parameters": {"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]},
    },
}


async def run_tool(call) -> str:
    ms = json.loads(call.function.arguments)["ms"]
    await asyncio.sleep(ms / 1000)
    return f"waited {ms} ms"


async def run_agent(client: AsyncOpenAI, prompt: str, max_steps: int, counts: dict) -> str:
    messages = [{"role": "user", "content": prompt}]
    for _ in range(max_steps):
        response = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[WAIT_TOOL])
        counts["steps"] += 1
        message = response.choices[0].message
        calls = message.tool_calls or []
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                **(
                    {
                        "tool_calls": [
                            {
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.function.name, "arguments": call.function.arguments},
                            }
                            for call in calls
                        ]
                    }
                    if calls
                    else {}
                ),
            }
        )
        if not calls:
            return message.content or ""
        results = await asyncio.gather(*[run_tool(call) for call in calls])
        counts["toolCalls"] += len(results)
        messages.extend(
            {"role": "tool", "tool_call_id": call.id, "content": result} for call, result in zip(calls, results)
        )
    raise RuntimeError(f"no answer after {max_steps} steps")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--prompt-file", required=True)
    parser.add_argument("--max-steps", type=int, required=True)
    args = parser.parse_args()
    with open(args.prompt_file, encoding="utf-8") as file:
        prompts = json.load(file)
    client = AsyncOpenAI(base_url=args.base_url, api_key="bench", max_retries=0)
    counts = {"steps": 0, "toolCalls": 0}
    started = time.perf_counter()
    results = await asyncio.gather(
        *[run_agent(client, prompt, args.max_steps, counts) for prompt in prompts], return_exceptions=True
    )
    wall_ms = (time.perf_counter() - started) * 1000
    await client.close()
    failed = sum(1 for result in results if isinstance(result, BaseException))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "wallMs": wall_ms,
                "ok": len(results) - failed,
                "failed": failed,
                "steps": counts["steps"],
                "toolCalls": counts["toolCalls"],
                "peakRssMb": peak_mb,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
