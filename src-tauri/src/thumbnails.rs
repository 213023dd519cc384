//! The thumbnail protocol: the window loads a photo's thumbnail from `thumb://localhost/<sha256>`
//! (`http://thumb.localhost/<sha256>` where the webview wants it so; the UI builds the URL with
//! Tauri's `convertFileSrc`).
//!
//! A page of the catalog list names each row's photo by its content hash
//! ([`pe_core::catalog::ProductSummary::photo_sha256`]) instead of carrying its image, so a search
//! reads no image and sends none over IPC; only the rows on screen load theirs (`loading="lazy"`).
//! The queue's rows, an item's photos and a product's photos name theirs the same way: this is the
//! only way a thumbnail reaches the window.
//! A hash names one content whichever catalog is open, so a response never goes stale: the webview
//! may keep it for good (`immutable`).
//!
//! Only `GET` of a 64-digit lowercase hex hash is answered with an image; anything else is a 4xx
//! with no body worth reading. The body is the JPEG the app made itself when it prepared the photo,
//! sent as `image/jpeg` with `nosniff`, so nothing else can be served under this scheme.

use std::borrow::Cow;

use tauri::http::{header, Method, Request, Response, StatusCode};
use tauri::{Manager, Runtime, UriSchemeContext, UriSchemeResponder};

use crate::state::AppState;

/// The URI scheme. The UI reads it from the generated constants (`THUMBNAIL_SCHEME`).
pub const THUMBNAIL_SCHEME: &str = "thumb";

/// A year: what `immutable` means in practice.
const CACHE_CONTROL: &str = "private, max-age=31536000, immutable";

/// Registered with `register_asynchronous_uri_scheme_protocol`: answers on the async runtime, so
/// a slow catalog (a team server across the network) never blocks the webview's thread.
pub fn handle<R: Runtime>(ctx: UriSchemeContext<'_, R>, request: Request<Vec<u8>>, responder: UriSchemeResponder) {
    let state = ctx.app_handle().state::<AppState>().inner().clone();
    tauri::async_runtime::spawn(async move {
        responder.respond(respond(&state, &request).await);
    });
}

/// The response to one request (see the module's doc).
pub async fn respond(state: &AppState, request: &Request<Vec<u8>>) -> Response<Cow<'static, [u8]>> {
    if request.method() != Method::GET {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    }
    let Some(sha256) = hash_of(request.uri().path()) else {
        return status(StatusCode::NOT_FOUND);
    };
    match state.catalog().thumbnail_jpeg(sha256).await {
        Ok(Some(jpeg)) => Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "image/jpeg")
            .header(header::CACHE_CONTROL, CACHE_CONTROL)
            .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
            .body(Cow::Owned(jpeg))
            .unwrap_or_else(|_| status(StatusCode::INTERNAL_SERVER_ERROR)),
        Ok(None) => status(StatusCode::NOT_FOUND),
        Err(e) => {
            // The row shows no picture; the catalog's own views report the failure.
            tracing::warn!(error = %e, "a thumbnail could not be read");
            status(StatusCode::SERVICE_UNAVAILABLE)
        }
    }
}

/// The hash a path names: `/<64 lowercase hex digits>`, nothing more.
fn hash_of(path: &str) -> Option<&str> {
    path.strip_prefix('/').filter(|hash| pe_core::catalog::is_photo_hash(hash))
}

/// An empty response with `code`; not cached, so a photo saved later shows on the next look.
fn status(code: StatusCode) -> Response<Cow<'static, [u8]>> {
    let mut response = Response::new(Cow::Borrowed(&[][..]));
    *response.status_mut() = code;
    response.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lowercase_hash_is_a_thumbnail_path() {
        let hash = "0123456789abcdef".repeat(4);
        assert_eq!(hash_of(&format!("/{hash}")), Some(hash.as_str()));
        for bad in [
            String::new(),
            "/".into(),
            hash.clone(),
            format!("/{}", hash.to_uppercase()),
            format!("/{}", &hash[1..]),
            format!("/{hash}0"),
            format!("/{hash}/"),
            format!("/../{}", &hash[3..]),
            format!("/{}g", &hash[1..]),
        ] {
            assert_eq!(hash_of(&bad), None, "{bad}");
        }
    }
}
