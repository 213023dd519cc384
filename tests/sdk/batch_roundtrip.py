"""The Batch API round trip with Google's official SDK (google-genai) against the fake Gemini.

1. `client.batches.create` with inline requests — our 2.5 Flash golden request's config (schema,
   thinking budget, media resolution) with the photo, a text-only request, one the fake answers with
   a per-item UNAVAILABLE error and one it blocks — then `client.batches.get` until the batch is
   done (pending → running → succeeded), and the SDK parses every inlined response, in request
   order, each with its request's metadata key: the product JSON in the schema's key order with its
   usage, the per-item error as a JobError (gRPC code 14), the block as promptFeedback.
2. A second batch, cancelled while pending (`client.batches.cancel`), ends JOB_STATE_CANCELLED,
   and `client.batches.list` lists both.

Run by `make test-sdk`; any difference exits non-zero (nothing is skipped).

    python batch_roundtrip.py --fake target/debug/fake-gemini --golden src-tauri/core/tests/golden \
        --image tests/fixtures/product.jpg
"""

import json
import time

from google import genai
from google.genai import types

from fake import check, client_for, parse_args, running_fake

MODEL = "gemini-2.5-flash"
GOLDEN = "request_gemini-2.5-flash.json"
DONE = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}
# What the fake answers each request of the first batch with, in order (its --script).
SCRIPT = ["product", "product", "unavailable", "blocked:PROHIBITED_CONTENT"]


def state_name(job):
    return job.state.name if hasattr(job.state, "name") else str(job.state)


def requests_for(golden, image):
    config = golden["generationConfig"]
    photo_config = types.GenerateContentConfig(
        system_instruction=golden["systemInstruction"]["parts"][0]["text"],
        response_mime_type=config["responseMimeType"],
        response_json_schema=config["responseJsonSchema"],
        max_output_tokens=config["maxOutputTokens"],
        temperature=config.get("temperature"),
        thinking_config=types.ThinkingConfig(thinking_budget=config["thinkingConfig"]["thinkingBudget"]),
        media_resolution=config.get("mediaResolution"),
    )
    photo = [types.Part.from_bytes(data=image, mime_type="image/jpeg"), types.Part.from_text(text="Extract the product.")]
    return [
        types.InlinedRequest(contents=[types.Content(role="user", parts=photo)], config=photo_config, metadata={"key": "item-1"}),
        types.InlinedRequest(contents=[types.Content(role="user", parts=[types.Part.from_text(text="Describe a mug.")])], metadata={"key": "item-2"}),
        types.InlinedRequest(contents=[types.Content(role="user", parts=photo)], config=photo_config, metadata={"key": "item-3"}),
        types.InlinedRequest(contents=[types.Content(role="user", parts=photo)], config=photo_config, metadata={"key": "item-4"}),
    ]


def roundtrip(url, requests):
    client = client_for(url)
    job = client.batches.create(model=MODEL, src=requests, config={"display_name": "sdk-roundtrip"})
    check(job.name.startswith("batches/"), f"create: name {job.name!r}")
    check(job.display_name == "sdk-roundtrip", f"create: display name {job.display_name!r}")
    check(state_name(job) == "JOB_STATE_PENDING", f"create: state {state_name(job)}")
    check(job.model in (MODEL, f"models/{MODEL}"), f"create: model {job.model!r}")

    seen = [state_name(job)]
    for _ in range(20):
        job = client.batches.get(name=job.name)
        seen.append(state_name(job))
        if seen[-1] in DONE:
            break
        time.sleep(0.05)
    check(seen[-1] == "JOB_STATE_SUCCEEDED", f"the batch did not succeed: {seen}")
    check("JOB_STATE_RUNNING" in seen, f"the batch was never running: {seen}")
    check(job.done is not False and job.end_time is not None, f"a finished batch has an end time: {job.end_time}")

    check(job.dest is not None and job.dest.inlined_responses is not None, f"no inlined responses: {job.dest}")
    responses = job.dest.inlined_responses
    keys = [(r.metadata or {}).get("key") for r in responses]
    check(keys == ["item-1", "item-2", "item-3", "item-4"], f"responses out of request order or keys lost: {keys}")

    product_answer, text_answer, failed, blocked = responses
    for name, r in (("item-1", product_answer), ("item-2", text_answer)):
        check(r.error is None, f"{name}: unexpected error {r.error}")
        check(r.response is not None and r.response.candidates, f"{name}: no candidates")
        check(r.response.candidates[0].finish_reason == types.FinishReason.STOP, f"{name}: {r.response.candidates[0].finish_reason}")
        usage = r.response.usage_metadata
        check(usage is not None and usage.prompt_token_count > 0, f"{name}: no usage {usage}")
        check(usage.total_token_count >= usage.prompt_token_count, f"{name}: total below prompt: {usage}")
    product = json.loads(product_answer.response.text)
    check(isinstance(product.get("name"), str) and product["name"], f"item-1: no name in {product}")
    check(list(product)[0] == "name", f"item-1: the answer follows the schema's key order: {list(product)}")
    image_tokens = [d.token_count for d in product_answer.response.usage_metadata.prompt_tokens_details or []
                    if d.modality == types.MediaModality.IMAGE]
    # The golden 2.5 request asks MEDIA_RESOLUTION_MEDIUM: 256 tokens for the photo (gemini-api.md).
    check(image_tokens == [256], f"item-1: image tokens by modality: {product_answer.response.usage_metadata}")

    check(failed.response is None, f"item-3: a failed item has no response: {failed.response}")
    check(failed.error is not None and failed.error.code == 14, f"item-3: expected a JobError with gRPC code 14: {failed.error}")
    check("overloaded" in (failed.error.message or ""), f"item-3: error message {failed.error.message!r}")

    check(blocked.error is None and blocked.response is not None, f"item-4: {blocked}")
    check(not blocked.response.candidates, f"item-4: a blocked prompt has no candidates: {blocked.response.candidates}")
    check(blocked.response.prompt_feedback.block_reason == types.BlockedReason.PROHIBITED_CONTENT,
          f"item-4: {blocked.response.prompt_feedback}")
    check(blocked.response.usage_metadata.prompt_token_count > 0, "item-4: a blocked prompt is billed")
    print(f"ok   batch {job.name}: {' -> '.join(seen)}; 4 responses in order: product {product['name']!r} "
          f"({product_answer.response.usage_metadata.prompt_token_count} in, {image_tokens[0]} image), text, "
          f"item error {failed.error.code}, blocked")
    return client


def cancel_and_list(client, requests):
    other = client.batches.create(model=MODEL, src=requests[1:2], config={"display_name": "sdk-cancel"})
    check(state_name(other) == "JOB_STATE_PENDING", f"second batch: {state_name(other)}")
    client.batches.cancel(name=other.name)
    other = client.batches.get(name=other.name)
    check(state_name(other) == "JOB_STATE_CANCELLED", f"cancelled batch: {state_name(other)}")
    names = {b.display_name for b in client.batches.list()}
    check({"sdk-roundtrip", "sdk-cancel"} <= names, f"list: {names}")
    print("ok   cancel while pending, then list: both batches")


def main():
    fake, golden_dir, image = parse_args()
    golden = json.loads((golden_dir / GOLDEN).read_text())

    print(f"google-genai {genai.__version__}: batch round trip")
    requests = requests_for(golden, image)
    with running_fake(fake, script=SCRIPT) as url:
        client = roundtrip(url, requests)
        cancel_and_list(client, requests)
    print("sdk batch check: all passed")


if __name__ == "__main__":
    main()
