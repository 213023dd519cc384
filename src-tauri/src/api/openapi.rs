//! The API's one route table ([`table`]): each route's method, path, handler, parameters and
//! answers, from which both the router ([`routes`]) and the OpenAPI 3.1 document ([`document`])
//! are made. The schemas are generated from the handlers' own types (schemars; an OpenAPI 3.1
//! schema is a JSON Schema 2020-12), never written by hand.

use axum::routing::{get, post, MethodRouter};
use axum::Router;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{json, Map, Value};

use super::handlers as h;
use super::problem::{Problem, PROBLEM_JSON};
use super::Api;

/// One answer of a route: its status, what it means, and its body's schema (JSON, or problem
/// JSON for an error).
struct Answer {
    status: u16,
    description: &'static str,
    body: Option<fn(&mut SchemaGenerator) -> Schema>,
}

/// A parameter in the path or the query.
struct Param {
    name: &'static str,
    place: &'static str,
    required: bool,
    description: &'static str,
    schema: fn(&mut SchemaGenerator) -> Schema,
}

/// A route.
pub struct Route {
    method: &'static str,
    pub path: &'static str,
    operation_id: &'static str,
    summary: &'static str,
    tag: &'static str,
    params: Vec<Param>,
    /// The multipart body of `image` parts.
    photos: bool,
    answers: Vec<Answer>,
    handler: MethodRouter<Api>,
}

fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// A JSON object whose shape another spec gives (Spring Boot's actuator, OpenAPI itself).
fn object(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "object"})
}

fn ok(description: &'static str, body: fn(&mut SchemaGenerator) -> Schema) -> Answer {
    Answer { status: 200, description, body: Some(body) }
}

fn problem(status: u16, description: &'static str) -> Answer {
    Answer { status, description, body: None }
}

fn path_id(description: &'static str) -> Param {
    Param { name: "id", place: "path", required: true, description, schema: schema::<i64> }
}

fn query<T: JsonSchema>(name: &'static str, description: &'static str) -> Param {
    Param { name, place: "query", required: false, description, schema: schema::<T> }
}

/// Every route of the API.
pub fn table() -> Vec<Route> {
    vec![
        Route {
            method: "post",
            path: "/api/products/extract",
            operation_id: "extractProduct",
            summary: "Extract a product from its photos (each `image` part, front first), through the app's queue",
            tag: "extraction",
            params: vec![
                query::<bool>("save", "Save at once and answer 201 with the product (default: the proposal waits for review in the window)"),
                query::<bool>("wait", "Wait for the answer (default true); false answers 202 with the queued item at once"),
            ],
            photos: true,
            answers: vec![
                ok("The proposal (waiting for review), or the one saved for the same bytes before", schema::<h::Extraction>),
                Answer { status: 201, description: "Saved (`save=true`); `Location` names the product", body: Some(schema::<h::Extraction>) },
                Answer { status: 202, description: "Queued (`wait=false`); `Location` names the item", body: Some(schema::<h::Accepted>) },
                problem(400, "No `image` part, too many photos, or not multipart/form-data"),
                problem(401, "A token is set and the request does not carry it"),
                problem(408, "The photos did not arrive within `[server] body_timeout`"),
                problem(413, "A photo over `[image] max_file_bytes`, or the body over the photos a product may have"),
                problem(415, "A part whose bytes are not a photo's (JPEG, PNG, WebP, GIF)"),
                problem(422, "A photo that cannot be used (damaged, too many pixels), or a save refused for an invalid field"),
                problem(429, "The bulkhead stayed full (`bulkhead_full`), a rate limit, Gemini's quota, or the daily budget; `Retry-After`"),
                problem(502, "Gemini failed (`gemini_api_error`; `kind` says how, e.g. `gemini_auth`)"),
                problem(503, "The circuit breaker is open (`gemini_circuit_open`, no call made; `Retry-After` = the next probe)"),
                problem(504, "Gemini did not answer within the time limiter's timeout"),
                problem(507, "The catalog's disk is full"),
            ],
            handler: post(h::extract),
        },
        Route {
            method: "get",
            path: "/api/items/{id}",
            operation_id: "getItem",
            summary: "A queued item's state and, once it has one, its result or error",
            tag: "extraction",
            params: vec![path_id("The item (`item` of an extraction's answer)")],
            photos: false,
            answers: vec![ok("The item", schema::<h::Item>), problem(404, "No such item")],
            handler: get(h::item),
        },
        Route {
            method: "get",
            path: "/api/products",
            operation_id: "listProducts",
            summary: "The catalog, newest first, or the products matching a search",
            tag: "catalog",
            params: vec![
                query::<String>("q", "Words to search for: each must start a word of the product (case and accents ignored)"),
                query::<u32>("limit", "Products per page, 1 to 500 (default 50)"),
                query::<String>("cursor", "Where the previous page ended (its `next_cursor`)"),
            ],
            photos: false,
            answers: vec![ok("A page of products", schema::<h::ProductsPage>), problem(400, "A cursor no page gave")],
            handler: get(h::products),
        },
        Route {
            method: "get",
            path: "/api/products/{id}",
            operation_id: "getProduct",
            summary: "A saved product, with Gemini's proposal beside what staff saved",
            tag: "catalog",
            params: vec![path_id("The product")],
            photos: false,
            answers: vec![
                ok("The product", schema::<pe_core::catalog::ProductRecord>),
                problem(404, "No such product"),
            ],
            handler: get(h::product),
        },
        Route {
            method: "get",
            path: "/api/usage",
            operation_id: "getUsage",
            summary: "Tokens and cost of the Gemini calls, per local day and model",
            tag: "catalog",
            params: vec![query::<String>("since", "The first local day, YYYY-MM-DD (default: 30 days ago)")],
            photos: false,
            answers: vec![ok("The usage", schema::<h::UsageReport>), problem(400, "`since` is not a date")],
            handler: get(h::usage),
        },
        Route {
            method: "get",
            path: "/actuator/circuitbreakers",
            operation_id: "getCircuitBreakers",
            summary: "The circuit breaker in Spring Boot actuator's shape (what `breaker --json` prints)",
            tag: "actuator",
            params: vec![],
            photos: false,
            answers: vec![ok("The breakers by name", object)],
            handler: get(h::circuit_breakers),
        },
        Route {
            method: "get",
            path: "/actuator/circuitbreakerevents",
            operation_id: "getCircuitBreakerEvents",
            summary: "The breaker's recent events, oldest first (Resilience4j's event list)",
            tag: "actuator",
            params: vec![],
            photos: false,
            answers: vec![ok("The events", object)],
            handler: get(h::circuit_breaker_events),
        },
        Route {
            method: "get",
            path: "/actuator/health",
            operation_id: "getHealth",
            summary: "UP, or DOWN (503) while the breaker is open, as Spring's health indicator",
            tag: "actuator",
            params: vec![],
            photos: false,
            answers: vec![ok("UP (or UNKNOWN while half open)", object), problem(503, "DOWN: the breaker is open")],
            handler: get(h::health),
        },
        Route {
            method: "get",
            path: "/api/openapi.json",
            operation_id: "getOpenApi",
            summary: "This document",
            tag: "meta",
            params: vec![],
            photos: false,
            answers: vec![ok("The OpenAPI 3.1 document", object)],
            handler: get(h::openapi_document),
        },
    ]
}

/// The router of [`table`].
pub fn routes() -> Router<Api> {
    table().into_iter().fold(Router::new(), |router, route| router.route(route.path, route.handler))
}

/// The OpenAPI 3.1 document of [`table`].
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator();
    let problem_schema = generator.subschema_for::<Problem>();
    let mut paths = Map::new();
    for route in table() {
        let mut responses = Map::new();
        for answer in &route.answers {
            let (media, schema) = match answer.body {
                Some(body) => ("application/json", body(&mut generator)),
                None => (PROBLEM_JSON, problem_schema.clone()),
            };
            responses.insert(
                answer.status.to_string(),
                json!({"description": answer.description, "content": {media: {"schema": schema}}}),
            );
        }
        let parameters: Vec<Value> = route
            .params
            .iter()
            .map(|p| {
                json!({
                    "name": p.name,
                    "in": p.place,
                    "required": p.required,
                    "description": p.description,
                    "schema": (p.schema)(&mut generator),
                })
            })
            .collect();
        let mut operation = json!({
            "operationId": route.operation_id,
            "summary": route.summary,
            "tags": [route.tag],
            "responses": responses,
        });
        if !parameters.is_empty() {
            operation["parameters"] = Value::Array(parameters);
        }
        if route.photos {
            operation["requestBody"] = json!({
                "required": true,
                "content": {"multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["image"],
                        "properties": {"image": {
                            "type": "array",
                            "description": "The product's photos, front first (a part named `image` each)",
                            "items": {"type": "string", "contentMediaType": "application/octet-stream"},
                        }},
                    },
                    "encoding": {"image": {"contentType": "image/jpeg, image/png, image/webp, image/gif"}},
                }},
            });
        }
        let entry = paths.entry(route.path.to_string()).or_insert_with(|| json!({}));
        entry[route.method] = operation;
    }
    let schemas = generator.take_definitions(true);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "product-extractor",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Extract product data from photos with Gemini, through the same queue, circuit breaker, \
                            bulkhead, budget and cost meter as the app's window and command line.",
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        "servers": [{"url": "/"}],
        "tags": [
            {"name": "extraction", "description": "Photos in, products out"},
            {"name": "catalog", "description": "The saved products and what the calls cost"},
            {"name": "actuator", "description": "The circuit breaker, as Spring Boot's actuator shows it"},
            {"name": "meta", "description": "This document"},
        ],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "Needed when a token is set (`serve token set`, or [server] token_file)"}},
        },
        // Optional: needed once a token is set.
        "security": [{}, {"bearer": []}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_in_the_document_once_with_its_schemas_resolvable() {
        let doc = document();
        let paths = doc["paths"].as_object().unwrap();
        let routes = table();
        let operations: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(operations, routes.len());
        for route in &routes {
            assert!(paths[route.path][route.method].is_object(), "{} {}", route.method, route.path);
        }
        // Every $ref points into components/schemas, and each exists.
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for piece in text.split("\"$ref\":\"").skip(1) {
            let target = piece.split('"').next().unwrap();
            let name = target
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("a $ref outside components: {target}"));
            assert!(schemas.contains_key(name), "{name} is referenced but not defined");
        }
        assert!(
            schemas.contains_key("Product") && schemas.contains_key("Problem") && schemas.contains_key("Extraction")
        );
    }
}
