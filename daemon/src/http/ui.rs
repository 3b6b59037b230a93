//! The web dashboard (`/ui/`): static files compiled into the binary (no CDN, nothing
//! fetched at run time), served without a token: they hold no data. The page signs in
//! with a token and reads everything through the same REST routes as any client, so the
//! roles are enforced where they always are, on each route.
//!
//! Every path under `/ui/` but the assets is the page itself, so that each view's URL
//! (`/ui/tasks/42`, `/ui/workflows/12`) loads as a deep link. The answers forbid framing,
//! inline scripts and any origin but the daemon's own (`Content-Security-Policy`).

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// One file of the dashboard.
struct Asset {
    /// Its name under `/ui/assets/`.
    name: &'static str,
    /// Its media type.
    media_type: &'static str,
    /// Its bytes.
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            media_type: $type,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/assets/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every asset; nothing else is served under `/ui/assets/`.
const ASSETS: &[Asset] = &[
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("logtail.js", JS),
    asset!("overview.js", JS),
    asset!("tasks.js", JS),
    asset!("task.js", JS),
    asset!("workflows.js", JS),
    asset!("workflow.js", JS),
    asset!("graph.js", JS),
    asset!("envs.js", JS),
    asset!("audit.js", JS),
    asset!("icon.svg", "image/svg+xml"),
];

/// The page: every view starts from it.
const INDEX: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/index.html"));

/// What the browser may load and run for the dashboard: its own files and its own API.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The dashboard's routes: `/` and `/ui` go to `/ui/`, the assets, and the page for
/// every other path under `/ui/`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/", get(page))
        .route("/ui/assets/{name}", get(asset))
        .route("/ui/{*view}", get(page))
}

/// The page.
async fn page() -> Response {
    answer(StatusCode::OK, "text/html; charset=utf-8", INDEX)
}

/// An asset by name, or a 404.
async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => answer(StatusCode::OK, asset.media_type, asset.body),
        None => answer(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            b"no such file of the dashboard",
        ),
    }
}

fn answer(status: StatusCode, media_type: &'static str, body: &'static [u8]) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    let set = |v: &'static str| HeaderValue::from_static(v);
    headers.insert(header::CONTENT_TYPE, set(media_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, set(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, set("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, set("DENY"));
    headers.insert(header::REFERRER_POLICY, set("no-referrer"));
    // The files change with the binary: a browser asks again (and gets them from its
    // cache only while the daemon is the same).
    headers.insert(header::CACHE_CONTROL, set("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    use super::*;

    async fn get(path: &str) -> (StatusCode, String, String) {
        let request = Request::builder().uri(path).body(Body::empty()).unwrap();
        let answer = router::<()>().oneshot(request).await.unwrap();
        let status = answer.status();
        let media = answer
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        (status, media, String::from_utf8_lossy(&body).into_owned())
    }

    /// Deep links get the page, assets their own type, anything else under assets (a
    /// path that climbs out included) a 404, and `/` goes to the page.
    #[tokio::test]
    async fn views_get_the_page_and_only_the_assets_are_files() {
        for path in [
            "/ui/",
            "/ui/tasks/42",
            "/ui/workflows/12?step=a",
            "/ui/audit",
        ] {
            let (status, media, body) = get(path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert!(media.starts_with("text/html"), "{path}: {media}");
            assert!(body.contains("assets/app.js"), "{path}");
        }
        let (status, media, body) = get("/ui/assets/app.js").await;
        assert_eq!((status, media.as_str()), (StatusCode::OK, JS));
        assert!(body.contains("import"));
        for path in [
            "/ui/assets/nope.js",
            "/ui/assets/..%2F..%2FCargo.toml",
            "/ui/assets/%2e%2e%2findex.html",
        ] {
            assert_eq!(get(path).await.0, StatusCode::NOT_FOUND, "{path}");
        }
        assert_eq!(get("/").await.0, StatusCode::SEE_OTHER);
    }

    /// Every file the page or a script names is one the dashboard serves.
    #[test]
    fn every_file_named_is_served() {
        let page = std::str::from_utf8(INDEX).unwrap();
        let texts = ASSETS
            .iter()
            .filter(|a| a.name.ends_with(".js"))
            .map(|a| std::str::from_utf8(a.body).unwrap())
            .chain([page]);
        for text in texts {
            let named = text.match_indices("./").map(|(at, _)| at + 2);
            let absolute = text.match_indices("/ui/assets/").map(|(at, _)| at + 11);
            for at in named.chain(absolute) {
                let rest = &text[at..];
                let Some(end) = rest.find(['\'', '"']) else {
                    continue;
                };
                let name = &rest[..end];
                if name.ends_with(".js") || name.ends_with(".css") || name.ends_with(".svg") {
                    assert!(
                        ASSETS.iter().any(|a| a.name == name),
                        "{name} is named but not served"
                    );
                }
            }
        }
    }
}
