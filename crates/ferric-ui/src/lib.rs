//! Ferric's web UI at `/ui`: a handful of static files compiled into the binary (one HTML
//! page, its script and style sheet, and the vendored xterm.js terminal), served by
//! `ferric server` beside the API.
//!
//! Theory of operation: the pages hold no data and no secrets, so they are public; the script
//! asks the operator to log in, keeps the credentials in the tab's `sessionStorage`, and
//! calls only the public API v1 with them (`Authorization: Basic`, as every other client), so
//! the API's authentication, policy and project scoping apply to the UI unchanged and nothing
//! here can show or do more than the operator could with the `baremetal` CLI. The page is a
//! single document routed by its URL fragment (`#/nodes`, `#/nodes/{uuid}`, …): every view
//! loads the same three files once, then only JSON from `/v1`.
//!
//! Architecture Invariant: this crate depends on no other Ferric crate and reaches no state;
//! everything the UI shows comes from `/v1`.
//!
//! Why static pages and JavaScript that calls `/v1`, not server-rendered pages: the UI is then one
//! more API client — the operator's own credentials go with every request, the API's
//! authentication, policy, project scoping, microversions and error texts apply unchanged, there is
//! no second session mechanism, and the node table is exactly as fast as the API's paged listing.
//! No framework and no build step: the page is small enough that plain DOM code stays readable, and
//! nothing but Rust is needed to build Ferric (xterm.js is vendored from npm's `@xterm/xterm` with
//! its licence, `scripts/vendor-xterm.sh`). Fetches use `credentials: "omit"` so the browser never
//! shows its own password dialog. Whether the caller may act on a node is read from the API (`GET
//! …/validate` needs the same rule as the actions; a 403 greys them out); search by name or UUID is
//! `GET /v1/nodes/{ident}`, by MAC a port lookup — no filter was added for the UI. `cargo xtask
//! ui-test` is its browser test.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One file of the UI: where it is served under `/ui/`, its media type and its bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// Every file the UI serves (the page itself is also served at `/ui` and `/ui/`).
const ASSETS: &[Asset] = &[
    Asset {
        path: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../assets/index.html"),
    },
    Asset {
        path: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/app.js"),
    },
    Asset {
        path: "views.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/views.js"),
    },
    Asset {
        path: "node.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/node.js"),
    },
    Asset {
        path: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/console.js"),
    },
    Asset {
        path: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../assets/style.css"),
    },
    Asset {
        path: "vendor/xterm.mjs",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/vendor/xterm.mjs"),
    },
    Asset {
        path: "vendor/xterm.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../assets/vendor/xterm.css"),
    },
    Asset {
        path: "vendor/LICENSE-xterm",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../assets/vendor/LICENSE-xterm"),
    },
];

/// What the browser may load and reach: only this origin (the API and the console's
/// WebSocket), no inline script, no framing. xterm.js writes `<style>` elements, hence
/// `'unsafe-inline'` for styles only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self' ws: wss:; \
     frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The routes of the UI, to merge into the server's router: `/ui`, `/ui/` and `/ui/{file}`.
pub fn router() -> Router {
    Router::new()
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/{*path}", get(asset))
}

async fn index() -> Response {
    serve("index.html")
}

async fn asset(Path(path): Path<String>) -> Response {
    serve(&path)
}

/// The asset at `path`, or a plain 404.
fn serve(path: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.path == path) else {
        return (
            StatusCode::NOT_FOUND,
            format!("no such file in the web UI: /ui/{path} (the UI starts at /ui/)"),
        )
            .into_response();
    };
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    // The files change only with the binary: revalidate, so an upgrade is seen at once.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get_path(path: &str) -> (StatusCode, String, String) {
        let response = router()
            .oneshot(
                Request::get(path)
                    .body(Body::empty())
                    .expect("a valid request"),
            )
            .await
            .expect("the router answers");
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        (
            status,
            content_type,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    #[tokio::test]
    async fn the_page_is_served_at_ui_with_and_without_a_slash() {
        for path in ["/ui", "/ui/", "/ui/index.html"] {
            let (status, content_type, body) = get_path(path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(content_type, "text/html; charset=utf-8", "{path}");
            assert!(body.contains("<title>Ferric</title>"), "{path}");
        }
    }

    #[tokio::test]
    async fn every_asset_the_page_names_is_served() {
        let (_, _, page) = get_path("/ui/").await;
        for asset in ASSETS {
            let (status, content_type, _) = get_path(&format!("/ui/{}", asset.path)).await;
            assert_eq!(status, StatusCode::OK, "{}", asset.path);
            assert_eq!(content_type, asset.content_type, "{}", asset.path);
        }
        for linked in ["/ui/app.js", "/ui/style.css", "/ui/vendor/xterm.css"] {
            assert!(page.contains(linked), "index.html links {linked}");
        }
    }

    #[tokio::test]
    async fn an_unknown_file_is_a_404_that_names_the_start_page() {
        let (status, _, body) = get_path("/ui/../v1/nodes").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _, body_missing) = get_path("/ui/nope.js").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body_missing.contains("/ui/"), "{body_missing}");
        assert!(!body.is_empty());
    }

    #[test]
    fn scripts_are_modules_without_inline_code() {
        let page = std::str::from_utf8(ASSETS[0].body).expect("utf-8 page");
        assert!(!page.contains("onclick="), "inline handlers break the CSP");
        assert!(page.contains(r#"<script type="module" src="/ui/app.js">"#));
    }
}
