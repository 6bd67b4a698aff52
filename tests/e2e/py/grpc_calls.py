"""Many unary calls of one method through sluice on 127.0.0.1:argv[1], for tests/e2e/grpc.rs.
argv[2] is JSON: {"method": "/test.Svc/Echo", "n": 200, "payload": hex, "metadata": [[k, v]]},
or with "seconds" instead of "n": calls one after another for that long. With "stream": true
the method is server-streaming: every message of its answer is read, as it comes.
Prints one JSON object: calls by status code name, the distinct details of failed calls, how
many successful replies were not the payload echoed back (unary), the messages (stream, those
before a failure included), "seconds" each call took to its end or failure, and "at": when each
message of the last call came, in seconds since it started."""
import json
import sys
import time

import grpc

spec = json.loads(sys.argv[2])
channel = grpc.insecure_channel(f"127.0.0.1:{sys.argv[1]}")
grpc.channel_ready_future(channel).result(timeout=10)
ident = lambda b: b
stream = spec.get("stream", False)
call = (channel.unary_stream if stream else channel.unary_unary)(spec["method"], ident, ident)
payload = bytes.fromhex(spec.get("payload", "00"))
metadata = [tuple(m) for m in spec.get("metadata", [])]
codes, details, wrong, messages, at, seconds = {}, set(), 0, 0, [], []
until = time.monotonic() + spec.get("seconds", 0)
n = 0
while n < spec["n"] if "n" in spec else time.monotonic() < until:
    n += 1
    start = time.monotonic()
    try:
        reply = call(payload, timeout=10, metadata=metadata)
        if stream:
            at = []
            for _ in reply:
                messages += 1
                at.append(round(time.monotonic() - start, 4))
        else:
            wrong += reply != payload
        codes["OK"] = codes.get("OK", 0) + 1
    except grpc.RpcError as e:
        codes[e.code().name] = codes.get(e.code().name, 0) + 1
        details.add(e.details() or "")
    seconds.append(round(time.monotonic() - start, 4))
print(json.dumps({"codes": codes, "details": sorted(details), "wrong_replies": wrong,
                  "messages": messages, "at": at, "seconds": seconds}))
