//! The ceiling for the HTTP benchmark (bench/http-wrk.sh): a minimal axum server on the
//! same runtime settings, answering `GET /health` with a small constant JSON body.
//!
//!   cargo run --release -p provisioning-orchestrator --example minimal_http -- 18090

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(18090);
    let app = axum::Router::new().route(
        "/health",
        axum::routing::get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, app).await
}
