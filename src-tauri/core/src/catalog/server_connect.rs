//! How this desktop opens a connection to a team catalog's server: every connection (the pool's,
//! the change listener's) is made by [`Transport::connect`].
//!
//! - **TLS** when the URL asks for it (`sslmode=require`, `verify-ca`, `verify-full`): the server's
//!   certificate verified (see `server::tls_connector`); a server that does not speak TLS is
//!   refused by the driver.
//! - **Plain TCP** otherwise, on which **the password is only ever proven with SCRAM-SHA-256**, as
//!   libpq's `require_auth=scram-sha-256` does: a server (or anyone between) that asks for the
//!   password in clear text (AuthenticationCleartextPassword) or as MD5 (a hash that logs in as
//!   well as the password does) is refused before anything is sent, with
//!   [`ServerError::InsecureAuth`](super::server::ServerError::InsecureAuth). tokio-postgres has
//!   no such setting, so the plain socket is made here ([`PlainSocket`]: the URL's hosts in turn,
//!   its connect timeout and keepalives) and handed to the driver through [`AuthWatch`], which
//!   reads the server's messages of the startup phase as they arrive and fails the read that would
//!   hand the driver such a request. The driver answers one only after reading it, so the password
//!   is never written.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::tls::NoTls;
use tokio_postgres::{AsyncMessage, Client, Config, Connection};

/// What a server asked for that a connection without TLS refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InsecureAuth {
    /// AuthenticationCleartextPassword: the password itself.
    #[error("the password in clear text")]
    Cleartext,
    /// AuthenticationMD5Password: a hash of the password that logs in as well as the password.
    #[error("the password as an MD5 hash (which can be replayed)")]
    Md5,
}

impl InsecureAuth {
    /// The refusal inside a driver error, if that is what ended the connection.
    pub(crate) fn of(e: &tokio_postgres::Error) -> Option<Self> {
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            if let Some(refused) =
                s.downcast_ref::<io::Error>().and_then(|io| io.get_ref()).and_then(|e| e.downcast_ref::<Self>())
            {
                return Some(*refused);
            }
            source = s.source();
        }
        None
    }
}

/// A connection's messages from the server (notices, notifications), to poll (the change
/// listener) or to drain (the pool); it ends when the connection does.
pub(crate) type Messages = Pin<Box<dyn Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Send>>;

/// How a server catalog's connections are made (see the module docs).
#[derive(Clone)]
pub(crate) enum Transport {
    /// TLS, the server's certificate verified against these roots.
    Tls(tokio_postgres_rustls::MakeRustlsConnect),
    /// Plain TCP (or a Unix socket), SCRAM only.
    Plain,
}

impl Transport {
    /// Connects with `config` (its password resolved).
    pub(crate) async fn connect(&self, config: &Config) -> Result<(Client, Messages), tokio_postgres::Error> {
        match self {
            Self::Tls(tls) => {
                let (client, connection) = config.connect(tls.clone()).await?;
                Ok((client, messages(connection)))
            }
            Self::Plain => {
                let mut config = config.clone();
                config.ssl_mode(SslMode::Disable);
                let socket = AuthWatch::new(PlainSocket::new(&config));
                let (client, connection) = config.connect_raw(socket, NoTls).await?;
                Ok((client, messages(connection)))
            }
        }
    }
}

fn messages<S, T>(mut connection: Connection<S, T>) -> Messages
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    Box::pin(futures_util::stream::poll_fn(move |cx| connection.poll_message(cx)))
}

/// The pool's connections: made by [`Transport::connect`], their messages drained on a task of
/// their own (a notice logged) until the connection ends.
impl deadpool_postgres::Connect for Transport {
    fn connect(
        &self,
        config: &Config,
    ) -> Pin<Box<dyn Future<Output = Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>> + Send + '_>>
    {
        let config = config.clone();
        Box::pin(async move {
            let (client, mut messages) = Transport::connect(self, &config).await?;
            let task = tokio::spawn(async move {
                while let Some(message) = messages.next().await {
                    match message {
                        Ok(AsyncMessage::Notice(notice)) => {
                            tracing::info!(severity = notice.severity(), message = notice.message(), "catalog server")
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "a catalog server connection ended");
                            return;
                        }
                    }
                }
            });
            Ok((client, task))
        })
    }
}

/// The type of the message the server sends to ask for (or accept) a password.
const AUTHENTICATION: u8 = b'R';
/// Its codes: accepted, clear text, MD5.
const AUTH_OK: u32 = 0;
const AUTH_CLEARTEXT: u32 = 3;
const AUTH_MD5: u32 = 5;

/// Reads the server's messages of the startup phase (`type`, a 4-byte length, the body) as their
/// bytes arrive, in any pieces, until the server accepts the login.
#[derive(Debug, Default)]
struct StartupWatch {
    /// The message header read so far (type and length).
    header: [u8; 5],
    header_len: usize,
    /// Body bytes of the current message still to come.
    body_left: usize,
    /// The first 4 body bytes of an authentication message (its code) read so far.
    code: [u8; 4],
    code_len: usize,
    /// AuthenticationOk was read: nothing more to watch.
    done: bool,
}

impl StartupWatch {
    /// Takes the next bytes from the server; an error for the request that is refused.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), InsecureAuth> {
        for &byte in bytes {
            if self.done {
                return Ok(());
            }
            if self.header_len < self.header.len() {
                self.header[self.header_len] = byte;
                self.header_len += 1;
                if self.header_len == self.header.len() {
                    let length = u32::from_be_bytes([self.header[1], self.header[2], self.header[3], self.header[4]]);
                    // The length counts itself; a shorter one is not PostgreSQL (the driver says so).
                    self.body_left = (length as usize).saturating_sub(4);
                    self.code_len = 0;
                    if self.body_left == 0 {
                        self.header_len = 0;
                    }
                }
                continue;
            }
            if self.header[0] == AUTHENTICATION && self.code_len < self.code.len() {
                self.code[self.code_len] = byte;
                self.code_len += 1;
                if self.code_len == self.code.len() {
                    match u32::from_be_bytes(self.code) {
                        AUTH_CLEARTEXT => return Err(InsecureAuth::Cleartext),
                        AUTH_MD5 => return Err(InsecureAuth::Md5),
                        AUTH_OK => self.done = true,
                        _ => {}
                    }
                }
            }
            self.body_left -= 1;
            if self.body_left == 0 {
                self.header_len = 0;
            }
        }
        Ok(())
    }
}

/// A plain stream to the server whose startup phase is watched by [`StartupWatch`]: the read
/// that completes a request for the password in clear text or as MD5 fails (its bytes never reach
/// the driver), and so does every read and write after it.
struct AuthWatch<S> {
    inner: S,
    watch: StartupWatch,
    refused: Option<InsecureAuth>,
}

impl<S> AuthWatch<S> {
    fn new(inner: S) -> Self {
        Self { inner, watch: StartupWatch::default(), refused: None }
    }

    fn refusal(refused: InsecureAuth) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, refused)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthWatch<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if let Some(refused) = self.refused {
            return Poll::Ready(Err(Self::refusal(refused)));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let this = &mut *self;
        if let Err(refused) = this.watch.feed(&buf.filled()[before..]) {
            this.refused = Some(refused);
            buf.set_filled(before);
            return Poll::Ready(Err(Self::refusal(refused)));
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthWatch<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if let Some(refused) = self.refused {
            return Poll::Ready(Err(Self::refusal(refused)));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// An open plain socket to the server.
enum Open {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

/// A plain socket to the server that connects on first use, so that a failure to connect is an
/// I/O error the driver reports as its own (its error type has no public constructor).
struct PlainSocket {
    state: SocketState,
}

enum SocketState {
    Connecting(Pin<Box<dyn Future<Output = io::Result<Open>> + Send>>),
    Open(Open),
    Failed(io::ErrorKind),
}

impl PlainSocket {
    fn new(config: &Config) -> Self {
        Self { state: SocketState::Connecting(Box::pin(connect_socket(config.clone()))) }
    }

    fn poll_open(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&mut Open>> {
        if let SocketState::Connecting(connecting) = &mut self.state {
            match ready!(connecting.as_mut().poll(cx)) {
                Ok(open) => self.state = SocketState::Open(open),
                Err(e) => {
                    self.state = SocketState::Failed(e.kind());
                    return Poll::Ready(Err(e));
                }
            }
        }
        match &mut self.state {
            SocketState::Open(open) => Poll::Ready(Ok(open)),
            SocketState::Failed(kind) => Poll::Ready(Err(io::Error::new(*kind, "not connected to the server"))),
            SocketState::Connecting(_) => unreachable!("connected above"),
        }
    }
}

impl AsyncRead for PlainSocket {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match ready!(self.poll_open(cx))? {
            Open::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(unix)]
            Open::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PlainSocket {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match ready!(self.poll_open(cx))? {
            Open::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(unix)]
            Open::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match ready!(self.poll_open(cx))? {
            Open::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(unix)]
            Open::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match ready!(self.poll_open(cx))? {
            Open::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(unix)]
            Open::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// Connects to the first of the URL's hosts (and their addresses) that answers, as the driver
/// does: `hostaddr` before the host's name, the connect timeout per address, TCP_NODELAY, the
/// keepalives and the user timeout the URL sets.
async fn connect_socket(config: Config) -> io::Result<Open> {
    let (hosts, hostaddrs, ports) = (config.get_hosts(), config.get_hostaddrs(), config.get_ports());
    let timeout = config.get_connect_timeout().copied();
    let mut last = None;
    for i in 0..hosts.len().max(hostaddrs.len()) {
        let port = ports.get(i).or_else(|| ports.first()).copied().unwrap_or(5432);
        let attempt = match (hostaddrs.get(i), hosts.get(i)) {
            (Some(ip), _) => connect_tcp(&[SocketAddr::new(*ip, port)], timeout, &config).await,
            (None, Some(Host::Tcp(name))) => match tokio::net::lookup_host((name.as_str(), port)).await {
                Ok(addrs) => connect_tcp(&addrs.collect::<Vec<_>>(), timeout, &config).await,
                Err(e) => Err(io::Error::new(e.kind(), format!("cannot resolve {name}: {e}"))),
            },
            #[cfg(unix)]
            (None, Some(Host::Unix(dir))) => {
                let path = dir.join(format!(".s.PGSQL.{port}"));
                match with_timeout(tokio::net::UnixStream::connect(&path), timeout).await {
                    Ok(stream) => Ok(Open::Unix(stream)),
                    Err(e) => Err(io::Error::new(e.kind(), format!("cannot connect to {}: {e}", path.display()))),
                }
            }
            (None, None) => continue,
        };
        match attempt {
            Ok(open) => return Ok(open),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the URL names no host")))
}

async fn connect_tcp(addrs: &[SocketAddr], timeout: Option<Duration>, config: &Config) -> io::Result<Open> {
    let mut last = None;
    for addr in addrs {
        match with_timeout(TcpStream::connect(addr), timeout).await {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                let socket = socket2::SockRef::from(&stream);
                if config.get_keepalives() {
                    let mut keepalive = socket2::TcpKeepalive::new().with_time(config.get_keepalives_idle());
                    #[cfg(not(any(target_os = "openbsd", target_os = "redox", target_os = "solaris")))]
                    if let Some(interval) = config.get_keepalives_interval() {
                        keepalive = keepalive.with_interval(interval);
                    }
                    #[cfg(not(any(
                        target_os = "openbsd",
                        target_os = "redox",
                        target_os = "solaris",
                        target_os = "windows"
                    )))]
                    if let Some(retries) = config.get_keepalives_retries() {
                        keepalive = keepalive.with_retries(retries);
                    }
                    socket.set_tcp_keepalive(&keepalive)?;
                }
                #[cfg(target_os = "linux")]
                if let Some(user_timeout) = config.get_tcp_user_timeout() {
                    socket.set_tcp_user_timeout(Some(*user_timeout))?;
                }
                return Ok(Open::Tcp(stream));
            }
            Err(e) => last = Some(io::Error::new(e.kind(), format!("cannot connect to {addr}: {e}"))),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host has no address")))
}

async fn with_timeout<T>(connect: impl Future<Output = io::Result<T>>, timeout: Option<Duration>) -> io::Result<T> {
    match timeout {
        Some(timeout) => tokio::time::timeout(timeout, connect)
            .await
            .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "connection timeout"))),
        None => connect.await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn auth(code: u32, rest: &[u8]) -> Vec<u8> {
        let mut body = code.to_be_bytes().to_vec();
        body.extend_from_slice(rest);
        message(b'R', &body)
    }

    /// Every way of cutting the server's bytes into reads gives the same verdict.
    fn verdict(bytes: &[u8]) -> Vec<Result<(), InsecureAuth>> {
        let whole = {
            let mut w = StartupWatch::default();
            w.feed(bytes)
        };
        let mut verdicts = vec![whole];
        for cut in 1..bytes.len() {
            let mut w = StartupWatch::default();
            verdicts.push(w.feed(&bytes[..cut]).and_then(|()| w.feed(&bytes[cut..])));
        }
        let mut byte_by_byte = StartupWatch::default();
        verdicts.push(bytes.iter().try_for_each(|b| byte_by_byte.feed(std::slice::from_ref(b))));
        verdicts.dedup();
        verdicts
    }

    #[test]
    fn clear_text_and_md5_are_refused_scram_and_trust_are_not() {
        let notice = message(b'N', b"SNOTICE\0Mhello\0\0");
        let sasl = auth(10, b"SCRAM-SHA-256\0\0");
        let cases: [(Vec<u8>, Result<(), InsecureAuth>); 6] = [
            ([notice.clone(), auth(3, b"")].concat(), Err(InsecureAuth::Cleartext)),
            (auth(5, b"salt"), Err(InsecureAuth::Md5)),
            ([sasl.clone(), auth(11, b"r=abc"), auth(12, b"v=xyz"), auth(0, b"")].concat(), Ok(())),
            (auth(0, b""), Ok(())),
            // After the login is accepted, nothing is watched: a later 'R' cannot happen anyway.
            ([auth(0, b""), message(b'S', b"a\0b\0"), auth(3, b"")].concat(), Ok(())),
            // An error from the server (a wrong database) passes: the driver reports it.
            (message(b'E', b"SFATAL\0C3D000\0\0"), Ok(())),
        ];
        for (bytes, expected) in cases {
            assert_eq!(verdict(&bytes), vec![expected], "{bytes:?}");
        }
    }
}
