"""Starts the project's fake Gemini (the `fake-gemini` binary) for a check run by Google's SDK.

Shared by every script in tests/sdk/. The binary prints its base URL on its first line and
serves until its stdin closes, so it never outlives the script.
"""

import contextlib
import subprocess
import sys


@contextlib.contextmanager
def running_fake(binary, script=(), key="test-key"):
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
