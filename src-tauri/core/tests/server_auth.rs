//! The team server connection never gives the password away (issue 32): on a connection without
//! TLS only SCRAM-SHA-256 proves it; a server that asks for it in clear text or as MD5 is refused
//! before anything is sent. A fake PostgreSQL server on 127.0.0.1 asks and records what the client
//! sends; the real throwaway server (`scripts/with-postgres`: scram-sha-256, plain and TLS) still
//! connects both ways.

use pe_core::catalog::server::testing::fresh_database;
use pe_core::catalog::server::{CatalogUrl, InsecureAuth, ServerCatalog, ServerError, ServerUrl};
use pe_core::catalog::server_changes::CatalogChange;
use pe_core::catalog::Catalog;
use pe_core::{Coded, ErrorCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PASSWORD: &str = "pw-that-must-not-leave-7f3a";

fn no_env(_: &str) -> Option<String> {
    None
}

async fn connect(url: &str) -> Result<ServerCatalog, ServerError> {
    // No home: a developer's own ~/.pgpass is never read.
    ServerCatalog::connect_with(&ServerUrl::parse(url).unwrap(), &no_env, None).await
}

/// What the fake server answers the startup message with.
#[derive(Clone, Copy)]
enum Ask {
    /// AuthenticationCleartextPassword.
    Cleartext,
    /// AuthenticationMD5Password with a salt.
    Md5,
    /// 'N' to an SSLRequest (and the same cleartext request after, when the client goes on).
    NoTls,
}

/// A fake server for one connection: it answers an SSLRequest with 'N', reads the startup
/// message, asks for the password as `ask` says, and returns what the client sent next: its
/// answer, or nothing when it closed the connection instead.
async fn fake_server(ask: Ask) -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        loop {
            let Ok(length) = socket.read_u32().await else { return Vec::new() };
            let mut body = vec![0; length as usize - 4];
            socket.read_exact(&mut body).await.unwrap();
            if body == 80_877_103u32.to_be_bytes() {
                // SSLRequest: no TLS here.
                socket.write_all(b"N").await.unwrap();
                continue;
            }
            break;
        }
        let request: Vec<u8> = match ask {
            Ask::Cleartext | Ask::NoTls => [&b"R"[..], &8u32.to_be_bytes(), &3u32.to_be_bytes()].concat(),
            Ask::Md5 => [&b"R"[..], &12u32.to_be_bytes(), &5u32.to_be_bytes(), b"salt"].concat(),
        };
        socket.write_all(&request).await.unwrap();
        // The client's next bytes (a password message), or none when it closes the connection.
        let mut sent = Vec::new();
        let _ = socket.read_buf(&mut sent).await;
        sent
    });
    (port, server)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_asking_for_the_password_in_clear_text_or_md5_without_tls_gets_nothing() {
    for (ask, expected) in [(Ask::Cleartext, InsecureAuth::Cleartext), (Ask::Md5, InsecureAuth::Md5)] {
        // No sslmode (libpq's default `prefer`), `prefer` and `disable`: all plain here.
        for query in ["", "?sslmode=prefer", "?sslmode=disable"] {
            let (port, server) = fake_server(ask).await;
            let url = format!("postgres://alice:{PASSWORD}@127.0.0.1:{port}/catalog{query}");
            let err = connect(&url).await.err().expect("the connection is refused");
            let sent = server.await.unwrap();
            assert!(!contains(&sent, PASSWORD.as_bytes()), "{query}: the password was sent: {sent:?}");
            assert!(sent.is_empty(), "{query}: the client sent {sent:?} after being asked");
            assert!(matches!(&err, ServerError::InsecureAuth { asked, .. } if *asked == expected), "{query}: {err:?}");
            assert_eq!(err.code(), ErrorCode::Catalog);
            let message = err.to_string();
            assert!(!message.contains(PASSWORD), "{message}");
            assert!(message.contains("without TLS; nothing was sent"), "{message}");
            assert!(message.contains("sslmode=verify-full") && message.contains("scram-sha-256"), "{message}");
            assert!(message.contains(&expected.to_string()), "{message}");
        }
    }
}

/// What held in the probe stays: `sslmode=require` never falls back to a plain connection.
#[tokio::test(flavor = "multi_thread")]
async fn sslmode_require_refuses_a_server_without_tls() {
    let (port, server) = fake_server(Ask::NoTls).await;
    let err = connect(&format!("postgres://alice:{PASSWORD}@127.0.0.1:{port}/catalog?sslmode=require"))
        .await
        .err()
        .expect("a server without TLS is refused");
    assert!(matches!(err, ServerError::Tls { .. }), "{err:?}");
    let sent = server.await.unwrap();
    assert!(!contains(&sent, PASSWORD.as_bytes()), "{sent:?}");
}

/// The real server (scram-sha-256) on a plain connection and on TLS with its own CA: both connect,
/// the pool's connections and the change listener's own (which takes the URL's CA too).
#[tokio::test(flavor = "multi_thread")]
async fn the_real_server_still_connects_with_scram_plain_and_over_tls() {
    let url = fresh_database("scram").await;
    let ca = std::env::var("PRODUCT_EXTRACTOR_TEST_PG_CA").expect("scripts/with-postgres sets the CA");
    let tls_url = format!("{url}?sslmode=verify-full&sslrootcert={}", ca.replace('/', "%2F"));
    for (url, tls) in [(url.clone(), false), (tls_url, true)] {
        let catalog = Catalog::open_url_with(&CatalogUrl::parse(&url).unwrap(), &no_env, None).await.unwrap();
        let server = catalog.server().unwrap();
        let client = server.client().await.unwrap();
        let row = client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await.unwrap();
        assert_eq!(row.get::<_, bool>(0), tls, "{}", server.url());
        let mut changes = catalog.subscribe_changes().unwrap();
        let heard = tokio::time::timeout(std::time::Duration::from_secs(30), changes.recv()).await;
        assert!(matches!(heard, Ok(Ok(CatalogChange::Listening))), "{}: {heard:?}", server.url());
    }
}
