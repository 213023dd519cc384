"""Starts the project's fake Gemini (the `fake-gemini` binary) for a check run by Google's SDK.

Shared by every script in tests/sdk/. The binary prints its base URL on its first line and
serves until its stdin closes, so it never outlives the script.
"""

import argparse
import contextlib
import pathlib
import subprocess
import sys

from google import genai
from google.genai import types

KEY = "test-key"


@contextlib.contextmanager
def running_fake(binary, script=(), key=KEY):
    """Yields the fake's base URL (http://127.0.0.1:PORT); `script` is the behaviors queued for
    the next generateContent requests, in order (see src-tauri/fake-gemini/src/bin)."""
    args = [binary, "--key", key]
    if script:
        args += ["--script", ",".join(script)]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise SystemExit(f"the fake did not start: first line {url!r}, exit {proc.poll()}")
        yield url
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    raise SystemExit(1)


def check(condition, message):
    if not condition:
        fail(message)


def parse_args():
    """The arguments every script in SDK_CHECKS takes: (fake binary, golden directory, image bytes)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--fake", required=True, help="the fake-gemini binary")
    parser.add_argument("--golden", required=True, help="src-tauri/core/tests/golden")
    parser.add_argument("--image", required=True, help="a JPEG photo")
    args = parser.parse_args()
    return args.fake, pathlib.Path(args.golden), pathlib.Path(args.image).read_bytes()


def client_for(url):
    """The SDK's client for the fake at `url`, without the SDK's own retries."""
    return genai.Client(
        api_key=KEY,
        http_options=types.HttpOptions(
            base_url=url, api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1)
        ),
    )
