//! The admin listener (TCP): `/metrics` (Prometheus text), `/healthz` (the process answers),
//! `/readyz` (200 only while a valid lease is held, else 503 with the reason).

use crate::service::Service;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use std::sync::Arc;

pub async fn handle<B>(
    svc: Arc<Service>,
    req: Request<B>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let (status, ctype, body) = match req.uri().path() {
        "/metrics" => {
            svc.refresh_gauges();
            (
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                svc.metrics().render(),
            )
        }
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        "/readyz" => {
            let (status, mut body) = match svc.ready() {
                Ok(()) => (StatusCode::OK, "ready\n".to_string()),
                Err(why) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {why}\n"),
                ),
            };
            if let Some(what) = svc.issues_for() {
                body.push_str(what);
                body.push('\n');
            }
            (status, "text/plain", body)
        }
        other => (
            StatusCode::NOT_FOUND,
            "text/plain",
            format!("no such path {other:?} (paths: /metrics, /healthz, /readyz)\n"),
        ),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    Ok(resp)
}
