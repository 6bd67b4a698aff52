"""Stream N chat completions through BASE_URL with the official OpenAI SDK and
print what the client saw as JSON: per request the time to the first content
chunk, the content chunk count and the usage the server reported.

Usage: python stream_chat.py BASE_URL N [MAX_TOKENS]
"""
import json
import sys
import time

import openai


def main() -> None:
    base_url, n = sys.argv[1], int(sys.argv[2])
    max_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 24
    sent = []
    # TTFT is timed from the moment the request goes out, as a load generator
    # would: the SDK's own work before that is not the server's or the proxy's.
    http_client = openai.DefaultHttpx2Client(
        event_hooks={"request": [lambda request: sent.append(time.perf_counter())]}
    )
    client = openai.OpenAI(
        base_url=base_url, api_key="unused", max_retries=0, http_client=http_client
    )
    # Warm up the connection and the SDK (not a streamed answer: no TTFT).
    client.models.list()
    results = []
    for i in range(n):
        # The SDK builds and sends the request; the SSE lines are read as they
        # arrive, so TTFT is the arrival of the first content chunk, not the end
        # of the SDK's per-chunk model validation.
        with client.chat.completions.with_streaming_response.create(
            model="smollm2",
            messages=[{"role": "user", "content": f"Count from {i} to {i + 20}."}],
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        ) as response:
            ttft, chunks, usage = None, 0, None
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[len("data: "):])
                choices = event.get("choices") or []
                if choices and (choices[0].get("delta") or {}).get("content"):
                    if ttft is None:
                        ttft = time.perf_counter() - sent[-1]
                    chunks += 1
                if event.get("usage"):
                    usage = event["usage"]
        results.append(
            {
                "ttft": ttft,
                "content_chunks": chunks,
                "completion_tokens": usage["completion_tokens"] if usage else None,
                "prompt_tokens": usage["prompt_tokens"] if usage else None,
            }
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
