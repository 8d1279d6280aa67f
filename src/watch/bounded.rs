//! Reading a VMM's replies with a cap on size and a deadline on time.
//!
//! A VMM is not trusted (a guest may have taken it over): whatever it sends,
//! watch holds at most a cap's worth of it and waits at most until a
//! deadline, then gives up with an error (which watch reports as an `error`
//! event). The deadline bounds the whole reply, so a server dripping one
//! byte at a time cannot keep a read alive by beating a per-read timeout.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// How much is asked of the socket per read.
const CHUNK: usize = 16 * 1024;

/// A connected socket and what was read from it but not yet consumed.
pub struct Bounded {
    stream: UnixStream,
    pending: Vec<u8>,
}

impl Bounded {
    /// Connect to `path` by `deadline`. A listener whose backlog is full makes
    /// a blocking connect(2) on a Unix socket wait for as long as the server
    /// likes, so the connect is non-blocking and retried until the deadline.
    pub fn connect(path: &Path, deadline: Instant) -> io::Result<Self> {
        let stream = loop {
            match connect_nonblocking(path) {
                Ok(s) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the server does not accept connections (backlog full)",
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e),
            }
        };
        stream.set_nonblocking(false)?;
        // Requests are small; a server that never reads cannot hold a write long.
        stream.set_write_timeout(Some(left(deadline)?))?;
        Ok(Bounded {
            stream,
            pending: Vec::new(),
        })
    }

    /// The socket (to send on, or to ask for the peer's credentials).
    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// The next line (without its `\n`), at most `cap` bytes with the
    /// newline, complete by `deadline`.
    pub fn read_line(&mut self, cap: usize, deadline: Instant) -> io::Result<Vec<u8>> {
        let mut line = self.read_until(b"\n", cap, deadline)?;
        line.pop();
        Ok(line)
    }

    /// Everything up to and including the first `delim`, at most `cap` bytes,
    /// complete by `deadline`.
    pub fn read_until(
        &mut self,
        delim: &[u8],
        cap: usize,
        deadline: Instant,
    ) -> io::Result<Vec<u8>> {
        let mut searched: usize = 0;
        loop {
            let from = searched.saturating_sub(delim.len() - 1);
            if let Some(at) = find(&self.pending[from..], delim) {
                let end = from + at + delim.len();
                if end > cap {
                    return Err(over(cap));
                }
                let rest = self.pending.split_off(end);
                return Ok(std::mem::replace(&mut self.pending, rest));
            }
            if self.pending.len() >= cap {
                return Err(over(cap));
            }
            searched = self.pending.len();
            if self.fill(deadline)? == 0 {
                return Err(eof());
            }
        }
    }

    /// Exactly `n` bytes (the caller checked `n` against its cap), by `deadline`.
    pub fn read_exact(&mut self, n: usize, deadline: Instant) -> io::Result<Vec<u8>> {
        while self.pending.len() < n {
            if self.fill(deadline)? == 0 {
                return Err(eof());
            }
        }
        let rest = self.pending.split_off(n);
        Ok(std::mem::replace(&mut self.pending, rest))
    }

    /// Everything until the peer closes, at most `cap` bytes, by `deadline`.
    pub fn read_to_end(&mut self, cap: usize, deadline: Instant) -> io::Result<Vec<u8>> {
        while self.fill(deadline)? > 0 {
            if self.pending.len() > cap {
                return Err(over(cap));
            }
        }
        Ok(std::mem::take(&mut self.pending))
    }

    /// Read once more into `pending`, waiting no later than `deadline`.
    fn fill(&mut self, deadline: Instant) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(left(deadline)?))?;
        let mut chunk = [0u8; CHUNK];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.pending.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(late())
                }
                Err(e) => return Err(e),
            }
        }
    }
}

fn connect_nonblocking(path: &Path) -> io::Result<UnixStream> {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let addr = UnixAddr::new(path)?;
    // A Unix stream connect never returns EINPROGRESS: it is done, or EAGAIN.
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr)?;
    Ok(UnixStream::from(fd))
}

/// Time left until `deadline`, or the error of a reply that came too late.
fn left(deadline: Instant) -> io::Result<Duration> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(late()),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn over(cap: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("reply longer than the {} KiB podtap accepts", cap / 1024),
    )
}

fn late() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "reply not complete in time (the VMM is stuck or dripping)",
    )
}

fn eof() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the VMM closed the connection mid-reply",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::Write;

    fn pair(data: &[u8]) -> Bounded {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(data).unwrap();
        drop(a);
        Bounded {
            stream: b,
            pending: Vec::new(),
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn lines_come_one_at_a_time_and_the_rest_waits() {
        let mut r = pair(b"one\ntwo\nthr");
        assert_eq!(r.read_line(16, soon()).unwrap(), b"one");
        assert_eq!(r.read_line(16, soon()).unwrap(), b"two");
        let e = r.read_line(16, soon()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_line_over_the_cap_is_an_error_not_a_buffer() {
        let mut r = pair(&[b'x'; 100]);
        let e = r.read_line(10, soon()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        // A line of exactly the cap (newline included) is taken.
        let mut r = pair(b"123456789\n");
        assert_eq!(r.read_line(10, soon()).unwrap(), b"123456789");
    }

    #[test]
    fn a_delimiter_split_across_reads_is_found_and_bodies_are_exact() {
        let mut r = pair(b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody");
        let head = r.read_until(b"\r\n\r\n", 64, soon()).unwrap();
        assert!(head.ends_with(b"b\r\n\r\n"));
        assert_eq!(r.read_exact(2, soon()).unwrap(), b"bo");
        assert_eq!(r.read_to_end(8, soon()).unwrap(), b"dy");
    }

    #[test]
    fn a_silent_peer_runs_into_the_deadline() {
        let (_a, b) = UnixStream::pair().unwrap();
        let mut r = Bounded {
            stream: b,
            pending: Vec::new(),
        };
        let e = r
            .read_line(10, Instant::now() + Duration::from_millis(50))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
