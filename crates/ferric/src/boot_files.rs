//! What the boot file server serves of `boot_http_root`: every file, with range requests
//! (tower-http's `ServeDir`), but the conductor's image cache only through deploy tokens.
//!
//! The cache (`image-cache/`, `ferric_drivers::image_cache`) holds images under names derived
//! from what they are (`glance-<image UUID>`): served as they are, anyone on the boot network
//! who knew a private Glance image's UUID could download it. So under `image-cache/` only
//! `image-cache/t/<token>` is served — the link a node deploying an image was given, unguessable
//! (256 random bits) and removed when that deploy ends — and every other path answers 404, as
//! a missing file does (nothing tells a hidden entry from an absent one).
//!
//! Beside the files, `POST /peers/<swarm>` is the tracker of peer-assisted image delivery
//! (`ferric_drivers::peers`): agents deploying an image say which of its pieces they hold and
//! learn who else holds which, with the swarm's secret as a bearer token.
//!
//! The path is read as `ServeDir` reads it (percent-decoded, empty and `.` segments dropped):
//! `/./image-cache/…`, `//image-cache/…` or `/image%2Dcache/…` name the same directory to
//! `ServeDir`, so they are held back too. `..` is refused by `ServeDir` itself.

use std::path::{Path, PathBuf};

use axum::extract::{Path as AxumPath, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ferric_drivers::image_cache::{CACHE_DIR, TOKEN_DIR};
use ferric_drivers::peers::{Announce, Swarms, TrackerError};
use tower::ServiceExt;
use tower_http::services::{ServeDir, ServeFile};

/// The boot file server's routes over `root`, and the tracker of `swarms`.
pub(crate) fn router(root: &Path, swarms: Option<Swarms>) -> axum::Router {
    let files = ServeDir::new(root);
    let tokens = root.join(CACHE_DIR).join(TOKEN_DIR);
    let router = axum::Router::new();
    let router = match swarms {
        Some(swarms) => router.route(
            "/peers/{swarm}",
            axum::routing::post(move |swarm, headers, body| {
                announce(swarms.clone(), swarm, headers, body)
            }),
        ),
        None => router,
    };
    router.fallback(move |request: Request| serve(files.clone(), tokens.clone(), request))
}

/// The tracker: an agent's announce, answered with the other members and its origin grants.
async fn announce(
    swarms: Swarms,
    AxumPath(swarm): AxumPath<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let refuse = |status: StatusCode, message: String| {
        (status, axum::Json(serde_json::json!({"error": message}))).into_response()
    };
    let Some(secret) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "send the swarm's secret as `Authorization: Bearer <secret>`".to_owned(),
        );
    };
    let announce: Announce = match serde_json::from_slice(&body) {
        Ok(announce) => announce,
        Err(error) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "the body must be {{\"peer\": <node UUID>, \"have\": [[start, end], …], \
                     \"want_origin\": <count>}}: {error}"
                ),
            );
        }
    };
    match swarms.announce(&swarm, secret.trim(), announce) {
        Ok(reply) => axum::Json(reply).into_response(),
        Err(error) => {
            let status = match error {
                TrackerError::UnknownSwarm(_) => StatusCode::NOT_FOUND,
                TrackerError::Unauthorized => StatusCode::UNAUTHORIZED,
                TrackerError::UnknownMember(_) => StatusCode::FORBIDDEN,
                TrackerError::BadRange(..) => StatusCode::BAD_REQUEST,
            };
            refuse(status, error.to_string())
        }
    }
}

async fn serve(files: ServeDir, tokens: PathBuf, request: Request) -> Response {
    match classify(request.uri().path()) {
        Target::File => match files.oneshot(request).await {
            Ok(response) => response.into_response(),
            Err(never) => match never {},
        },
        Target::Token(token) => {
            // What each deploy took from the cache (the lab's peer suite sums these): a prefix
            // of the token only, which is a credential while its deploy runs.
            let range = request
                .headers()
                .get(axum::http::header::RANGE)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("whole")
                .to_owned();
            tracing::info!(token = %&token[..8], %range, "image cache token served");
            match ServeFile::new(tokens.join(token)).oneshot(request).await {
                Ok(response) => response.into_response(),
                Err(never) => match never {},
            }
        }
        Target::Hidden => StatusCode::NOT_FOUND.into_response(),
    }
}

/// What a request path names.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A file under the root, for `ServeDir` (which refuses what it cannot read).
    File,
    /// A deploy token's link in the image cache.
    Token(String),
    /// Anything else under the image cache: 404.
    Hidden,
}

fn classify(path: &str) -> Target {
    let Ok(decoded) = percent_encoding::percent_decode_str(path).decode_utf8() else {
        // ServeDir refuses a path that is not UTF-8 once decoded.
        return Target::File;
    };
    let segments: Vec<&str> = decoded
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect();
    match segments.as_slice() {
        [first, ..] if *first != CACHE_DIR => Target::File,
        [] => Target::File,
        [_, dir, token] if *dir == TOKEN_DIR && is_token(token) => {
            Target::Token((*token).to_owned())
        }
        _ => Target::Hidden,
    }
}

/// A token as `ImageCache` makes them: 64 lowercase hex digits.
fn is_token(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_token_links_of_the_image_cache_are_served() {
        let token = "0123456789abcdef".repeat(4);
        assert_eq!(
            classify(&format!("/image-cache/t/{token}")),
            Target::Token(token.clone())
        );
        assert_eq!(
            classify(&format!("//image-cache/./t//{token}")),
            Target::Token(token.clone())
        );
        let upper = format!("/image-cache/t/{}", token.to_uppercase());
        let nested = format!("/image-cache/t/{token}/x");
        for hidden in [
            "/image-cache/glance-6e4d3c1a-2b9f-4c55-9a34-0f3f2b8d1e77",
            "/image-cache",
            "/image-cache/",
            "/image-cache/t",
            "/image-cache/t/",
            "/image-cache/t/short",
            "/./image-cache/glance-x",
            "//image-cache/glance-x",
            "/image%2Dcache/glance-x",
            "/image-cache%2Fglance-x",
            "/image-cache/url-0123",
            upper.as_str(),
            nested.as_str(),
        ] {
            assert_eq!(classify(hidden), Target::Hidden, "{hidden}");
        }
        for file in [
            "/boot.ipxe",
            "/images/os.img",
            "/",
            "/vmedia/n.iso",
            "/image-cachex/a",
        ] {
            assert_eq!(classify(file), Target::File, "{file}");
        }
    }
}
