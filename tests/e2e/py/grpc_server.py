"""A real grpcio server for tests/e2e/grpc.rs: the standard health service and a small
service of generic handlers (raw bytes, no codegen). argv[1] is the port to bind on
127.0.0.1; argv[2], when given, is the share of Echo calls (0..1) answered UNAVAILABLE,
spread evenly; argv[3], when given, is put before every Echo reply (a shadow that answers
otherwise). It prints "ready" once serving."""
import sys
import threading
import time
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def missing(request, context):
    context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")


def slow(request, context):
    time.sleep(3)
    return request


failing = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
tag = sys.argv[3].encode() if len(sys.argv) > 3 else b""
calls = [0]
lock = threading.Lock()


def echo(request, context):
    with lock:
        n = calls[0]
        calls[0] += 1
    if int((n + 1) * failing) > int(n * failing):
        context.abort(grpc.StatusCode.UNAVAILABLE, "canary down")
    return tag + request


def count(request, context):
    # request: one byte, the number of messages; each message is b"msg-<i>". An optional
    # second byte is the wait before each message in 10 ms (default 5: 50 ms).
    wait = (request[1] if len(request) > 1 else 5) / 100
    for i in range(request[0] if request else 0):
        time.sleep(wait)
        yield b"msg-%d" % i


ident = lambda b: b
handlers = grpc.method_handlers_generic_handler("test.Svc", {
    "Missing": grpc.unary_unary_rpc_method_handler(missing, ident, ident),
    "Slow": grpc.unary_unary_rpc_method_handler(slow, ident, ident),
    "Echo": grpc.unary_unary_rpc_method_handler(echo, ident, ident),
    "Count": grpc.unary_stream_rpc_method_handler(count, ident, ident),
})
# The same slow method under another name, for a route to a cluster with a short timeout.
capped = grpc.method_handlers_generic_handler("cap.Svc", {
    "Slow": grpc.unary_unary_rpc_method_handler(slow, ident, ident),
})
server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
server.add_generic_rpc_handlers((handlers, capped))
checker = health.HealthServicer()
checker.set("", health_pb2.HealthCheckResponse.SERVING)
health_pb2_grpc.add_HealthServicer_to_server(checker, server)
server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
server.start()
print("ready", flush=True)
server.wait_for_termination()
