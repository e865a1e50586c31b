"""t2t-serve under load: requests/s and latency with batching on and off, REST and gRPC,
a soak, and (--decode) the decode speed of each engine.

    python -m benchmarks.serving [--quick] [--output_dir RUN] [--train_steps N]
        [--decode [--decode_output_dir RUN --decode_data_dir DIR] [--skip_load]]

Trains transformer_tiny on algorithmic_reverse_binary40_test (reversing bit strings;
--train_steps, in a temporary folder) unless --output_dir names a run with an export
(t2t-exporter's RUN/export), exports it with greedy decoding, then starts the real
`t2t-serve` binary on 127.0.0.1 twice: with dynamic batching and with
--enable_batching=false. Clients (aiohttp, in this process, on 127.0.0.1 only) send
one-example TF Serving predict requests ({"instances": ["1 0 1 1 0 0 1 0"]}) from 1, 8
and 32 concurrent connections, each level bounded by --requests and --seconds; with
batching on the same levels run again over TF Serving's gRPC API (stock
PredictionServiceStub on a grpc.aio channel per client). The table gives requests/s,
p50/p99 latency and the mean batch size the server reports. Then a soak sends --soak
requests from 32 clients with batching on. --decode adds benchmarks.serving_decode's
table (t2t-decoder, the SavedModel and CTranslate2 float32/int8 on the same sentences).

Every response is checked against its own request: the expected output of each input is
first computed by calling the exported SavedModel directly, one input at a time, and all
inputs have the same length (8 bits), so a batch's decode length is the same as a lone
request's; a response that differs (a lost or mixed-up answer), or any error, is counted.
The goal (issue #24): >= 3x the requests/s with batching at 32 clients on a 2-core CPU.
The clients share the CPU with the server, so absolute figures are lower than a remote
client would see; the on/off ratio is the figure to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

PROBLEM = "algorithmic_reverse_binary40_test"
CONCURRENCY = (1, 8, 32)
GOAL = 3.0
BITS = 8


def train_and_export(root: str, steps: int) -> str:
    """A run of transformer_tiny trained `steps` steps and exported; returns its folder."""
    from t2t import registry
    from t2t.config import RuntimeConfig, TrainerConfig
    from t2t.hparams.basic import create_hparams
    from t2t.serving import export as export_lib
    from t2t.trainer.trainer import Trainer

    data_dir, run = os.path.join(root, "data"), os.path.join(root, "run")
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, os.path.join(data_dir, "tmp"), progress=False)
    hparams = create_hparams("transformer_tiny", "learning_rate_warmup_steps=400")
    trainer = Trainer(problem, "transformer", hparams, data_dir, run,
                      TrainerConfig(train_steps=steps, local_eval_frequency=steps,
                                    save_checkpoints_steps=steps, eval_steps=0),
                      RuntimeConfig(random_seed=1),
                      run_info={"hparams_set": "transformer_tiny",
                                "hparams": "learning_rate_warmup_steps=400"})
    started = time.time()
    metrics = trainer.train_and_evaluate()
    print(f"trained {steps} steps in {time.time() - started:.0f} s: "
          f"accuracy_per_sequence {metrics.get('accuracy_per_sequence', float('nan')):.3f}",
          flush=True)
    export_lib.export(problem, "transformer", hparams, data_dir, run, None,
                      "beam_size=1,extra_length=2")
    return run


def inputs_and_answers(version_dir: str) -> tuple[list[str], dict[str, str]]:
    """Every 8-bit input and the SavedModel's own answer to it, one input per call."""
    import tensorflow as tf

    texts = [" ".join(bits) for bits in itertools.product("01", repeat=BITS)]
    serve = tf.saved_model.load(version_dir).signatures["serving_default"]
    answers = {t: serve(inputs=tf.constant([t]))["outputs"].numpy()[0].decode() for t in texts}
    right = sum(answers[t] == " ".join(reversed(t.split())) for t in texts)
    print(f"the model reverses {right}/{len(texts)} of the {BITS}-bit inputs correctly "
          "(checked below against its own answers, not against reversal)", flush=True)
    return texts, answers


class ServeProcess:
    """The t2t-serve binary on a free port of 127.0.0.1."""

    def __init__(self, run: str, *flags: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "t2t.bin.t2t_serve", f"--output_dir={run}",
             "--model_name=reverse", "--rest_api_port=0", "--port=0", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        for line in self.process.stdout:
            if line.startswith("Serving gRPC on "):
                self.grpc_target = line.split()[3]
            if line.startswith("Serving on "):
                self.url = line.split()[2]
                return
        raise RuntimeError(f"t2t-serve {' '.join(flags)} did not start")

    def stop(self) -> int:
        self.process.terminate()
        self.process.communicate(timeout=120)
        return self.process.returncode


async def _load(url: str, texts: list[str], answers: dict[str, str], clients: int,
                requests: int, seconds: float, grpc_target: str | None = None
                ) -> dict[str, Any]:
    """`clients` concurrent clients, each on its own connection: REST (aiohttp), or gRPC
    Predict on `grpc_target` (a grpc.aio channel per client)."""
    import aiohttp

    latencies: list[float] = []
    counts = {"errors": 0, "wrong": 0}
    sent = [0]  # requests started, so that the clients stop at exactly `requests`
    order = itertools.cycle(texts)
    deadline = time.perf_counter() + seconds
    predict = f"{url}/v1/models/reverse:predict"

    async def ask(session: aiohttp.ClientSession, stub: Any, text: str) -> tuple[bool, str]:
        if stub is not None:
            return await grpc_predict(stub, "reverse", text)
        async with session.post(predict, json={"instances": [text]}) as reply:
            body = await reply.json(content_type=None)
        return reply.status == 200, body["predictions"][0]["outputs"] if reply.status == 200 else ""

    async def client(session: aiohttp.ClientSession, stub: Any) -> None:
        while sent[0] < requests and time.perf_counter() < deadline:
            sent[0] += 1
            text = next(order)
            start = time.perf_counter()
            ok, output = await ask(session, stub, text)
            latencies.append(time.perf_counter() - start)
            if not ok:
                counts["errors"] += 1
            elif output != answers[text]:
                counts["wrong"] += 1

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.get(f"{url}/v1/models/reverse?stats") as reply:
            before = _batch_counts(await reply.json())
        channels, stubs = _grpc_stubs(grpc_target, clients)
        start = time.perf_counter()
        await asyncio.gather(*[client(session, stub) for stub in stubs])
        elapsed = time.perf_counter() - start
        for channel in channels:
            await channel.close()
        async with session.get(f"{url}/v1/models/reverse?stats") as reply:
            after = _batch_counts(await reply.json())
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3  # noqa: E731
    batches, examples = after[0] - before[0], after[1] - before[1]
    return {"clients": clients, "requests": len(latencies), "seconds": round(elapsed, 2),
            "requests_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": round(pick(0.5), 1), "p99_ms": round(pick(0.99), 1),
            "mean_batch": round(examples / batches, 2) if batches else 0.0, **counts}


def _grpc_stubs(target: str | None, clients: int) -> tuple[list[Any], list[Any]]:
    """(channels, stubs): a grpc.aio channel and PredictionServiceStub per client; without
    a target, no channels and a None stub per client (REST)."""
    if target is None:
        return [], [None] * clients
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    channels = [grpc.aio.insecure_channel(target) for _ in range(clients)]
    return channels, [prediction_service_pb2_grpc.PredictionServiceStub(c) for c in channels]


async def grpc_predict(stub: Any, model: str, text: str, timeout_s: float = 120.0
                       ) -> tuple[bool, str]:
    """One example through t2t-serve's gRPC Predict: (ok, the output text). `stub`: a
    PredictionServiceStub on a grpc.aio channel (TF Serving's stock client)."""
    import grpc
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    tensor = request.inputs["inputs"]
    tensor.dtype = 7  # DT_STRING
    tensor.tensor_shape.dim.add(size=1)
    tensor.string_val.append(text.encode())
    try:
        reply = await stub.Predict(request, timeout=timeout_s)
    except grpc.RpcError:
        return False, ""
    return True, reply.outputs["outputs"].string_val[0].decode()


def _batch_counts(status: dict[str, Any]) -> tuple[int, int]:
    stats = [s for version in status.get("batching", {}).values() for s in version.values()]
    return sum(s["batches"] for s in stats), sum(s["examples"] for s in stats)


def measure(run: str, texts: list[str], answers: dict[str, str], batching: bool,
            requests: int, seconds: float, threads: int, apis: tuple[str, ...] = ("rest",)
            ) -> list[dict[str, Any]]:
    """Rows per API (rest, grpc) and concurrency level, on one t2t-serve process."""
    flags = [f"--num_batch_threads={threads}", "--max_batch_size=32"]
    if not batching:
        flags.append("--enable_batching=false")
    server = ServeProcess(run, *flags)
    try:
        rows = []
        for api in apis:
            target = server.grpc_target if api == "grpc" else None
            asyncio.run(_load(server.url, texts, answers, 4, 40, 30, target))  # warm up
            for clients in CONCURRENCY:
                row = asyncio.run(_load(server.url, texts, answers, clients, requests, seconds,
                                        target))
                rows.append({"api": api, "batching": "on" if batching else "off", **row})
                print(_row_text(rows[-1]), flush=True)
    finally:
        server.stop()
    return rows


def _row_text(row: dict[str, Any]) -> str:
    return (f"{row.get('api', 'rest'):>4} | batching {row['batching']:>3} | "
            f"{row['clients']:>2} clients | "
            f"{row['requests']:>5} req in {row['seconds']:6.1f} s | {row['requests_per_s']:7.1f} "
            f"req/s | p50 {row['p50_ms']:7.1f} ms | p99 {row['p99_ms']:7.1f} ms | mean batch "
            f"{row['mean_batch']:5.2f} | errors {row['errors']} | wrong {row['wrong']}")


def soak(run: str, texts: list[str], answers: dict[str, str], count: int,
         threads: int) -> dict[str, Any]:
    server = ServeProcess(run, f"--num_batch_threads={threads}", "--max_batch_size=32")
    try:
        row = asyncio.run(_load(server.url, texts, answers, 32, count, 3600))
    finally:
        code = server.stop()
    row["exit_status_after_sigterm"] = code
    print(f"soak: {row['requests']} requests from 32 clients in {row['seconds']} s, "
          f"{row['errors']} errors, {row['wrong']} wrong answers; t2t-serve exited with "
          f"status {code} after SIGTERM", flush=True)
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer requests, shorter soak, fewer training steps")
    parser.add_argument("--output_dir", help="a run with RUN/export (default: train one)")
    parser.add_argument("--train_steps", type=int, default=None)
    parser.add_argument("--requests", type=int, default=None, help="per concurrency level")
    parser.add_argument("--seconds", type=float, default=None, help="per concurrency level")
    parser.add_argument("--soak", type=int, default=None, help="requests in the soak")
    parser.add_argument("--num_batch_threads", type=int, default=2)
    parser.add_argument("--decode", action="store_true",
                        help="also the decode-speed table (benchmarks.serving_decode)")
    parser.add_argument("--decode_output_dir", help="serving_decode's --output_dir")
    parser.add_argument("--decode_data_dir", help="serving_decode's --data_dir")
    parser.add_argument("--skip_load", action="store_true", help="only --decode's table")
    args = parser.parse_args(argv)
    decode = _decode_table(args) if args.decode else None
    if args.skip_load:
        return {"decode": decode}
    requests = args.requests or (300 if args.quick else 1500)
    seconds = args.seconds or (20.0 if args.quick else 60.0)
    soak_count = args.soak if args.soak is not None else (1000 if args.quick else 3000)
    steps = args.train_steps or (800 if args.quick else 2000)
    with tempfile.TemporaryDirectory(prefix="t2t-serving-bench-") as root:
        run = args.output_dir or train_and_export(root, steps)
        export_dir = os.path.join(run, "export")
        versions = sorted((v for v in os.listdir(export_dir) if v.isdigit()), key=int)
        if not versions:
            raise SystemExit(f"no export in {export_dir}: run t2t-exporter --output_dir={run}")
        texts, answers = inputs_and_answers(os.path.join(export_dir, versions[-1]))
        rows = []
        for batching in (True, False):
            rows += measure(run, texts, answers, batching, requests, seconds,
                            args.num_batch_threads, ("rest", "grpc") if batching else ("rest",))
        soaked = soak(run, texts, answers, soak_count, args.num_batch_threads)
    at = {(r["batching"], r["clients"]): r["requests_per_s"] for r in rows if r["api"] == "rest"}
    ratio = at[("on", 32)] / max(at[("off", 32)], 1e-9)
    print(f"batching on / off at 32 clients: {ratio:.2f}x requests/s "
          f"(goal >= {GOAL:.0f}x: {'met' if ratio >= GOAL else 'NOT met'})")
    figures = {"rows": rows, "soak": soaked, "speedup_32_clients": round(ratio, 2),
               "config": {"requests": requests, "seconds": seconds, "soak": soak_count,
                          "num_batch_threads": args.num_batch_threads,
                          "cpus": os.cpu_count()}}
    if decode is not None:
        figures["decode"] = decode
    print(json.dumps({"speedup_32_clients": figures["speedup_32_clients"]}))
    return figures


def _decode_table(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks import serving_decode

    argv = []
    if args.decode_output_dir:
        argv += ["--output_dir", args.decode_output_dir, "--data_dir", args.decode_data_dir or ""]
    return serving_decode.main(argv)


if __name__ == "__main__":
    main()
