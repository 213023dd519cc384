#!/usr/bin/env python3
"""The HTTP API's cost over the CLI, and its behaviour under a crowd (issue 25). `make bench-api`.

Against the project's fake Gemini with no latency, in one run:

1. The same N photos (distinct bytes, each a new item and a real call to the fake), in a fresh
   data dir each way, one call at a time (`[bulkhead] max_concurrent_calls = 1`, so what differs
   is the way in, not the parallelism): `product-extractor extract --json` with all N (one process:
   the reference; its time over N, start-up included), and `serve` with POST
   /api/products/extract, one request at a time on a kept connection (Python's http.client,
   client-measured). Added per request = HTTP − CLI, at the mean and at the p50.
2. Throughput at 10 slots: the CLI with all N photos, and 10 HTTP clients at once.
3. 200 clients at once against 10 bulkhead slots (`max_wait_duration = 0s`), three rounds: every
   answer must be 200 or 429 (anything else fails the run), and the server's resident memory
   after each round (VmRSS) is printed.

Prints Markdown tables for BENCHMARKS.md; exits 1 when a crowd's answer is neither 200 nor 429.

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


ONE_SLOT = "[bulkhead]\nmax_concurrent_calls = 1\n"
TEN_SLOTS = '[bulkhead]\nmax_concurrent_calls = 10\nmax_wait_duration = "0s"\n'


def run_cli(app, url, data, photos, config):
    data.mkdir()
    (data / "config.toml").write_text(config)
    started = time.perf_counter()
    out = subprocess.run([app, "extract", "--json", *map(str, photos)], env=env_for(url, data), capture_output=True, text=True)
    total = time.perf_counter() - started
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert out.returncode == 0 and sum(1 for l in lines if l.get("ok")) == len(photos), out.stderr[-2000:]
    return total


def run_http(app, url, data, photos, config, clients):
    """`clients` at a time, each on its own kept connection; the latencies and the wall time."""
    data.mkdir()
    server, port = start_serve(app, url, data, config)
    latencies, lock, queue = [], threading.Lock(), list(photos)

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            with lock:
                if not queue:
                    break
                photo = queue.pop(0)
            body = photo.read_bytes()
            t = time.perf_counter()
            status = post(conn, body)
            with lock:
                latencies.append((time.perf_counter() - t) * 1000)
            assert status == 200, status
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    [t.start() for t in threads]
    [t.join() for t in threads]
    total = time.perf_counter() - started
    server.terminate()
    server.wait(timeout=60)
    return latencies, total


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
            n = args.n
            # 1. One call at a time: the CLI (reference) and HTTP, the same photos.
            cli_one = run_cli(args.app, url, tmp / "cli-1", photos, ONE_SLOT)
            lat_one, http_one = run_http(args.app, url, tmp / "http-1", photos, ONE_SLOT, 1)
            # 2. Ten at a time.
            cli_ten = run_cli(args.app, url, tmp / "cli-10", photos, TEN_SLOTS)
            lat_ten, http_ten = run_http(args.app, url, tmp / "http-10", photos, TEN_SLOTS, 10)
            print("| way in | slots | photos | total (s) | per photo (ms) | request p50 (ms) | request p95 (ms) | photos/s |")
            print("|---|---|---|---|---|---|---|---|")
            for name, slots, total, lat in [
                ("CLI `extract --json`, one process (reference)", 1, cli_one, None),
                ("HTTP, 1 client, kept connection", 1, http_one, lat_one),
                ("CLI `extract --json`, one process (reference)", 10, cli_ten, None),
                ("HTTP, 10 clients at once", 10, http_ten, lat_ten),
            ]:
                p50 = f"{statistics.median(lat):.2f}" if lat else "–"
                p95 = f"{percentile(lat, 95):.2f}" if lat else "–"
                print(f"| {name} | {slots} | {n} | {total:.2f} | {total / n * 1000:.2f} | {p50} | {p95} | {n / total:.1f} |")
            per_cli = cli_one / n * 1000
            print(
                f"\nadded per request over the CLI, one call at a time: mean {http_one / n * 1000 - per_cli:+.2f} ms, "
                f"p50 {statistics.median(lat_one) - per_cli:+.2f} ms"
            )
            # 2. 200 clients at once against 10 slots, three rounds.
            crowd_data = tmp / "crowd"
            crowd_data.mkdir()
            server, port = start_serve(args.app, url, crowd_data, TEN_SLOTS)
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
    finally:
        fake.stdin.close()
        fake.wait(timeout=10)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
