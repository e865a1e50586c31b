"""benchmarks.serving's load clients (REST and gRPC) on a toy model served as "reverse":
every answer checked against its request, batches counted from the server's stats."""

import asyncio
import os

from benchmarks import serving
from tests.helpers.serving import ServerThread, save_toy


def test_rest_and_grpc_clients_count_answers_and_batches(tmp_path):
    base = str(tmp_path / "export")
    os.makedirs(base)
    save_toy(base, 1, "v1:")
    texts = ["1 0 1", "0 0 1", "ab"]
    answers = {t: "v1:" + t.upper() for t in texts}
    with ServerThread({"reverse": base}) as server:
        for target in (None, server.grpc_target):
            row = asyncio.run(serving._load(server.url, texts, answers, 8, 40, 30, target))
            assert row["requests"] == 40 and row["errors"] == 0 and row["wrong"] == 0, row
            assert row["mean_batch"] >= 1.0 and row["p99_ms"] >= row["p50_ms"] > 0
        wrong = {t: "nope" for t in texts}
        row = asyncio.run(serving._load(server.url, texts, wrong, 2, 6, 30, server.grpc_target))
        assert row["wrong"] == 6 and row["errors"] == 0
