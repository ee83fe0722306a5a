//! The control API's routes: from a parsed [`Request`] to a JSON [`Response`].

use super::http::{echo, Request, Response};
use super::openapi::{Health, Index};
use super::{ControlAccess, ControlError, StreamControl};
use crate::streams::StreamSpec;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Answers one request: if `access` lets it in, from its route.
pub(crate) fn route(
    req: &Request,
    control: &dyn StreamControl,
    access: &ControlAccess,
) -> Response {
    let path = match req.path.strip_suffix('/') {
        Some(p) if !p.is_empty() => p,
        _ => req.path.as_str(),
    };
    if let Err(refused) = access.admit(req, path) {
        return refused;
    }
    let method = req.method.as_str();
    match path {
        "/" => match method {
            "GET" => Response::json(200, &Index::new()),
            _ => not_allowed(method, path, "GET"),
        },
        "/openapi.json" => match method {
            "GET" => Response::json(200, &super::openapi::document()),
            _ => not_allowed(method, path, "GET"),
        },
        "/metrics" => match method {
            "GET" => guarded(|| Ok(control.metrics())).map_or_else(
                |e| e,
                |t| Response::text(200, "text/plain; version=0.0.4; charset=utf-8", t),
            ),
            _ => not_allowed(method, path, "GET"),
        },
        "/health" => match method {
            "GET" => Response::json(200, &Health { ok: true }),
            _ => not_allowed(method, path, "GET"),
        },
        "/streams" => match method {
            "GET" => guarded(|| Ok(control.list())).map_or_else(|e| e, |v| Response::json(200, &v)),
            "POST" => add(req, control, access),
            _ => not_allowed(method, path, "GET, POST"),
        },
        _ => match path.strip_prefix("/streams/") {
            Some(name) if !name.is_empty() && !name.contains('/') => match method {
                "GET" => match guarded(|| Ok(control.get(name))) {
                    Ok(Some(v)) => Response::json(200, &v),
                    Ok(None) => no_such_stream(name),
                    Err(e) => e,
                },
                "DELETE" => match guarded(|| control.remove(name)) {
                    Ok(v) => Response::json(200, &v),
                    Err(e) => e,
                },
                "PATCH" => set_rate(req, name, control),
                _ => not_allowed(method, "/streams/NAME", "GET, PATCH, DELETE"),
            },
            _ => Response::error(
                404,
                "not-found",
                format!(
                    "there is no route '{}'; GET / lists the routes",
                    echo(&req.path)
                ),
            ),
        },
    }
}

/// The checks every JSON body passes: a length, and JSON as its content type (a browser sends
/// a body without `Content-Type: application/json` cross-site without asking first).
fn json_body_allowed(req: &Request, what: &str) -> Result<(), Response> {
    if !req.has_length {
        return Err(Response::error(
            411,
            "length-required",
            format!("{what} needs a Content-Length header giving the JSON body's size"),
        ));
    }
    let ct = req.content_type.as_deref().unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/json") {
        let given = match ct {
            "" => "none".to_string(),
            ct => format!("'{}'", echo(ct)),
        };
        return Err(Response::error(
            415,
            "unsupported-media-type",
            format!(
                "the body must be JSON, sent with 'Content-Type: application/json' (given: {given})"
            ),
        ));
    }
    Ok(())
}

/// `PATCH /streams/NAME` with `{"bitrate": "2mbit"}` (or bit/s as a number): turns the
/// stream's rate knob.
fn set_rate(req: &Request, name: &str, control: &dyn StreamControl) -> Response {
    if let Err(r) = json_body_allowed(req, "PATCH /streams/NAME") {
        return r;
    }
    let usage = "send {\"bitrate\": \"2mbit\"} (or bit/s as a number): the only field a \
                 running stream changes";
    let body: serde_json::Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            return Response::error(
                400,
                "bad-json",
                format!("the body is not valid JSON: {e}; {usage}"),
            )
        }
    };
    let fields = body.as_object().map(|o| o.len()).unwrap_or(0);
    let bitrate = match body.get("bitrate") {
        Some(serde_json::Value::Number(n)) if fields == 1 => n
            .as_u64()
            .ok_or_else(|| format!("bitrate {n} is not a whole number of bit/s")),
        Some(serde_json::Value::String(s)) if fields == 1 => crate::streams::parse_bitrate(s),
        _ => Err(usage.to_string()),
    };
    match bitrate {
        Ok(bps) => match guarded(|| control.set_rate(name, bps)) {
            Ok(v) => Response::json(200, &v),
            Err(e) => e,
        },
        Err(why) => Response::error(400, "invalid", why),
    }
}

/// `POST /streams`: parse, validate, check its destinations, add.
fn add(req: &Request, control: &dyn StreamControl, access: &ControlAccess) -> Response {
    if let Err(r) = json_body_allowed(req, "POST /streams") {
        return r;
    }
    let spec: StreamSpec = match serde_json::from_slice(&req.body) {
        Ok(spec) => spec,
        Err(e) if e.is_data() => {
            return Response::error(
                400,
                "invalid",
                format!("the body is not a valid stream spec: {e}"),
            )
        }
        Err(e) => {
            return Response::error(
                400,
                "bad-json",
                format!(
                    "the body is not valid JSON: {e}; send a stream spec such as \
                     {{\"name\":\"cam1\",\"destination\":\"rtp://127.0.0.1:5004\"}}"
                ),
            )
        }
    };
    if let Err(e) = spec.validate() {
        return Response::error(400, "invalid", e.0);
    }
    if let Err(refused) = access.check_destinations(&spec) {
        return refused;
    }
    let name = spec.name.clone();
    match guarded(|| control.add(spec)) {
        // The name passed `validate`: letters, digits and `-_.` only, safe in a header.
        Ok(v) => Response::json(201, &v).with_header("Location", format!("/streams/{name}")),
        Err(e) => e,
    }
}

/// Runs a [`StreamControl`] call; its errors and panics become responses.
fn guarded<T>(call: impl FnOnce() -> Result<T, ControlError>) -> Result<T, Response> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Response::error(e.status(), e.kind(), e.message())),
        Err(_) => Err(Response::error(
            500,
            "internal",
            "the server failed while handling this request; see its log",
        )),
    }
}

fn not_allowed(method: &str, path: &str, allow: &'static str) -> Response {
    Response::error(
        405,
        "method-not-allowed",
        format!("{} is not allowed on {path}; use {allow}", echo(method)),
    )
    .with_header("Allow", allow)
}

fn no_such_stream(name: &str) -> Response {
    Response::error(
        404,
        "not-found",
        format!(
            "there is no stream named '{}'; GET /streams lists them",
            echo(name)
        ),
    )
}
