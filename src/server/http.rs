//! The HTTP/1.1 API on the Unix socket (works with `curl --unix-socket`).
//!
//! - `GET /id` — one ID and a newline; `GET /ids?count=N` — N IDs, one per line;
//!   `format=hex|dec|i64|b64|b32|muid|uuid|ulid` picks the text form (each layout supports some);
//!   `meta=0..255` sets sno80's metabyte; `transaction=true` asks muid128 for the IDs of one
//!   transaction (one timestamp, offsets 1..N); `Accept: application/json` gives
//!   `{"id":"…"}` / `{"ids":["…",…]}` (si53 IDs as JSON numbers).
//! - `GET /decode/<id>[?format=F]` — the ID's fields as JSON.
//! - Errors: 400 bad parameters, 404 unknown path, 405 other methods, 503 (with
//!   `Retry-After`) when no valid lease is held; the body is a one-line reason (JSON
//!   `{"error":"…"}` when JSON was asked for).

use crate::layout::{RequestOptions, TextForm};
use crate::metrics::{Interface, Outcome};
use crate::service::Service;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::time::Instant;

type Body = Full<Bytes>;

/// A response body with its status, before content negotiation.
struct Reply {
    status: StatusCode,
    text: String,
    json: bool,
}

fn fail(status: StatusCode, reason: impl std::fmt::Display, json: bool) -> Reply {
    let reason = reason.to_string().replace('\n', " ");
    let text = if json {
        serde_json::json!({ "error": reason }).to_string() + "\n"
    } else {
        format!("{reason}\n")
    };
    Reply { status, text, json }
}

/// Handles one request; never fails (hyper's error type is for I/O, not for bad input).
pub async fn handle<B>(
    svc: Arc<Service>,
    req: Request<B>,
) -> Result<Response<Body>, std::convert::Infallible> {
    let started = Instant::now();
    let json = req
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    let reply = if req.method() != Method::GET {
        fail(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {} not allowed; use GET", req.method()),
            json,
        )
    } else {
        route(
            &svc,
            req.uri().path(),
            req.uri().query().unwrap_or(""),
            json,
        )
        .await
    };
    let outcome = match reply.status {
        StatusCode::OK => Outcome::Ok,
        StatusCode::NOT_FOUND => Outcome::NotFound,
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::INTERNAL_SERVER_ERROR => Outcome::Unavailable,
        _ => Outcome::BadRequest,
    };
    let mut resp = Response::new(Full::new(Bytes::from(reply.text)));
    *resp.status_mut() = reply.status;
    let ctype = if reply.json {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    match reply.status {
        StatusCode::SERVICE_UNAVAILABLE => {
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        StatusCode::METHOD_NOT_ALLOWED => {
            resp.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET"));
        }
        _ => {}
    }
    svc.metrics()
        .request(Interface::Http, outcome, started.elapsed().as_secs_f64());
    Ok(resp)
}

/// The query parameters idcar knows, percent-decoded.
#[derive(Default)]
struct Params {
    count: Option<String>,
    format: Option<String>,
    meta: Option<String>,
    transaction: Option<String>,
}

/// Parses the query string (`application/x-www-form-urlencoded`: `%32` is `2`, `+` a space).
/// An unknown or repeated parameter is an error: a request that says two things is refused
/// rather than half-read.
fn params(query: &str) -> Result<Params, String> {
    let mut p = Params::default();
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match &*k {
            "count" => &mut p.count,
            "format" => &mut p.format,
            "meta" => &mut p.meta,
            "transaction" => &mut p.transaction,
            other => {
                return Err(format!(
                    "unknown parameter {other:?} (known: count, format, meta, transaction)"
                ))
            }
        };
        if slot.is_some() {
            return Err(format!("parameter {k:?} given more than once"));
        }
        *slot = Some(v.into_owned());
    }
    Ok(p)
}

/// A whole number written with decimal digits only (no sign, no spaces, no `0x`).
fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The request options in `p`, checked against the layout.
fn opts(svc: &Service, p: &Params) -> Result<RequestOptions, String> {
    let meta = p
        .meta
        .as_deref()
        .map(|m| {
            digits::<u8>(m).ok_or_else(|| format!("meta must be a whole number 0-255, got {m:?}"))
        })
        .transpose()?;
    let transaction = match p.transaction.as_deref() {
        None | Some("0" | "false") => false,
        Some("" | "1" | "true") => true,
        Some(t) => return Err(format!("transaction must be true or false, got {t:?}")),
    };
    let opts = RequestOptions { meta, transaction };
    svc.layout().check(&opts).map_err(|e| e.to_string())?;
    Ok(opts)
}

async fn route(svc: &Service, path: &str, query: &str, json: bool) -> Reply {
    crate::panics::request();
    let p = match params(query) {
        Ok(p) => p,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e, json),
    };
    let form = match p.format.as_deref().map(TextForm::parse).transpose() {
        Ok(f) => f,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e, json),
    };
    if let Some(f) = form {
        if !svc.layout().supports(f) {
            return fail(
                StatusCode::BAD_REQUEST,
                format!(
                    "format {} is not supported by layout {}",
                    f.name(),
                    svc.layout().name()
                ),
                json,
            );
        }
    }
    match path {
        "/id" | "/ids" => {
            let count = match (path, p.count.as_deref()) {
                ("/id", None) => 1,
                ("/id", Some(_)) => {
                    return fail(
                        StatusCode::BAD_REQUEST,
                        "/id takes no count; use /ids?count=N",
                        json,
                    )
                }
                (_, None) => {
                    return fail(
                        StatusCode::BAD_REQUEST,
                        "missing parameter count (/ids?count=N)",
                        json,
                    )
                }
                (_, Some(c)) => match digits::<u64>(c) {
                    Some(n) => n,
                    // Digits only, past u64: out of range as any count above the limit.
                    None if !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) => {
                        let max = svc.limits().max_batch;
                        return fail(
                            StatusCode::BAD_REQUEST,
                            format!("count must be between 1 and {max}, got {c}"),
                            json,
                        );
                    }
                    None => {
                        return fail(
                            StatusCode::BAD_REQUEST,
                            format!("count must be a whole number, got {c:?}"),
                            json,
                        )
                    }
                },
            };
            let opts = match opts(svc, &p) {
                Ok(a) => a,
                Err(e) => return fail(StatusCode::BAD_REQUEST, e, json),
            };
            ids(svc, count, &opts, form, path == "/id", json).await
        }
        _ if path.starts_with("/decode/") => decode(svc, &path["/decode/".len()..], form, json),
        _ => fail(
            StatusCode::NOT_FOUND,
            format!("no such path {path:?} (paths: /id, /ids?count=N, /decode/<id>)"),
            json,
        ),
    }
}

async fn ids(
    svc: &Service,
    count: u64,
    opts: &RequestOptions,
    form: Option<TextForm>,
    one: bool,
    json: bool,
) -> Reply {
    let mut raw = Vec::new();
    if let Err(e) = svc.issue(count, opts, &mut raw).await {
        let status = if e.is_unavailable() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::BAD_REQUEST
        };
        return fail(status, e, json);
    }
    let layout = svc.layout();
    let form = form.unwrap_or_else(|| layout.default_form());
    let width = layout.width();
    let quote = json && !layout.json_number(form);
    let mut text = String::with_capacity(raw.len() / width * (2 * width + 4) + 16);
    text.push_str(match (json, one) {
        (true, true) => "{\"id\":",
        (true, false) => "{\"ids\":[",
        _ => "",
    });
    for (i, id) in raw.chunks_exact(width).enumerate() {
        if json && i > 0 {
            text.push(',');
        }
        if quote {
            text.push('"');
        }
        if let Err(e) = layout.format(id, form, &mut text) {
            // The generator's IDs are valid for its layout: this would be a bug, reported as
            // one (500) rather than a panic that drops the connection.
            tracing::error!(error = %e, id = ?id, "an issued ID does not format; this is a bug");
            return fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error: an issued ID does not format: {e}"),
                json,
            );
        }
        text.push_str(match (json, quote) {
            (true, true) => "\"",
            (true, false) => "",
            (false, _) => "\n",
        });
    }
    if json {
        text.push_str(if one { "}\n" } else { "]}\n" });
    }
    Reply {
        status: StatusCode::OK,
        text,
        json,
    }
}

fn decode(svc: &Service, text: &str, form: Option<TextForm>, json: bool) -> Reply {
    let layout = svc.layout();
    match layout.parse(text, form).and_then(|raw| layout.decode(&raw)) {
        Ok(fields) => Reply {
            status: StatusCode::OK,
            text: serde_json::Value::Object(fields.to_map()).to_string() + "\n",
            json: true,
        },
        Err(e) => fail(
            StatusCode::BAD_REQUEST,
            format!("cannot decode {text:?}: {e}"),
            json,
        ),
    }
}
