"""The Batch API round trip with Google's official SDK (google-genai) against the fake Gemini.

Usage: python batch_roundtrip.py BASE_URL [API_KEY]

Creates a batch of inline requests (one with an image and a JSON schema, one text-only) with
`client.batches.create`, polls it with `client.batches.get` until it is done, and checks that the
SDK parses every inlined response, in request order, each with its request's metadata key. Also
lists the batches and cancels a second one. Writes nothing; exits non-zero on any mismatch.
"""

import base64
import sys
import time

from google import genai
from google.genai import types

# A 1x1 JPEG, enough for the fake's image check.
TINY_JPEG = base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0"
    "Hyc5PTgyPC4zNDL/wAALCAABAAEBAREA/8QAFAABAAAAAAAAAAAAAAAAAAAACf/EABQQAQAAAAAAAAAAAAAAAAAAAAD/2gAIAQEAAD8A"
    "KpgA/9k="
)

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "brand": {"type": ["string", "null"]}},
    "required": ["name"],
}

DONE = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


def state_name(job):
    return job.state.name if hasattr(job.state, "name") else str(job.state)


def main():
    base_url = sys.argv[1]
    key = sys.argv[2] if len(sys.argv) > 2 else "test-key"
    client = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=base_url, api_version="v1beta"))
    model = "gemini-2.5-flash-lite"
    requests = [
        {
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"inline_data": {"mime_type": "image/jpeg", "data": TINY_JPEG}},
                        {"text": "Extract the product shown in this photo."},
                    ],
                }
            ],
            "config": {
                "response_mime_type": "application/json",
                "response_json_schema": SCHEMA,
                "temperature": 0.2,
            },
            "metadata": {"key": "item-1"},
        },
        {
            "contents": [{"role": "user", "parts": [{"text": "Describe a mug."}]}],
            "metadata": {"key": "item-2"},
        },
    ]
    job = client.batches.create(model=model, src=requests, config={"display_name": "sdk-roundtrip"})
    assert job.name.startswith("batches/"), job.name
    assert job.display_name == "sdk-roundtrip", job.display_name
    assert state_name(job) == "JOB_STATE_PENDING", state_name(job)

    seen = [state_name(job)]
    for _ in range(20):
        job = client.batches.get(name=job.name)
        seen.append(state_name(job))
        if seen[-1] in DONE:
            break
        time.sleep(0.05)
    assert seen[-1] == "JOB_STATE_SUCCEEDED", seen
    assert "JOB_STATE_RUNNING" in seen, seen

    responses = job.dest.inlined_responses
    assert [r.metadata["key"] for r in responses] == ["item-1", "item-2"], [r.metadata for r in responses]
    for r in responses:
        assert r.error is None, r.error
        assert r.response.candidates[0].finish_reason.name == "STOP"
        assert r.response.usage_metadata.prompt_token_count > 0
    parsed = responses[0].response.parsed if responses[0].response.parsed is not None else None
    text = responses[0].response.text
    assert '"name"' in text, text
    print(f"batch {job.name}: {' -> '.join(seen)}; {len(responses)} responses parsed; first: {text[:60]!r} {parsed}")

    # A second batch, cancelled while pending; then both appear in the list.
    other = client.batches.create(model=model, src=requests[1:], config={"display_name": "sdk-cancel"})
    client.batches.cancel(name=other.name)
    other = client.batches.get(name=other.name)
    assert state_name(other) == "JOB_STATE_CANCELLED", state_name(other)
    names = {b.display_name for b in client.batches.list()}
    assert {"sdk-roundtrip", "sdk-cancel"} <= names, names
    print("cancel and list: ok")


if __name__ == "__main__":
    main()
