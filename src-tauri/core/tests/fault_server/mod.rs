//! Raw TCP servers on 127.0.0.1 that misbehave in one chosen way each, for the fault suite.
//!
//! The fake Gemini (axum) answers like the real API; these answer like a broken network or proxy:
//! they read the request (head and `Content-Length` body, so closing never resets the client's
//! send) and then do exactly what [`Fault`] says, counting every body byte the kernel accepted.
//! Endless writers stop by themselves after [`WRITE_CEILING`] bytes, so a client that never gives
//! up fails its byte bound instead of hanging the test run.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The most an endless writer sends before it stops on its own.
pub const WRITE_CEILING: u64 = 1 << 30;

/// What the server does once it has read a request.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Close the connection without a byte.
    AcceptAndClose,
    /// Headers promising 100,000 bytes, 1,000 of them, then a TCP reset (SO_LINGER 0).
    ResetMidBody,
    /// Complete headers promising a body, then nothing, forever.
    HeadersThenStall,
    /// The status line and headers one byte at a time, one byte per interval.
    TrickledHeaders(Duration),
    /// Complete headers, then the body one byte per interval.
    TrickledBody(Duration),
    /// `Transfer-Encoding: chunked`, chunks forever.
    EndlessChunked,
    /// `Content-Length: 1 TB`, then bytes forever.
    HugeContentLength,
    /// No length at all (`Connection: close`, the body ends when the connection does), forever.
    EndlessCloseDelimited,
    /// A complete, ordinary answer.
    Answer { status: u16, content_type: &'static str, body: String },
}

/// A running fault server; stops when dropped.
pub struct FaultServer {
    addr: SocketAddr,
    body_bytes_written: Arc<AtomicU64>,
    requests: Arc<AtomicUsize>,
    /// Connections whose serving ended (finished, or the client went away), watched.
    ended: tokio::sync::watch::Sender<usize>,
    task: JoinHandle<()>,
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultServer {
    pub async fn start(fault: Fault) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let body_bytes_written = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (written, count) = (body_bytes_written.clone(), requests.clone());
        let ended = tokio::sync::watch::channel(0usize).0;
        let ending = ended.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (fault, written, count, ending) = (fault.clone(), written.clone(), count.clone(), ending.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, fault, &written, &count).await;
                    ending.send_modify(|n| *n += 1);
                });
            }
        });
        Self { addr, body_bytes_written, requests, ended, task }
    }

    /// A base URL for the client.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Body bytes the kernel accepted from the server (sent or in a socket buffer), all connections.
    pub fn body_bytes_written(&self) -> u64 {
        self.body_bytes_written.load(Ordering::Relaxed)
    }

    /// Waits until `n` connections have ended (the server stopped writing to them: they finished,
    /// or a write failed because the client went away).
    pub async fn connections_ended(&self, n: usize) {
        let mut ended = self.ended.subscribe();
        let _ = ended.wait_for(|done| *done >= n).await;
    }

    /// Requests read so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

/// A port nothing listens on (bound, then released).
pub async fn refused_base_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

/// Reads one request: the head up to the blank line, then `Content-Length` bytes of body.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 8192];
    let body_start = loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let text = String::from_utf8_lossy(&head[..body_start]).to_ascii_lowercase();
    let length: usize =
        text.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    let mut remaining = length.saturating_sub(head.len() - body_start);
    while remaining > 0 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        remaining = remaining.saturating_sub(n);
    }
    Ok(())
}

/// Writes `data` as body bytes, counting them.
async fn write_body(stream: &mut TcpStream, data: &[u8], written: &AtomicU64) -> std::io::Result<()> {
    stream.write_all(data).await?;
    written.fetch_add(data.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// Writes 64 KiB blocks (`frame` shapes each one) until the client goes or the ceiling is reached.
async fn write_forever(
    stream: &mut TcpStream,
    written: &AtomicU64,
    frame: impl Fn(&[u8]) -> Vec<u8>,
) -> std::io::Result<()> {
    let block = vec![b'x'; 64 * 1024];
    let framed = frame(&block);
    let mut sent = 0u64;
    while sent < WRITE_CEILING {
        write_body(stream, &framed, written).await?;
        sent += framed.len() as u64;
    }
    Ok(())
}

async fn serve(mut stream: TcpStream, fault: Fault, written: &AtomicU64, count: &AtomicUsize) -> std::io::Result<()> {
    loop {
        read_request(&mut stream).await?;
        count.fetch_add(1, Ordering::Relaxed);
        match &fault {
            Fault::AcceptAndClose => return Ok(()),
            Fault::ResetMidBody => {
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n")
                    .await?;
                write_body(&mut stream, &[b' '; 1000], written).await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                stream.set_zero_linger()?;
                return Ok(()); // dropped with linger 0: RST
            }
            Fault::HeadersThenStall => {
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n")
                    .await?;
                std::future::pending::<()>().await;
            }
            Fault::TrickledHeaders(every) => {
                let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\ncontent-length: 2\r\n\r\n{}";
                for byte in head {
                    stream.write_all(&[*byte]).await?;
                    tokio::time::sleep(*every).await;
                }
                return Ok(());
            }
            Fault::TrickledBody(every) => {
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n")
                    .await?;
                for _ in 0..100_000 {
                    write_body(&mut stream, b" ", written).await?;
                    tokio::time::sleep(*every).await;
                }
                return Ok(());
            }
            Fault::EndlessChunked => {
                stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
                    )
                    .await?;
                return write_forever(&mut stream, written, |block| {
                    let mut framed = format!("{:x}\r\n", block.len()).into_bytes();
                    framed.extend_from_slice(block);
                    framed.extend_from_slice(b"\r\n");
                    framed
                })
                .await;
            }
            Fault::HugeContentLength => {
                stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000000000\r\n\r\n",
                    )
                    .await?;
                return write_forever(&mut stream, written, <[u8]>::to_vec).await;
            }
            Fault::EndlessCloseDelimited => {
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
                    .await?;
                return write_forever(&mut stream, written, <[u8]>::to_vec).await;
            }
            Fault::Answer { status, content_type, body } => {
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes()).await?;
                write_body(&mut stream, body.as_bytes(), written).await?;
            }
        }
    }
}
