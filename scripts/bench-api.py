#!/usr/bin/env python3
"""The HTTP API's cost over the CLI, and its behaviour under a crowd (issue 25). `make bench-api`.

Against the project's fake Gemini with no latency, in one run:

1. The same N photos (distinct bytes, each a new item and a real call to the fake) extracted
   through `product-extractor extract --json` (one process for all N: the reference) and through
   `serve` with POST /api/products/extract, one request at a time (Python's http.client, a kept
   connection), each in a fresh data dir. Per photo: the CLI's time (its wall time over N, start-up
   included) and the HTTP request's (client-measured); the added time per request = HTTP − CLI.
2. 200 clients at once against 10 bulkhead slots (`max_wait_duration = 0s`), three rounds: every
   answer must be 200 or 429 (anything else fails the run), and the server's resident memory
   after each round (VmRSS) must stay flat (the last round within 10 % of the first).

Prints a Markdown table for BENCHMARKS.md; exits 1 when an answer is neither 200 nor 429.

    scripts/bench-api.py --app target/release/product-extractor --fake target/release/fake-gemini
"""

import argparse
import http.client
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import threading
import time
import uuid

KEY = "bench-key"


def jpeg(seed, tmp):
    """A distinct small photo: the fixture's bytes with a comment segment of its own after SOI."""
    base = pathlib.Path(__file__).resolve().parent.parent.joinpath("tests/fixtures/product.jpg").read_bytes()
    comment = f"bench photo {seed} {uuid.uuid4().hex}".encode()
    segment = b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment
    path = tmp / f"photo-{seed:04}.jpg"
    path.write_bytes(base[:2] + segment + base[2:])
    return path


def start_fake(binary):
    proc = subprocess.Popen([binary, "--key", KEY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return proc, url


def env_for(url, data):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(
        GEMINI_API_KEY=KEY,
        GEMINI_BASE_URL=url,
        GEMINI_MODEL="gemini-2.5-flash",
        PRODUCT_EXTRACTOR_DATA_DIR=str(data),
        PRODUCT_EXTRACTOR_KEYRING_SERVICE=f"bench-api:{data}",
    )
    return env


def start_serve(app, url, data, config=""):
    (data / "config.toml").write_text(config)
    proc = subprocess.Popen([app, "serve", "--listen", "127.0.0.1:0"], env=env_for(url, data), stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    port = int(line.split("http://127.0.0.1:")[1].split()[0])
    return proc, port


def post(conn, path_bytes):
    boundary = uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"p.jpg\"\r\n"
        "Content-Type: image/jpeg\r\n\r\n"
    ).encode() + path_bytes + f"\r\n--{boundary}--\r\n".encode()
    conn.request("POST", "/api/products/extract", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    response = conn.getresponse()
    response.read()
    return response.status


def rss_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    parser.add_argument("--fake", required=True)
    parser.add_argument("-n", type=int, default=200, help="photos for the HTTP-vs-CLI comparison")
    args = parser.parse_args()
    fake, url = start_fake(args.fake)
    failed = False
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            photos_dir = tmp / "photos"
            photos_dir.mkdir()
            photos = [jpeg(i, photos_dir) for i in range(args.n)]
            # 1. The CLI: one process, N photos.
            cli_data = tmp / "cli"
            cli_data.mkdir()
            started = time.perf_counter()
            out = subprocess.run(
                [args.app, "extract", "--json", *map(str, photos)], env=env_for(url, cli_data), capture_output=True, text=True
            )
            cli_total = time.perf_counter() - started
            lines = [json.loads(line) for line in out.stdout.splitlines()]
            assert out.returncode == 0 and sum(1 for l in lines if l.get("ok")) == args.n, out.stderr[-2000:]
            cli_per = cli_total / args.n * 1000
            # The same photos over HTTP, one request at a time.
            http_data = tmp / "http"
            http_data.mkdir()
            server, port = start_serve(args.app, url, http_data)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            latencies = []
            started = time.perf_counter()
            for photo in photos:
                data = photo.read_bytes()
                t = time.perf_counter()
                status = post(conn, data)
                latencies.append((time.perf_counter() - t) * 1000)
                assert status == 200, status
            http_total = time.perf_counter() - started
            conn.close()
            server.terminate()
            server.wait(timeout=60)
            p50, p95 = statistics.median(latencies), percentile(latencies, 95)
            print(f"| way in | photos | total (s) | per photo, mean (ms) | p50 (ms) | p95 (ms) | photos/s |")
            print(f"|---|---|---|---|---|---|---|")
            print(f"| CLI `extract --json` (reference, one process) | {args.n} | {cli_total:.2f} | {cli_per:.2f} | – | – | {args.n / cli_total:.1f} |")
            print(
                f"| HTTP `POST /api/products/extract`, one at a time | {args.n} | {http_total:.2f} | "
                f"{http_total / args.n * 1000:.2f} | {p50:.2f} | {p95:.2f} | {args.n / http_total:.1f} |"
            )
            print(f"\nadded per request over the CLI: mean {http_total / args.n * 1000 - cli_per:+.2f} ms, p50 {p50 - cli_per:+.2f} ms")
            # 2. 200 clients at once against 10 slots, three rounds.
            crowd_data = tmp / "crowd"
            crowd_data.mkdir()
            server, port = start_serve(args.app, url, crowd_data, '[bulkhead]\nmax_concurrent_calls = 10\nmax_wait_duration = "0s"\n')
            print("\n| round | clients | 200 | 429 | other | wall (s) | serve's RSS after (MiB) |")
            print("|---|---|---|---|---|---|---|")
            rss = []
            for round_ in range(3):
                crowd = [jpeg(10_000 + round_ * 1000 + i, photos_dir).read_bytes() for i in range(200)]
                statuses = [None] * len(crowd)
                barrier = threading.Barrier(len(crowd))

                def send(i):
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                    barrier.wait()
                    try:
                        statuses[i] = post(conn, crowd[i])
                    except Exception as e:  # a refused or reset connection is an answer too: count it
                        statuses[i] = f"{type(e).__name__}"
                    finally:
                        conn.close()

                threads = [threading.Thread(target=send, args=(i,)) for i in range(len(crowd))]
                started = time.perf_counter()
                [t.start() for t in threads]
                [t.join() for t in threads]
                wall = time.perf_counter() - started
                ok, full = statuses.count(200), statuses.count(429)
                other = len(statuses) - ok - full
                failed |= other > 0
                rss.append(rss_kib(server.pid))
                print(f"| {round_ + 1} | {len(crowd)} | {ok} | {full} | {other} | {wall:.2f} | {rss[-1] / 1024:.1f} |")
            server.terminate()
            server.wait(timeout=60)
            growth = (rss[-1] - rss[0]) / rss[0] * 100
            print(f"\nRSS from round 1 to round 3: {growth:+.1f} %")
            failed |= growth > 10
    finally:
        fake.stdin.close()
        fake.wait(timeout=10)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
