//! The control API described in OpenAPI 3.0: served at `GET /openapi.json`, printed by
//! `metronome schema openapi`, shipped as `docs/openapi.json`. The schemas of what each route
//! takes and answers are made from the types that parse and write them (schemars), so the
//! description cannot drift from the API; the routes are [`ROUTES`], the table the index
//! (`GET /`) lists too. OpenAPI 3.0 rather than 3.1: what most tools read today (Swagger UI,
//! openapi-generator, Perl's JSON::Validator, which the tests check every answer with).

use crate::streams::{StreamList, StreamSpec, StreamStatus};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// One route: its method, its path (OpenAPI's spelling, `{name}` for a stream's name), what it
/// does.
pub(crate) struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
}

/// Every route of the API.
pub(crate) const ROUTES: &[Route] = &[
    route("GET", "/", "this index of the routes"),
    route("GET", "/openapi.json", "this API described in OpenAPI 3.0"),
    route("GET", "/health", "liveness: {\"ok\":true}; needs no token"),
    route("GET", "/metrics", "the figures in Prometheus's text format"),
    route("GET", "/streams", "the server and all its streams"),
    route(
        "POST",
        "/streams",
        "add a stream: a JSON stream spec, answered 201",
    ),
    route("GET", "/streams/{name}", "one stream's status"),
    route(
        "PATCH",
        "/streams/{name}",
        "change a running stream's rate: {\"bitrate\": \"2mbit\"}, from its next GOP",
    ),
    route(
        "DELETE",
        "/streams/{name}",
        "stop and remove a stream; its last status",
    ),
];

const fn route(method: &'static str, path: &'static str, summary: &'static str) -> Route {
    Route {
        method,
        path,
        summary,
    }
}

/// `GET /`: the service and its routes (paths as people type them: `/streams/NAME`).
#[derive(Serialize, JsonSchema)]
pub(crate) struct Index {
    pub service: &'static str,
    pub routes: Vec<IndexRoute>,
}

/// One row of the index.
#[derive(Serialize, JsonSchema)]
pub(crate) struct IndexRoute {
    pub method: &'static str,
    pub path: String,
    pub what: &'static str,
}

impl Index {
    pub(crate) fn new() -> Self {
        let routes = ROUTES
            .iter()
            .map(|r| IndexRoute {
                method: r.method,
                path: r.path.replace("{name}", "NAME"),
                what: r.summary,
            })
            .collect();
        Index {
            service: "metronome control API",
            routes,
        }
    }
}

/// `GET /health`.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Health {
    /// Always true: the server answers.
    pub ok: bool,
}

/// Every error the API answers.
#[derive(Serialize, JsonSchema)]
pub(crate) struct ErrorBody {
    /// What kind of error: `invalid`, `not-found`, `exists`, `refused`, `unauthorized`,
    /// `forbidden-host`, `forbidden-origin`, `forbidden-destination`, `method-not-allowed`,
    /// `length-required`, `unsupported-media-type`, `bad-json`, `internal`, ...
    pub error: String,
    /// What happened and what to do, for a person.
    pub message: String,
}

/// The API's OpenAPI 3.0 document.
pub fn document() -> Value {
    let mut requests = SchemaSettings::openapi3().into_generator();
    let mut answers = SchemaSettings::openapi3().for_serialize().into_generator();
    let refs = Refs {
        spec: schema(&mut requests, |g| g.subschema_for::<StreamSpec>()),
        status: schema(&mut answers, |g| g.subschema_for::<StreamStatus>()),
        list: schema(&mut answers, |g| g.subschema_for::<StreamList>()),
        index: schema(&mut answers, |g| g.subschema_for::<Index>()),
        health: schema(&mut answers, |g| g.subschema_for::<Health>()),
    };
    answers.subschema_for::<ErrorBody>();
    let mut schemas = requests.take_definitions(true);
    schemas.extend(answers.take_definitions(true));
    let mut schemas = Value::Object(schemas);
    openapi_formats(&mut schemas);
    plain_descriptions(&mut schemas);
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Metronome control API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Drives `metronome serve --control ADDR` while it runs: list, \
                inspect, add and remove streams, turn a stream's rate. Every route but \
                /health needs the operator's bearer token (the server's --control-token-file); \
                Host and Origin are checked; bodies are JSON. In requests, durations are \
                strings with a unit (\"15ms\") and rates bit/s or strings (\"4mbit\"); in \
                responses, durations are numbers of µs (fields `*_us`).",
        },
        "security": [{ "bearer": [] }],
        "paths": paths(&refs),
        "components": {
            "schemas": schemas,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "responses": { "Error": {
                "description": "The request was not served: what happened and what to do.",
                "content": { "application/json": { "schema": {
                    "$ref": "#/components/schemas/ErrorBody" } } },
            } },
        },
    })
}

/// References to the schemas the routes use.
struct Refs {
    spec: Value,
    status: Value,
    list: Value,
    index: Value,
    health: Value,
}

fn schema(
    g: &mut SchemaGenerator,
    make: impl FnOnce(&mut SchemaGenerator) -> schemars::Schema,
) -> Value {
    to_value(make(g))
}

/// Rewrites every `description` in `v` without rustdoc's link syntax: the doc comments the
/// schemas are made from say ``[`Dropped::NotRtp`]`` or ``[`x`](path::to::x)``, and a reader
/// of the schema wants only `` `Dropped::NotRtp` ``.
pub fn plain_descriptions(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for (k, field) in o.iter_mut() {
                match field {
                    Value::String(s) if k == "description" => *s = without_doc_links(s),
                    _ => plain_descriptions(field),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

/// ``[`x`]`` and ``[`x`](target)`` become `` `x` ``; other text is kept as it is.
fn without_doc_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find("`]") else {
            out.push_str(&rest[start..]);
            return out;
        };
        out.push_str(&after[..end + 1]);
        rest = &after[end + 2..];
        if rest.starts_with('(') {
            if let Some(close) = rest.find(')') {
                rest = &rest[close + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Integer formats as OpenAPI 3.0 names them: schemars writes Rust's (`uint64`, `uint`, ...),
/// which OpenAPI's tools do not know; the `minimum: 0` it writes beside them stays.
fn openapi_formats(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(f)) = o.get_mut("format") {
                match f.as_str() {
                    "uint64" | "uint" | "uint32" | "int" => *f = "int64".into(),
                    "uint16" | "uint8" | "int16" | "int8" => *f = "int32".into(),
                    _ => {}
                }
            }
            o.values_mut().for_each(openapi_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(openapi_formats),
        _ => {}
    }
}

fn to_value(s: schemars::Schema) -> Value {
    s.to_value()
}

/// The paths object: each route's operation.
fn paths(r: &Refs) -> Value {
    let mut paths = Map::new();
    for route in ROUTES {
        let op = operation(route, r);
        let item = paths
            .entry(route.path)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object");
        if route.path.contains("{name}") && !item.contains_key("parameters") {
            item.insert(
                "parameters".into(),
                json!([{ "name": "name", "in": "path", "required": true,
                    "description": "The stream's name (letters, digits, -_.)",
                    "schema": { "type": "string" } }]),
            );
        }
        item.insert(route.method.to_ascii_lowercase(), op);
    }
    Value::Object(paths)
}

/// One operation: its answers, its body if it takes one.
fn operation(route: &Route, r: &Refs) -> Value {
    let json_answer = |what: &str, schema: &Value| json!({ "description": what, "content": { "application/json": { "schema": schema } } });
    let (ok, answer, errors): (&str, Value, &[u16]) = match (route.method, route.path) {
        ("GET", "/") => ("200", json_answer("The routes", &r.index), &[]),
        ("GET", "/openapi.json") => (
            "200",
            json_answer("This document", &json!({ "type": "object" })),
            &[],
        ),
        ("GET", "/health") => ("200", json_answer("The server answers", &r.health), &[]),
        ("GET", "/metrics") => (
            "200",
            json!({ "description": "Prometheus's text exposition format 0.0.4",
                "content": { "text/plain": { "schema": { "type": "string" } } } }),
            &[500],
        ),
        ("GET", "/streams") => ("200", json_answer("The streams", &r.list), &[500]),
        ("POST", "/streams") => {
            let mut a = json_answer("Added and started: its status", &r.status);
            a["headers"] = json!({ "Location": { "description": "The new stream's URL",
                "schema": { "type": "string" } } });
            ("201", a, &[409, 411, 413, 415, 500])
        }
        ("GET", _) => ("200", json_answer("Its status", &r.status), &[404, 500]),
        ("PATCH", _) => (
            "200",
            json_answer("Its status, at the new target rate", &r.status),
            &[404, 409, 411, 413, 415, 500],
        ),
        _ => (
            "200",
            json_answer("Stopped and removed: its last status", &r.status),
            &[404, 500],
        ),
    };
    let mut responses = Map::new();
    responses.insert(ok.into(), answer);
    // Every route may be answered before it runs: a request that does not parse or has no
    // Host (400), no token or another (401), a Host or Origin refused (403), a request too slow
    // (408) or with too many headers (431), a server at its connection cap (503).
    let always: &[u16] = if route.path == "/health" {
        &[400, 403, 408, 431, 503]
    } else {
        &[400, 401, 403, 408, 431, 503]
    };
    for code in always.iter().chain(errors) {
        responses.insert(
            code.to_string(),
            json!({ "$ref": "#/components/responses/Error" }),
        );
    }
    let mut op = json!({
        "summary": route.summary,
        "operationId": operation_id(route),
        "responses": responses,
    });
    if route.path == "/health" {
        op["security"] = json!([]);
    }
    if let Some(body) = request_body(route, r) {
        op["requestBody"] = body;
    }
    op
}

/// What a route takes: a stream spec, or a rate.
fn request_body(route: &Route, r: &Refs) -> Option<Value> {
    let schema = match route.method {
        "POST" => r.spec.clone(),
        "PATCH" => json!({
            "type": "object",
            "required": ["bitrate"],
            "additionalProperties": false,
            "properties": { "bitrate": {
                "description": "bit/s, or with a unit: \"2mbit\"",
                "anyOf": [ { "type": "integer", "minimum": 0 }, { "type": "string" } ],
            } },
        }),
        _ => return None,
    };
    Some(json!({ "required": true,
        "content": { "application/json": { "schema": schema } } }))
}

/// `getStreams`, `postStreams`, `patchStream`, ...
fn operation_id(route: &Route) -> String {
    let noun = match route.path {
        "/" => "Index",
        "/openapi.json" => "OpenApi",
        "/health" => "Health",
        "/metrics" => "Metrics",
        "/streams" => "Streams",
        _ => "Stream",
    };
    format!("{}{noun}", route.method.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_lose_rustdoc_link_syntax_and_keep_the_rest() {
        assert_eq!(
            without_doc_links("dropped ([`Dropped::NotRtp`]) or [`f`](super::f), [a] `b`"),
            "dropped (`Dropped::NotRtp`) or `f`, [a] `b`"
        );
        assert_eq!(without_doc_links("an open [`x"), "an open [`x");
        let mut v = serde_json::json!({"properties": {"a": {"description": "[`X`]"}}});
        plain_descriptions(&mut v);
        assert_eq!(v["properties"]["a"]["description"], "`X`");
    }

    /// Every schema a `$ref` names is in the document, and the routes are all there.
    #[test]
    fn every_reference_resolves_and_every_route_is_described() {
        let doc = document();
        let text = doc.to_string();
        for (i, _) in text.match_indices("\"$ref\":\"") {
            let rest = &text[i + 8..];
            let target = &rest[..rest.find('"').unwrap()];
            let pointer = target.strip_prefix('#').expect("a local reference");
            assert!(doc.pointer(pointer).is_some(), "{target} does not resolve");
        }
        for r in ROUTES {
            let op = &doc["paths"][r.path][r.method.to_ascii_lowercase()];
            assert!(
                op["responses"].is_object(),
                "{} {} missing",
                r.method,
                r.path
            );
        }
        assert!(
            doc["components"]["schemas"]["StreamSpec"]["properties"]["destination"].is_object()
        );
    }
}
