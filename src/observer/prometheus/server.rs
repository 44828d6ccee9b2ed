//! The `/metrics` endpoint: a minimal HTTP/1 server (hyper 1) on one address, serving one
//! application's exposition. It runs as a task of the application's runtime and stops with its
//! run: [`Server::stop`] closes the listener and every open connection, so the port is free
//! again when it returns.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use super::text;
use crate::observer::MetricsServer;

/// What the endpoint serves: the exposition, rendered per scrape.
pub(super) type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// How long a connection may take to send its request head (a stuck client holds a task, not
/// the endpoint).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The pause after a failed accept (out of file descriptors, say) before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A running endpoint. Dropped without [`stop`](MetricsServer::stop) (a run that panicked), it
/// aborts its task, which closes the listener and the connections all the same.
pub(super) struct Server {
    local_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Server {
    /// Binds `address` (a port taken is the OS error, LIFE-17) and starts serving `render` at
    /// `/metrics`.
    pub(super) async fn start(address: &str, render: Render) -> std::io::Result<Server> {
        let listener = TcpListener::bind(address).await?;
        let local_addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(serve(listener, render, stopped));
        tracing::info!(%local_addr, "serving metrics at /metrics");
        Ok(Server { local_addr, stop: Some(stop), task: Some(task) })
    }
}

impl MetricsServer for Server {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn stop(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        let local_addr = self.local_addr;
        let stop = self.stop.take();
        let task = self.task.take();
        Box::pin(async move {
            if let Some(stop) = stop {
                let _ = stop.send(());
            }
            // The task ends by itself once told; it drops the listener and aborts the
            // connections before it returns.
            if let Some(task) = task {
                let _ = task.await;
            }
            tracing::info!(%local_addr, "metrics endpoint stopped");
        })
    }
}

async fn serve(listener: TcpListener, render: Render, mut stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let render = render.clone();
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            let render = render.clone();
                            async move { Ok::<_, Infallible>(respond(&request, &*render)) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(HEADER_READ_TIMEOUT)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "metrics endpoint: accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listener);
    connections.shutdown().await;
}

/// `GET /metrics` (and `HEAD`): the exposition. Anything else: 404 or 405.
fn respond(request: &Request<Incoming>, render: &(dyn Fn() -> String + Send + Sync)) -> Response<Full<Bytes>> {
    let mut response = if request.uri().path() != "/metrics" {
        let mut response = Response::new(Full::new(Bytes::from_static(b"not found: metrics are at /metrics\n")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        response
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    } else {
        let mut response = Response::new(Full::new(Bytes::from(render())));
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(text::CONTENT_TYPE));
        return response;
    };
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}
