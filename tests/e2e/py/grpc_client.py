"""The grpcio client of tests/e2e/grpc.rs: every call through sluice on 127.0.0.1:argv[1];
prints one JSON object of what came back."""
import json
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

channel = grpc.insecure_channel(f"127.0.0.1:{sys.argv[1]}")
grpc.channel_ready_future(channel).result(timeout=10)
ident = lambda b: b
out = {}


def status_of(call):
    try:
        call()
        return {"code": "OK", "details": ""}
    except grpc.RpcError as e:
        return {"code": e.code().name, "details": e.details() or ""}


health = health_pb2_grpc.HealthStub(channel)
out["health"] = health_pb2.HealthCheckResponse.ServingStatus.Name(
    health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status)
out["echo"] = channel.unary_unary("/test.Svc/Echo", ident, ident)(b"\x00hello\xff", timeout=10).hex()
out["missing"] = status_of(lambda: channel.unary_unary("/test.Svc/Missing", ident, ident)(b"x", timeout=10))

start = time.monotonic()
stream = channel.unary_stream("/test.Svc/Count", ident, ident)(bytes([5]), timeout=10)
messages, at = [], []
for m in stream:
    messages.append(m.decode())
    at.append(time.monotonic() - start)
out["stream"] = {"messages": messages, "at": at, "code": stream.code().name}

out["deadline"] = status_of(lambda: channel.unary_unary("/test.Svc/Slow", ident, ident)(b"x", timeout=0.5))
out["capped"] = status_of(lambda: channel.unary_unary("/cap.Svc/Slow", ident, ident)(b"x", timeout=10))
out["dead"] = status_of(lambda: channel.unary_unary("/dead.Svc/Echo", ident, ident)(b"x", timeout=10))
out["http1"] = status_of(lambda: channel.unary_unary("/h1.Svc/Echo", ident, ident)(b"x", timeout=10))
print(json.dumps(out))
