"""Google's official Python SDK (google-genai) against the project's fake Gemini.

1. A structured-output generateContent with an image, per model family (2.5 Flash with a thinking
   budget, 3 Flash through the alias with a thinking level, media resolution set): the SDK sends
   it, the fake accepts it, and the SDK parses the answer (text, JSON, finish reason, usage).
2. A per-day quota error: the SDK raises its ClientError with code 429, RESOURCE_EXHAUSTED and the
   QuotaFailure naming the per-day window.
3. A blocked answer and a truncated one: the SDK parses both, usage included.
4. Our client's request bodies (the golden files of src-tauri/core/tests/gemini_wire.rs) are
   loaded by the SDK's own request types (GenerateContentConfig, Content; unknown fields are an
   error there), turned back into a REST body by the SDK's own converter, and that body is ours,
   field for field; then the SDK sends each to the fake for its model, which checks it as the API
   does (never both thinking fields, what the family accepts).

Run by `make test-sdk`; any difference exits non-zero (nothing is skipped).

    python check_fake.py --fake target/debug/fake-gemini --golden src-tauri/core/tests/golden \
        --image tests/fixtures/product.jpg
"""

import base64
import json
import pathlib

from google import genai
from google.genai import errors, types
from google.genai import models as sdk_models

from fake import check, client_for, fail, parse_args, running_fake

# The model each golden body is for (an unknown family's body goes to a model of another family:
# it must suit any model).
GOLDEN_MODELS = {
    "request_gemini-2.5-flash.json": "gemini-2.5-flash",
    "request_gemini-3-flash.json": "gemini-3-flash-preview",
    "request_unknown-model.json": "gemini-2.5-flash-lite",
}


def load_golden(directory):
    files = sorted(pathlib.Path(directory).glob("request_*.json"))
    check(len(files) >= 3, f"expected the three golden request bodies in {directory}, found {files}")
    return [(f.name, json.loads(f.read_text())) for f in files]


def structured_output_with_image(url, image, schema):
    client = client_for(url)
    cases = [
        ("gemini-2.5-flash", types.ThinkingConfig(thinking_budget=0), types.MediaResolution.MEDIA_RESOLUTION_LOW),
        ("gemini-flash-latest", types.ThinkingConfig(thinking_level=types.ThinkingLevel.MINIMAL), None),
        ("gemini-2.5-pro", types.ThinkingConfig(thinking_budget=128), types.MediaResolution.MEDIA_RESOLUTION_HIGH),
    ]
    for model, thinking, resolution in cases:
        response = client.models.generate_content(
            model=model,
            contents=[types.Part.from_bytes(data=image, mime_type="image/jpeg"), "Extract the product shown in this photo."],
            config=types.GenerateContentConfig(
                system_instruction="You extract product data from a photo.",
                response_mime_type="application/json",
                response_json_schema=schema,
                max_output_tokens=8192,
                thinking_config=thinking,
                media_resolution=resolution,
            ),
        )
        check(isinstance(response, types.GenerateContentResponse), f"{model}: {type(response)}")
        product = json.loads(response.text)
        check(isinstance(product.get("name"), str) and product["name"], f"{model}: no name in {product}")
        check(list(product)[0] == "name", f"{model}: the answer follows the schema's key order: {list(product)}")
        check(response.parsed == product, f"{model}: the SDK parsed the JSON answer itself: {response.parsed!r}")
        candidate = response.candidates[0]
        check(candidate.finish_reason == types.FinishReason.STOP, f"{model}: {candidate.finish_reason}")
        usage = response.usage_metadata
        check(usage.prompt_token_count > 258 and usage.total_token_count >= usage.prompt_token_count, f"{model}: {usage}")
        # An alias answers with the model it stands for (what models.get names).
        answered = "gemini-3-flash-preview" if model == "gemini-flash-latest" else model
        check(response.model_version == answered, f"{model}: modelVersion {response.model_version}")
        print(f"ok   structured output + image on {model}: {product['name']!r}, {usage.prompt_token_count} in")
    # The alias, as the SDK sees models.get.
    info = client.models.get(model="gemini-flash-latest")
    check(info.thinking is True, f"models.get thinking: {info}")
    print(f"ok   models.get gemini-flash-latest: version {info.version}, thinking {info.thinking}")


def per_day_quota(url, image):
    client = client_for(url)
    try:
        client.models.generate_content(
            model="gemini-2.5-flash",
            contents=[types.Part.from_bytes(data=image, mime_type="image/jpeg"), "Extract the product."],
        )
    except errors.ClientError as e:
        check(e.code == 429, f"code {e.code}")
        check(e.status == "RESOURCE_EXHAUSTED", f"status {e.status}")
        details = e.details["error"]["details"]
        quota = [d for d in details if d["@type"].endswith("google.rpc.QuotaFailure")]
        check(quota and "PerDay" in quota[0]["violations"][0]["quotaId"], f"QuotaFailure: {details}")
        print(f"ok   per-day quota: ClientError {e.code} {e.status}, quotaId {quota[0]['violations'][0]['quotaId']}")
        return
    fail("a per-day quota answer did not raise ClientError")


def billed_failures(url, image):
    client = client_for(url)
    contents = [types.Part.from_bytes(data=image, mime_type="image/jpeg"), "Extract the product."]
    blocked = client.models.generate_content(model="gemini-2.5-flash", contents=contents)
    check(not blocked.candidates, f"blocked: {blocked.candidates}")
    check(blocked.prompt_feedback.block_reason == types.BlockedReason.PROHIBITED_CONTENT, f"{blocked.prompt_feedback}")
    check(blocked.usage_metadata.prompt_token_count > 0, "a blocked prompt is billed")
    cut = client.models.generate_content(
        model="gemini-2.5-flash", contents=contents, config=types.GenerateContentConfig(max_output_tokens=1000)
    )
    check(cut.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS, f"{cut.candidates[0].finish_reason}")
    check(cut.usage_metadata.thoughts_token_count == 1000, f"{cut.usage_metadata}")
    check(cut.text is None, f"no answer text: {cut.text!r}")
    print("ok   blocked and truncated answers parse, usage included")


def camel(name):
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def normalized(body):
    """The body with every field name in lowerCamelCase (proto3 JSON takes both spellings and the
    SDK leaves some nested names in snake_case), inline data decoded (the SDK may pick another
    base64 alphabet) and enum values in upper case (the API and the SDK match them without regard
    to case). The JSON schema is data: kept verbatim."""
    if isinstance(body, list):
        return [normalized(item) for item in body]
    if not isinstance(body, dict):
        return body
    out = {}
    for key, value in body.items():
        name = camel(key)
        if name == "responseJsonSchema":
            out[name] = value
        elif name == "inlineData":
            value = {camel(k): v for k, v in value.items()}
            data = value["data"].replace("+", "-").replace("/", "_")
            value["data"] = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).hex()
            out[name] = value
        elif name in ("thinkingLevel", "mediaResolution"):
            out[name] = value.upper()
        else:
            out[name] = normalized(value)
    return out


def golden_bodies_load_into_sdk_types(golden, url):
    client = client_for(url)
    api_client = client._api_client
    for name, body in golden:
        check(name in GOLDEN_MODELS, f"{name}: no model for this golden body in GOLDEN_MODELS")
        # Our top-level fields: the request has no others.
        check(set(body) == {"systemInstruction", "contents", "generationConfig"}, f"{name}: {sorted(body)}")
        contents = [types.Content.model_validate(c) for c in body["contents"]]
        system = types.Content.model_validate(body["systemInstruction"])
        # The REST generationConfig, as the SDK's REST type (extra fields forbidden).
        generation = types.GenerationConfig.model_validate(body["generationConfig"])
        check(generation.max_output_tokens == body["generationConfig"]["maxOutputTokens"], name)
        # The same settings as the SDK's user-facing config, then the SDK's own REST body.
        config = types.GenerateContentConfig.model_validate({**body["generationConfig"], "systemInstruction": system})
        params = types._GenerateContentParameters(model="m", contents=contents, config=config)
        request = sdk_models._GenerateContentParameters_to_mldev(api_client, params, None, params)
        request.pop("_url", None)
        request = genai._common.encode_unserializable_types(genai._common.convert_to_dict(request))
        if normalized(request) != normalized(body):
            fail(f"{name}: the SDK builds another body:\n{json.dumps(request, indent=1)[:3000]}")
        thinking = generation.thinking_config
        check(
            thinking is None or (thinking.thinking_budget is None) != (thinking.thinking_level is None),
            f"{name}: exactly one of thinkingBudget and thinkingLevel: {thinking}",
        )
        sent = client.models.generate_content(model=GOLDEN_MODELS[name], contents=contents, config=config)
        check(json.loads(sent.text).get("name"), f"{name}: sent by the SDK to {GOLDEN_MODELS[name]}: {sent.text!r}")
        print(
            f"ok   {name}: loaded by the SDK's types and rebuilt identically "
            f"(thinking {thinking and thinking.model_dump(exclude_none=True)}, "
            f"temperature {generation.temperature}, media {generation.media_resolution})"
        )
    # The SDK's types refuse what the API refuses: an unknown field.
    try:
        types.GenerationConfig.model_validate({"maxOutputTokens": 1, "responseFormat": "json"})
    except Exception:  # pydantic.ValidationError
        print("ok   the SDK's types refuse an unknown field")
    else:
        fail("the SDK accepted an unknown field: the golden check would prove nothing")


def main():
    fake, golden_dir, image = parse_args()
    golden = load_golden(golden_dir)
    schema = golden[0][1]["generationConfig"]["responseJsonSchema"]

    print(f"google-genai {genai.__version__}")
    with running_fake(fake) as url:
        structured_output_with_image(url, image, schema)
    with running_fake(fake, script=["daily_quota"]) as url:
        per_day_quota(url, image)
    with running_fake(fake, script=["blocked:PROHIBITED_CONTENT", "thinking_exhausted"]) as url:
        billed_failures(url, image)
    with running_fake(fake) as url:
        golden_bodies_load_into_sdk_types(golden, url)
    print("sdk check: all passed")


if __name__ == "__main__":
    main()
