#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target, fuzz/corpus/<target>/, from the
test fixtures: the stream fixtures of filters/tests/fixtures, configs/*.yaml,
the scenarios in docs/workload.md, and the requests, replies, heads and trace
rows the unit tests use. Run from anywhere; rewrites the seeds it names and
leaves other files (inputs saved from fuzzing runs) alone.

The framed targets (meter, resp_*, head_scan) read a 7-byte header first: a
selector byte, then three little-endian u16 cut points (see
sluice_filters::fuzzing::Framed). Each seed is written with no cuts and with
a few, so the fuzzer starts from split inputs too."""
import os
import re
import struct

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
corpus = os.path.join(root, "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def framed(selector, body, cuts=(0, 0, 0)):
    return bytes([selector]) + struct.pack("<HHH", *cuts) + body


def seeds(target, selector, name, body):
    """The body whole, and cut at thirds, then one byte in."""
    n = max(len(body), 1)
    put(target, name, framed(selector, body))
    put(target, name + ".cut", framed(selector, body, (n // 3, 2 * n // 3, 1)))


streams = os.path.join(root, "filters", "tests", "fixtures", "streams")
# DIALECTS in sluice_filters::fuzzing::meter: OpenAI, Anthropic, TGI, Ollama, JSON, unknown.
dialect = {"openai": 0, "vllm": 0, "llamacpp": 0, "anthropic": 1, "tgi": 2, "ollama": 3}
for f in sorted(os.listdir(streams)):
    body = open(os.path.join(streams, f), "rb").read()
    seeds("meter", dialect[f.split("_")[0]], f, body)
    if f.endswith(".sse"):
        seeds("meter", dialect[f.split("_")[0]], f + ".crlf", body.replace(b"\n", b"\r\n"))
seeds("meter", 4, "openai_answer.json",
      b'{"id":"x","model":"gpt-4o","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],'
      b'"usage":{"prompt_tokens":3,"completion_tokens":1}}')
seeds("meter", 5, "unknown.txt", b"data: not read\n\n")

requests = {
    "get_set": b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n*3\r\n$3\r\nset\r\n$1\r\nk\r\n$0\r\n\r\n",
    "client_reply": b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\nclient reply on\r\n",
    "inline": b"PING\r\nGET  key\r\n\r\nset k v\n",
    "empty_arrays": b"*0\r\n*-1\r\n*1\r\n$4\r\nping\r\n",
    "multi_exec": b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*1\r\n$4\r\nEXEC\r\n",
    "bad_type": b"*2\r\n$3\r\nGET\r\n:1\r\n",
    "subscribe": b"*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n",
}
for name, body in requests.items():
    seeds("resp_request", 0, name, body)

replies = {
    "resp2": b"+OK\r\n-ERR wrong\r\n:-42\r\n$3\r\nfoo\r\n$0\r\n\r\n$4\r\n\r\n\r\n\r\n$-1\r\n*-1\r\n*0\r\n",
    "nested": b"*2\r\n*2\r\n:1\r\n-ERR x\r\n*0\r\n*2\r\n$1\r\na\r\n$-1\r\n",
    "resp3": b"_\r\n,1.5\r\n#t\r\n(123\r\n!3\r\nERR\r\n=7\r\ntxt:abc\r\n%1\r\n+k\r\n:1\r\n~1\r\n+s\r\n",
    "attribute": b"*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n-ERR inner\r\n|1\r\n+a\r\n+b\r\n+OK\r\n",
    "push": b"+OK\r\n$-1\r\n-ERR a\r\n*1\r\n:1\r\n>1\r\n+p\r\n_\r\n",
    "errors": b"$3\r\nfoox\r\n",
}
for name, body in replies.items():
    seeds("resp_reply", 0, name, body)

faults = {
    "delay_abort": "200ms\n503\n50ms",
    "seconds": "1.5s\n200\n0",
    "bare": "250\n599\n2s",
    "too_long": "61s\n600\n60001",
    "junk": " 10ms \n+404\nfast",
}
for name, body in faults.items():
    put("fault_headers", name, body)

bodies = [
    b'{"model":"gpt-4o-mini","stream":true,"temperature":0.70,"messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":64}',
    b'{"model":"m","prompt":["a","b"]}',
    b'{"model":"llama3.2","system":"S","prompt":"P"}',
    b'{"model":"c","max_tokens":9,"system":[{"type":"text","text":"S"}],"messages":[{"role":"user","content":"u"}]}',
    b'{"model":"m","input":[{"role":"user","content":"hi"}]}',
    b'{"stream": true, "model" : "gpt-4o", "messages":[{"role":"user","content":"long',
    b'{"model": "gpt-4o", "messages":[{"model":"inner"}]}',
    b' {"stream":true,"model":null}',
    b'{ }',
    b'{"model":"a\\u0041"}',
    b'{"max_tokens":64,"max_completion_tokens":32,"temperature":1e400}',
    b'[1,2]',
]
for i, body in enumerate(bodies):
    put("request_scan", f"body{i}", bytes([i % 3]) + body)

heads = [
    b"GET /v1/models HTTP/1.1\r\nhost: a\r\n\r\nBODY",
    b"\r\n\nGET / HTTP/1.1\nhost: a\n\n",
    b"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nx: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\r\n\r\n",
    b"GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\n\r\n",
    b"POST /a HTTP/1.1\nx: y\n\nrest",
]
for i, body in enumerate(heads):
    seeds("head_scan", 0, f"head{i}.default", body)
    # Small limits: max_uri 3 * (s % 8), headers 3 * (s >> 3), count s % 5.
    seeds("head_scan", 0x6F, f"head{i}.small", body)

for f in sorted(os.listdir(os.path.join(root, "configs"))):
    put("config", f, open(os.path.join(root, "configs", f), "rb").read())
put("config", "empty.yaml", "")

sluice_rows = "".join(
    '{"v":1,"request_id":"r%d","session_id":"s","arrival_us":%d,"arrival":"2023-11-14T22:13:20.00000%dZ",'
    '"ttft_ms":12.5,"input_tokens":%d,"output_tokens":7,"hash_ids":[1,2,%d]}\n' % (i, i * 1250000, i, 100 + i, 3 + i)
    for i in range(3)
)
traces = {
    "sluice.jsonl": (0, sluice_rows),
    "sluice_body.jsonl": (1, '{"v":1,"request_id":"b","arrival_us":5,"model":"m","gaps_ms":[1.5,2],"e2e_ms":30,'
                             '"body":{"messages":[{"role":"user","content":"hi"}]}}\n'),
    "azure.csv": (0, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:16:00.0000000,900,200\n"),
    "mooncake.jsonl": (0, '{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}\n'
                          '{"timestamp": 3000, "input_length": 600, "output_length": 10, "hash_ids": [46]}\n'),
    "burst_v1.csv": (0, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                        "5,ChatGPT,472,18,490,Conversation log\n45.5,GPT-4,1087,230,1317,API log\n"),
    "burst_sessions.csv": (4, "Timestamp, Session ID, Model, Request tokens, Response tokens, Total tokens, Log Type\n"
                              "0,s-1,ChatGPT,100,20,120,Conversation log\n7,s-1,ChatGPT,150,0,150,Conversation log\n"),
}
for name, (selector, text) in traces.items():
    put("trace", name, bytes([selector]) + text.encode())

docs = open(os.path.join(root, "docs", "workload.md")).read()
blocks = [b for b in re.findall(r"```yaml\n(.*?)```", docs, re.S) if "steps:" in b or "workload:" in b]
for i, block in enumerate(blocks):
    put("scenario", f"workload_md_{i}.yaml", block)
put("scenario", "rag_chat.yaml", """scenario: rag-chat
target: { base_url: "http://127.0.0.1:8080/", headers: { authorization: "Bearer ${API_KEY}" } }
workload:
  arrival: { kind: gamma, rate: 20, burstiness: 0.5 }
  warmup: 30s
  stages: [ { rate: 10, for: 1m }, { rate: 40, ramp: 2m } ]
  max_in_flight: 64
  seed: 7
sessions: { turns: { lognormal: { median: 3, sigma: 0.6 } }, think_time: 2s-8s }
steps:
  - { name: search, service: http, method: POST, path: /api/v2/collections/docs/query,
      body: { query_texts: ["{{query}}"], n_results: 3 } }
  - { name: answer, service: llm, depends_on: search, delay: 50ms-200ms,
      prompt: { template: "Question: {{query}} ({{query_hash}})" },
      max_tokens: 256, timeout: 30s }
data: { query: { values: [what is sluice, why open loop], order: sequential } }
thresholds: { ttft_p95: 800ms, error_rate: 1% }
""")
put("scenario", "sla.txt", "ttft_p95=800ms,error_rate=1%")
