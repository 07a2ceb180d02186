//! Types what arrives over SOL on the serial port's socket, one connection per batch.
//!
//! QEMU's socket character device takes bytes only as fast as the guest drains its UART, and
//! drops the connection (with what it had not read yet) when the peer closes it: a busy guest
//! lost keystrokes. So the typist half-closes instead (QEMU reads everything, then the end)
//! and waits for QEMU to hang up, discarding the machine's output that comes back meanwhile
//! (the console log has it). Nothing stays connected to fill up with output unread.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Sender, channel};
use std::time::{Duration, Instant};

/// How long one batch may take to be read by the guest before the rest is given up.
const PATIENCE: Duration = Duration::from_secs(10);

/// The machine's typist: a thread that delivers, in order, what is sent to it on `socket`
/// (the batches that queued up while one was delivered go together).
pub(crate) fn start(machine: &str, socket: PathBuf) -> Sender<Vec<u8>> {
    let (sender, typed) = channel::<Vec<u8>>();
    let machine = machine.to_owned();
    let spawned = std::thread::Builder::new()
        .name(format!("typist-{machine}"))
        .spawn(move || {
            // Ends when the machine (the sender) is dropped.
            while let Ok(mut bytes) = typed.recv() {
                while let Ok(more) = typed.try_recv() {
                    bytes.extend(more);
                }
                if let Err(error) = deliver(&socket, &bytes) {
                    tracing::debug!(
                        %machine,
                        bytes = bytes.len(),
                        %error,
                        "characters typed over SOL dropped: the serial port's socket refused them"
                    );
                }
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the SOL typist thread; typed characters are dropped");
    }
    sender
}

fn deliver(socket: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_write_timeout(Some(PATIENCE))?;
    stream.write_all(bytes)?;
    stream.shutdown(std::net::Shutdown::Write)?;
    let deadline = Instant::now() + PATIENCE;
    let mut discarded = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the guest did not read them in time",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut discarded) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A serial port that reads slowly and answers with output of its own, as a booting guest
    /// does: every batch arrives whole and in order.
    #[test]
    fn every_keystroke_reaches_a_slow_reader_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("console.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let typist = start("test", socket);
        let typed: Vec<String> = (0..20).map(|n| format!("key{n};")).collect();
        for text in &typed {
            typist.send(text.clone().into_bytes()).unwrap();
        }
        let mut received = Vec::new();
        while received.len() < typed.concat().len() {
            let (mut stream, _) = listener.accept().unwrap();
            stream
                .write_all(b"[   1.000000] the machine's own output\r\n")
                .unwrap();
            let mut byte = [0u8; 1];
            loop {
                std::thread::sleep(Duration::from_millis(2));
                match stream.read(&mut byte).unwrap() {
                    0 => break,
                    _ => received.push(byte[0]),
                }
            }
        }
        assert_eq!(String::from_utf8(received).unwrap(), typed.concat());
    }
}
