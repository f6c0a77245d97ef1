//! The agent's log lines in the test process: a global subscriber (installed
//! once per test binary) writes every event of `sitegate` at `info` and above
//! as one JSON object a line into memory, so a test can wait for what the agent
//! says (an eviction count, a refused certificate), and into the agent's log
//! ring (what the `logs` operation reads), as `sitegate run` does.
//!
//! Tests of one binary share the buffer: take a [`Logs::mark`] before the part
//! of interest and look only at what came after it.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Buffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;

    fn make_writer(&'a self) -> Buffer {
        self.clone()
    }
}

static BUFFER: OnceLock<Buffer> = OnceLock::new();

/// The captured log of this test process.
#[derive(Clone)]
pub struct Logs(Buffer);

/// Starts capturing (the first call installs the subscriber).
pub fn capture() -> Logs {
    let buffer = BUFFER.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let buffer = Buffer::default();
        tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("sitegate=info"))
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(buffer.clone()),
            )
            // The agent's own ring, which the `logs` operation reads.
            .with(sitegate::logging::ring_layer())
            .try_init()
            .expect("no other log subscriber in this test binary");
        buffer
    });
    Logs(buffer.clone())
}

/// A position in the log.
#[derive(Clone, Copy, Debug)]
pub struct Mark(usize);

impl Logs {
    /// Where the log ends now.
    pub fn mark(&self) -> Mark {
        Mark(self.0.lock().len())
    }

    /// The events logged since `mark`, each `{"level", "fields": {"message", ...},
    /// "target", ...}`.
    pub fn since(&self, mark: Mark) -> Vec<Value> {
        let bytes = self.0.lock();
        let text = String::from_utf8_lossy(&bytes[mark.0.min(bytes.len())..]).into_owned();
        drop(bytes);
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The events since `mark` with this message.
    pub fn messages(&self, mark: Mark, message: &str) -> Vec<Value> {
        self.since(mark)
            .into_iter()
            .filter(|e| e["fields"]["message"] == message)
            .collect()
    }

    /// Waits for an event since `mark` with this message for which `pred`
    /// holds; panics with what was logged when it does not come in time.
    pub async fn wait_for(
        &self,
        mark: Mark,
        message: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(e) = self.messages(mark, message).into_iter().find(|e| pred(e)) {
                return e;
            }
            if tokio::time::Instant::now() >= deadline {
                let logged: Vec<String> = self.since(mark).iter().map(Value::to_string).collect();
                panic!(
                    "timed out after {timeout:?} waiting for the log line {message:?}; logged:\n{}",
                    logged.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
