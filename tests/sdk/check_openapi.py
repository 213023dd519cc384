"""The HTTP API's OpenAPI document, checked by independent tools: `serve` is started against the
project's fake Gemini, its /api/openapi.json is validated with openapi-spec-validator (OpenAPI
3.1), and then every operation in the document is called with Python's http.client: each answers
with a status the document lists for it, and a JSON answer validates against the schema the
document gives for that status (openapi-schema-validator's OAS 3.1 validator; problem answers
against the Problem schema).

Run by `make test-sdk`; any difference exits non-zero (nothing is skipped).

    python check_openapi.py --fake target/debug/fake-gemini --golden src-tauri/core/tests/golden \
        --image tests/fixtures/product.jpg

(the app is the `product-extractor` binary beside the fake's; the golden bodies are not used here.)
"""

import http.client
import json
import os
import pathlib
import subprocess
import tempfile
import uuid

from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from fake import KEY, check, fail, parse_args, running_fake


def multipart(parts):
    """A multipart/form-data body of (name, filename, bytes) parts, and its content type."""
    boundary = uuid.uuid4().hex
    body = b""
    for name, filename, data in parts:
        body += (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode() + data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def request(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        conn.close()


def check_answer(doc, operation, method, path, status, content_type, body):
    """The status is one the document lists for the operation, and the body fits its schema."""
    responses = operation["responses"]
    check(str(status) in responses, f"{method.upper()} {path} answered {status}, not in the document: {body[:300]!r}")
    content = responses[str(status)]["content"]
    media = content_type.split(";")[0].strip()
    check(media in content, f"{method.upper()} {path} {status}: {media} is not the documented {list(content)}")
    schema = content[media]["schema"]
    schema = dict(schema) if isinstance(schema, dict) else {}
    # The schema's $refs point into the document's components.
    schema["components"] = doc["components"]
    errors = list(OAS31Validator(schema).iter_errors(json.loads(body)))
    check(not errors, f"{method.upper()} {path} {status}: the body does not fit its schema: {errors[:3]}")


def main():
    fake, _golden, photo = parse_args()
    app = pathlib.Path(fake).with_name("product-extractor")
    check(app.exists(), f"{app} is not built")
    with running_fake(fake) as url, tempfile.TemporaryDirectory() as data:
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")},
            "GEMINI_API_KEY": KEY,
            "GEMINI_BASE_URL": url,
            "PRODUCT_EXTRACTOR_DATA_DIR": data,
            "PRODUCT_EXTRACTOR_KEYRING_SERVICE": f"product-extractor-openapi:{data}",
        }
        server = subprocess.Popen(
            [str(app), "serve", "--listen", "127.0.0.1:0"], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            line = server.stdout.readline()
            check("http://127.0.0.1:" in line, f"serve did not start: {line!r}, exit {server.poll()}")
            port = int(line.split("http://127.0.0.1:")[1].split()[0])
            status, content_type, body = request(port, "GET", "/api/openapi.json")
            check(status == 200 and content_type.startswith("application/json"), f"openapi.json: {status}")
            doc = json.loads(body)
            validate(doc)
            check(doc["openapi"].startswith("3.1"), f"not OpenAPI 3.1: {doc['openapi']}")
            # A product first, so the routes that read one have it.
            extract = doc["paths"]["/api/products/extract"]["post"]
            form, form_type = multipart([("image", "front.jpg", photo)])
            status, content_type, body = request(
                port, "POST", "/api/products/extract?save=true", form, {"Content-Type": form_type}
            )
            check(status == 201, f"extract with save=true: {status} {body[:300]!r}")
            check_answer(doc, extract, "post", "/api/products/extract", status, content_type, body)
            answer = json.loads(body)
            ids = {"/api/items/{id}": answer["item"], "/api/products/{id}": answer["product_id"]}
            called = 0
            for path, item in doc["paths"].items():
                for method, operation in item.items():
                    concrete = path.replace("{id}", str(ids.get(path, 0)))
                    if method == "post":
                        form, form_type = multipart([("image", "again.jpg", photo)])
                        status, content_type, body = request(port, "POST", concrete, form, {"Content-Type": form_type})
                        check(status == 200, f"the same photo again: {status} {body[:300]!r}")
                        check(json.loads(body)["billed_now"] is False, "the same bytes were paid for again")
                    else:
                        status, content_type, body = request(port, method.upper(), concrete)
                    check_answer(doc, operation, method, path, status, content_type, body)
                    called += 1
            # An error answer fits the document too.
            status, content_type, body = request(port, "GET", "/api/products/987654")
            check_answer(doc, doc["paths"]["/api/products/{id}"]["get"], "get", "/api/products/{id}", status, content_type, body)
            check(status == 404, f"a missing product: {status}")
            form, form_type = multipart([("image", "notes.txt", b"just some text, not a photo")])
            status, content_type, body = request(port, "POST", "/api/products/extract", form, {"Content-Type": form_type})
            check_answer(doc, extract, "post", "/api/products/extract", status, content_type, body)
            check(status == 415, f"a text file: {status}")
            print(f"ok: OpenAPI {doc['openapi']} valid; {called} operations called, each answer as documented")
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                fail("serve did not stop within 30 s of SIGTERM")


if __name__ == "__main__":
    main()
